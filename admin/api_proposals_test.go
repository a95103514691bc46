package admin

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/proposals"
)

// TestProposalRoutesRefuseBadInput: the routes answer each bad request
// with its own status, and a daemon without a store with 503.
func TestProposalRoutesRefuseBadInput(t *testing.T) {
	store := &proposals.Store{DB: testkit.OpenDB(t, filepath.Join(t.TempDir(), "state.db"))}
	id, err := store.Learn(t.Context(), dataplane.UnknownRequest{Session: "s_1", Method: "GET", Host: "api.example.com",
		Port: 443, Path: "/a/1", Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	on := (&API{Proposals: store}).Handler()
	off := (&API{}).Handler()
	for _, tc := range []struct {
		name         string
		h            http.Handler
		method, path string
		body         string
		want         int
	}{
		{"list", on, "GET", "/v1/proposals?session=s_1", "", http.StatusOK},
		{"list with a misspelt filter", on, "GET", "/v1/proposals?sesion=s_1", "", http.StatusBadRequest},
		{"unknown id", on, "GET", "/v1/proposals/pr_aaaaaaaaaaaaaaaaaaaa", "", http.StatusNotFound},
		{"malformed id", on, "GET", "/v1/proposals/x", "", http.StatusNotFound},
		{"unknown key", on, "POST", "/v1/proposals/" + id + "/reject", `{"by":"cli:a","reason":"r","extra":1}`, http.StatusBadRequest},
		{"no reason", on, "POST", "/v1/proposals/" + id + "/reject", `{"by":"cli:a"}`, http.StatusBadRequest},
		{"no decider", on, "POST", "/v1/proposals/" + id + "/reject", `{"reason":"r"}`, http.StatusBadRequest},
		{"reject", on, "POST", "/v1/proposals/" + id + "/reject", `{"by":"cli:a","reason":"r"}`, http.StatusOK},
		{"reject twice", on, "POST", "/v1/proposals/" + id + "/reject", `{"by":"cli:a","reason":"r"}`, http.StatusConflict},
		{"no store", off, "GET", "/v1/proposals", "", http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.want {
				t.Errorf("%s %s = %d, want %d: %s", tc.method, tc.path, rec.Code, tc.want, rec.Body)
			}
		})
	}
}
