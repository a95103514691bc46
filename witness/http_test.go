package witness

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// TestAddCheckpointStatuses walks one witness through the protocol over
// real HTTP; the steps run in order, each on the state the previous left.
func TestAddCheckpointStatuses(t *testing.T) {
	a := newTestLog(t, "example.com/log-a").grow("a", 10)
	forked := a.fork(3).grow("f", 7)                          // same key, diverges after record 3
	other := newTestLog(t, "example.com/log-a").grow("a", 10) // same origin, another key
	unknown := newTestLog(t, "example.com/unknown").grow("u", 5)
	b := newTestLog(t, "example.com/log-b").grow("b", 3)
	w := newWitness(t, t.TempDir(), a, b)
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()

	emptyWrongRoot := b.sign("example.com/log-b\n0\n" + b64(a.root(1)) + "\n")
	tampered := bytes.Replace(a.checkpoint(5), []byte("\n5\n"), []byte("\n6\n"), 1)
	steps := []struct {
		name       string
		old        uint64
		proof      []tlog.Hash
		checkpoint []byte
		code       int
		size       string // the 409 body
	}{
		{"unknown origin", 0, nil, unknown.checkpoint(5), http.StatusNotFound, ""},
		{"other key, same origin", 0, nil, other.checkpoint(5), http.StatusForbidden, ""},
		{"tampered body", 0, nil, tampered, http.StatusForbidden, ""},
		{"no signature block", 0, nil, []byte(a.body(5)), http.StatusBadRequest, ""},
		{"first checkpoint", 0, nil, a.checkpoint(5), http.StatusOK, ""},
		{"stale old 0", 0, nil, a.checkpoint(7), http.StatusConflict, "5\n"},
		{"wrong old size", 3, a.proof(3, 7), a.checkpoint(7), http.StatusConflict, "5\n"},
		{"old above checkpoint size", 5, nil, a.checkpoint(3), http.StatusBadRequest, ""},
		{"missing proof", 5, nil, a.checkpoint(7), http.StatusUnprocessableEntity, ""},
		{"tampered proof", 5, append([]tlog.Hash{flip(a.proof(5, 7)[0])}, a.proof(5, 7)[1:]...), a.checkpoint(7), http.StatusUnprocessableEntity, ""},
		{"proof between other sizes", 5, a.proof(4, 7), a.checkpoint(7), http.StatusUnprocessableEntity, ""},
		{"forked log", 5, forked.proof(5, 10), forked.checkpoint(10), http.StatusUnprocessableEntity, ""},
		{"consistent growth", 5, a.proof(5, 7), a.checkpoint(7), http.StatusOK, ""},
		{"same size, same root", 7, nil, a.checkpoint(7), http.StatusOK, ""},
		{"same size with a proof", 7, a.proof(5, 7), a.checkpoint(7), http.StatusUnprocessableEntity, ""},
		{"same size, forked root", 7, nil, forked.checkpoint(7), http.StatusConflict, "7\n"},
		{"growth to 10", 7, a.proof(7, 10), a.checkpoint(10), http.StatusOK, ""},
		{"old 0 with a proof", 0, a.proof(5, 7), b.checkpoint(3), http.StatusUnprocessableEntity, ""},
		{"empty tree, wrong root", 0, nil, emptyWrongRoot, http.StatusUnprocessableEntity, ""},
		{"empty tree", 0, nil, b.checkpoint(0), http.StatusOK, ""},
		{"first growth from empty", 0, nil, b.checkpoint(3), http.StatusOK, ""},
	}
	for _, s := range steps {
		code, ctype, body := post(t, srv.URL+"/add-checkpoint", formatAddRequest(s.old, s.proof, s.checkpoint))
		if code != s.code {
			t.Fatalf("%s: status %d (%q), want %d", s.name, code, body, s.code)
		}
		switch code {
		case http.StatusConflict:
			if ctype != "text/x.tlog.size" || body != s.size {
				t.Errorf("%s: 409 with Content-Type %q body %q, want text/x.tlog.size %q", s.name, ctype, body, s.size)
			}
		case http.StatusOK:
			ts, err := VerifyCosignature(w.VerifierKey(), append(bytes.Clone(s.checkpoint), body...))
			if err != nil || !ts.Equal(testNow) {
				t.Errorf("%s: cosignature %q: time %v, %v", s.name, body, ts, err)
			}
		}
	}
}

// TestAddCheckpointMalformed sends bodies that are not add-checkpoint
// requests; each is a 400 and changes nothing.
func TestAddCheckpointMalformed(t *testing.T) {
	a := newTestLog(t, "example.com/log-a").grow("a", 8)
	w := newWitness(t, t.TempDir(), a)
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()

	cp := string(a.checkpoint(5))
	h := b64(a.root(1))
	nonCanonical := h[:42] + "B="                        // same bytes' prefix, non-zero padding bits
	rootLine := "example.com/log-a\n5\n" + h[:43] + "\n" // root not 32 bytes
	cases := []struct{ name, body string }{
		{"empty", ""},
		{"no newline", "old 0"},
		{"not old", "new 0\n\n" + cp},
		{"leading zero", "old 01\n\n" + cp},
		{"negative", "old -1\n\n" + cp},
		{"two spaces", "old  0\n\n" + cp},
		{"trailing space", "old 0 \n\n" + cp},
		{"plus sign", "old +0\n\n" + cp},
		{"above 2^64", "old 18446744073709551616\n\n" + cp},
		{"above 2^63-1", "old 9223372036854775808\n\n" + cp},
		{"no empty line", "old 0\n" + cp},
		{"proof not base64", "old 0\nnot-a-hash\n\n" + cp},
		{"proof with CR", "old 0\n" + h + "\r\n\n" + cp},
		{"proof non-canonical base64", "old 0\n" + nonCanonical + "\n\n" + cp},
		{"proof short hash", "old 0\n" + h[:40] + "\n\n" + cp},
		{"64 proof lines", "old 0\n" + strings.Repeat(h+"\n", 64) + "\n" + cp},
		{"no checkpoint", "old 0\n\n"},
		{"checkpoint with NUL", "old 0\n\n" + strings.Replace(cp, "log-a\n", "log-a\n\x00", 1)},
		{"checkpoint bad root line", "old 0\n\n" + string(a.sign(rootLine))},
		{"checkpoint leading-zero size", "old 0\n\n" + string(a.sign(strings.Replace(a.body(5), "\n5\n", "\n05\n", 1)))},
		{"checkpoint two lines", "old 0\n\n" + string(a.sign("example.com/log-a\n5\n"))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, body := post(t, srv.URL+"/add-checkpoint", []byte(c.body))
			if code != http.StatusBadRequest {
				t.Errorf("status %d (%q), want 400", code, body)
			}
		})
	}
	if _, err := w.latest(a.origin); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("after malformed requests: latest = %v, want ErrNoCheckpoint", err)
	}

	big := append([]byte("old 0\n\n"), bytes.Repeat([]byte("x"), maxRequestSize)...)
	if code, _, _ := post(t, srv.URL+"/add-checkpoint", big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: status %d, want 413", code)
	}
	resp, err := http.Get(srv.URL + "/add-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /add-checkpoint: status %d, want 405", resp.StatusCode)
	}
}

// TestPushAndLatest drives the client side against the real handler: the
// statuses come back as the errors Add returned.
func TestPushAndLatest(t *testing.T) {
	a := newTestLog(t, "example.com/log-a").grow("a", 8)
	b := newTestLog(t, "example.com/log-b").grow("b", 2)
	other := newTestLog(t, "example.com/log-a").grow("a", 8)
	w := newWitness(t, t.TempDir(), a, b)
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()
	ctx := context.Background()

	cosig, err := Push(ctx, srv.Client(), srv.URL+"/", 0, nil, a.checkpoint(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyCosignature(w.VerifierKey(), append(a.checkpoint(5), cosig...)); err != nil {
		t.Errorf("cosignature from Push: %v", err)
	}
	var conflict *ConflictError
	if _, err := Push(ctx, nil, srv.URL, 0, nil, a.checkpoint(8)); !errors.As(err, &conflict) || conflict.Size != 5 {
		t.Errorf("stale push: %v, want *ConflictError{5}", err)
	}
	for _, c := range []struct {
		name  string
		old   uint64
		proof []tlog.Hash
		cp    []byte
		want  error
	}{
		{"unknown log", 0, nil, newTestLog(t, "example.com/x").grow("x", 1).checkpoint(1), ErrUnknownLog},
		{"other key", 0, nil, other.checkpoint(5), ErrBadSignature},
		{"bad proof", 5, a.proof(4, 8), a.checkpoint(8), ErrBadProof},
		{"malformed", 0, nil, []byte("example.com/log-a\n"), ErrBadRequest},
		{"too many proof hashes", 5, make([]tlog.Hash, MaxProofLines+1), a.checkpoint(8), ErrBadRequest},
	} {
		if _, err := Push(ctx, nil, srv.URL, c.old, c.proof, c.cp); !errors.Is(err, c.want) {
			t.Errorf("%s: Push = %v, want %v", c.name, err, c.want)
		}
	}

	got, err := Latest(ctx, nil, srv.URL, a.origin)
	if err != nil {
		t.Fatal(err)
	}
	logV, err := note.NewVerifier(a.vkey)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := note.Open(got, note.VerifierList(logV)); err != nil || n.Text != a.body(5) {
		t.Errorf("Latest: log signature: %v; body %q", err, got)
	}
	if ts, err := VerifyCosignature(w.VerifierKey(), got); err != nil || !ts.Equal(testNow) {
		t.Errorf("Latest: cosignature: %v %v", ts, err)
	}
	for _, origin := range []string{b.origin, "example.com/unknown"} {
		if _, err := Latest(ctx, nil, srv.URL, origin); !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("Latest(%q) = %v, want ErrNoCheckpoint", origin, err)
		}
	}
	resp, err := http.Get(srv.URL + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /checkpoint without origin: %d, want 400", resp.StatusCode)
	}
}

// TestPushOddAnswers checks the client against witnesses that answer out
// of protocol.
func TestPushOddAnswers(t *testing.T) {
	for _, c := range []struct {
		name     string
		code     int
		body     string
		sentinel error
	}{
		{"500", http.StatusInternalServerError, "boom", nil},
		{"409 without size", http.StatusConflict, "nope\n", nil},
		{"409 leading zero", http.StatusConflict, "05\n", nil},
		{"200 not signature lines", http.StatusOK, "hello\n", nil},
		{"200 empty", http.StatusOK, "", nil},
		{"400", http.StatusBadRequest, "bad", ErrBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				rw.WriteHeader(c.code)
				_, _ = rw.Write([]byte(c.body))
			}))
			defer srv.Close()
			_, err := Push(context.Background(), nil, srv.URL, 0, nil, []byte("x"))
			var conflict *ConflictError
			switch {
			case err == nil || errors.As(err, &conflict):
				t.Fatalf("Push = %v, want an error", err)
			case c.sentinel != nil && !errors.Is(err, c.sentinel):
				t.Errorf("Push = %v, want %v", err, c.sentinel)
			case c.sentinel == nil && statusOf(err) != http.StatusInternalServerError:
				t.Errorf("Push = %v wraps a protocol error", err)
			}
		})
	}
}
