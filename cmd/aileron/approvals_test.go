package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/printable"
)

// fakeApprovalsAPI answers the admin API's approval routes on home's admin
// socket from a fixed approval, recording the decisions it receives.
type fakeApprovalsAPI struct {
	mu        sync.Mutex
	ap        approvals.Approval
	decisions []string // "approve by" or "deny by: reason"
}

func startFakeApprovalsAPI(t *testing.T, home string) *fakeApprovalsAPI {
	t.Helper()
	f := &fakeApprovalsAPI{ap: approvals.Approval{
		ID: "ap_test1", Session: "s_1", Digest: "d1", State: "pending",
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ExpiresAt: time.Date(2026, 1, 2, 4, 4, 5, 0, time.UTC),
		Preview: dataplane.Preview{Connector: "github://acme/aileron-connector-google", Version: "1.2.3", Tool: "gmail",
			Operation: "send", Summary: "Send a Gmail message", Method: "POST", Host: "gmail.googleapis.com",
			Path: "/gmail/v1/users/me/messages/send", BodyBytes: 42, Inputs: map[string]any{"threadId": "t-9"}},
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/approvals", func(w http.ResponseWriter, r *http.Request) {
		writeTestJSON(w, map[string]any{"approvals": []approvals.Approval{f.get()}})
	})
	mux.HandleFunc("GET /v1/approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != f.get().ID {
			w.WriteHeader(http.StatusNotFound)
			writeTestJSON(w, map[string]any{"error": map[string]string{"class": "not_found", "reason": "not_found", "message": "no such approval: " + r.PathValue("id")}})
			return
		}
		writeTestJSON(w, f.get())
	})
	mux.HandleFunc("POST /v1/approvals/{id}/{verb}", func(w http.ResponseWriter, r *http.Request) {
		var req admin.DecideRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decision body: %v", err)
		}
		f.mu.Lock()
		d := r.PathValue("verb") + " " + req.By
		if req.Reason != "" {
			d += ": " + req.Reason
		}
		f.decisions = append(f.decisions, d)
		f.ap.DecidedBy, f.ap.Reason = req.By, req.Reason
		f.mu.Unlock()
		writeTestJSON(w, f.get())
	})
	ln, err := admin.ListenUnix(filepath.Join(home, "admin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return f
}

func (f *fakeApprovalsAPI) get() approvals.Approval {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ap
}

func writeTestJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// runApprovals runs `aileron approvals ARGS…` through run() with
// AILERON_HOME=home and returns stdout, stderr and the exit code.
func runApprovals(t *testing.T, home string, args ...string) (string, string, int) {
	t.Helper()
	t.Setenv("AILERON_HOME", home)
	var out, errb bytes.Buffer
	code := run(append([]string{"approvals"}, args...), strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func TestApprovalsCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv("USER", "alice")
	f := startFakeApprovalsAPI(t, home)
	for _, c := range []struct {
		args []string
		want []string
		code int
	}{
		{[]string{"list"}, []string{"ap_test1", "pending", "gmail/send", "POST gmail.googleapis.com/gmail/v1/users/me/messages/send"}, 0},
		{[]string{"list", "--json"}, []string{`"id": "ap_test1"`, `"body_bytes": 42`}, 0},
		{[]string{"show", "ap_test1"}, []string{"Send a Gmail message", "42 bytes", "threadId", "t-9", "1.2.3"}, 0},
		{[]string{"approve", "ap_test1"}, []string{"approved ap_test1"}, 0},
		{[]string{"deny", "ap_test1", "--reason", "wrong thread"}, []string{"denied ap_test1", "wrong thread"}, 0},
		{[]string{"deny", "ap_test1"}, nil, 2},
		{[]string{"approve"}, nil, 2},
		{[]string{"frob"}, nil, 2},
		{nil, nil, 2},
	} {
		out, errOut, code := runApprovals(t, home, c.args...)
		if code != c.code {
			t.Errorf("approvals %v: exit %d, want %d\n%s", c.args, code, c.code, errOut)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("approvals %v: output lacks %q:\n%s", c.args, w, out)
			}
		}
	}
	want := []string{"approve cli:alice", "deny cli:alice: wrong thread"}
	if f.mu.Lock(); strings.Join(f.decisions, "|") != strings.Join(want, "|") {
		t.Errorf("decisions sent: %q, want %q", f.decisions, want)
	}
	f.mu.Unlock()
	if _, errOut, code := runApprovals(t, home, "show", "ap_nope"); code != 1 || !strings.Contains(errOut, "no such approval") {
		t.Errorf("show unknown: exit %d, stderr %q; want 1 naming the problem", code, errOut)
	}
}

func TestApprovalsWebToken(t *testing.T) {
	home := t.TempDir()
	out, errOut, code := runApprovals(t, home, "web-token")
	tok := strings.TrimSpace(out)
	if code != 0 || len(tok) != 43 || !strings.Contains(errOut, "http://127.0.0.1:9091/login") {
		t.Fatalf("web-token: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	p := filepath.Join(home, "keys", "admin.token")
	if info, err := os.Stat(p); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v, want mode 0600", p, info, err)
	}
	if again, _, _ := runApprovals(t, home, "web-token"); strings.TrimSpace(again) != tok {
		t.Errorf("second web-token printed %q, want the same %q", again, tok)
	}
	// A running daemon (this process stands in) publishes where its page
	// is bound: that address, not the configured one, is printed.
	state := fmt.Sprintf(`{"pid":%d,"web_addr":"127.0.0.1:43537"}`, os.Getpid())
	if err := os.WriteFile(filepath.Join(home, "daemon.json"), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, _ := runApprovals(t, home, "web-token"); !strings.Contains(errOut, "http://127.0.0.1:43537/login") {
		t.Errorf("with a running daemon, web-token says %q, want its bound address", errOut)
	}
}

// TestApprovalsShowIsFaithful: `approvals show` prints the whole target
// and every field (undeclared ones marked), escapes every control byte
// (no ESC or CR reaches the terminal), says how much of a long body it
// left out, and --raw prints all of it.
func TestApprovalsShowIsFaithful(t *testing.T) {
	home := t.TempDir()
	f := startFakeApprovalsAPI(t, home)
	longPath := "/v1/" + strings.Repeat("p", 700)
	longValue := strings.Repeat("v", 600)
	big := `{"to":"bob@example.com","bcc":"eve\u001b[2J@example.com","note":"` + strings.Repeat("n", 100<<10) + `END"}`
	f.mu.Lock()
	f.ap.Preview = dataplane.Preview{Connector: "local://t/mail", Version: "1.0.0", Tool: "mail", Operation: "send",
		Method: "POST", Host: "mail.example:443", Path: longPath, Query: "cc=" + longValue,
		Credential: "oauth2 in header Authorization (replaces any value the client sent)",
		Headers:    []dataplane.PreviewHeader{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Note", Value: "a\rb"}},
		Fields: []dataplane.PreviewField{{Source: "query", Name: "cc", Value: longValue},
			{Source: "body", Name: "to", Value: `"bob@example.com"`, Declared: true},
			{Source: "body", Name: "bcc", Value: "\"eve\x1b[2J@example.com\""}},
		Body:      &dataplane.PreviewBody{Kind: dataplane.BodyText, ContentType: "text/plain", Raw: []byte("line\x1b]0;pwned\x07\r\n" + big)},
		BodyBytes: len(big) + 17}
	f.mu.Unlock()
	out, errOut, code := runApprovals(t, home, "show", "ap_test1")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	if strings.ContainsAny(out, "\x1b\r\x07") {
		t.Errorf("show printed a raw control byte:\n%q", out)
	}
	for _, want := range []string{longPath + "?cc=" + longValue, "NOT DECLARED:", "query cc, body bcc", `\x1b[2J`, `\x1b]0;pwned\x07\r`,
		"X-Note: a\\rb", "(not declared)", "Credential:", "more bytes: aileron approvals show ap_test1 --raw"} {
		if !strings.Contains(out, want) {
			t.Errorf("show output lacks %q", want)
		}
	}
	raw, _, code := runApprovals(t, home, "show", "ap_test1", "--raw")
	if code != 0 || !strings.Contains(raw, `nEND"}`) || !strings.HasPrefix(raw, "POST "+longPath+"?cc="+longValue+" HTTP/1.1\n") ||
		strings.ContainsAny(raw, "\x1b\r\x07") {
		t.Errorf("show --raw (exit %d) is not the whole request, escaped:\n%.300q", code, raw)
	}
	if _, _, code := runApprovals(t, home, "show", "ap_test1", "--raw", "--json"); code != 2 {
		t.Errorf("--raw with --json: exit %d, want 2", code)
	}
}

// shownRaw names the first character of s that should have reached the
// reader escaped.
func shownRaw(s string) string {
	for _, r := range s {
		if r != '\n' && printable.Hidden(r) {
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}

// invisible are characters that draw nothing or change what is around
// them: the Hangul fillers, a combining grapheme joiner, a variation
// selector, a Khmer inherent vowel, a zero-width space, a direction
// override and a C1 control introducer.
const invisible = "\u3164\u115f\u1160\uffa0\u034f\ufe0f\u17b4\u200b\u202e\u009b"

// TestApprovalsEscapeInvisibleCharacters: in the path, query, a header,
// form fields, tool and operation, the body, and a reason, every
// invisible character reaches the terminal as an escape from list, show,
// show --raw, show --json, watch and deny.
func TestApprovalsEscapeInvisibleCharacters(t *testing.T) {
	home := t.TempDir()
	t.Setenv("USER", "alice")
	f := startFakeApprovalsAPI(t, home)
	form := "to=bob" + invisible + "&note=hi" + invisible
	f.mu.Lock()
	f.ap.Preview = dataplane.Preview{Connector: "local://t/mail", Version: "1.0.0", Tool: "mail" + invisible, Operation: "send" + invisible,
		Method: "POST", Host: "mail.example:443", Path: "/v1/send" + invisible, Query: "cc=eve" + invisible,
		Headers: []dataplane.PreviewHeader{{Name: "X-Note" + invisible, Value: "a" + invisible + "b"}},
		Fields: []dataplane.PreviewField{{Source: "query", Name: "cc", Value: "eve" + invisible},
			{Source: "body", Name: "to", Value: "bob" + invisible, Declared: true}, {Source: "body", Name: "note" + invisible, Value: "hi" + invisible}},
		Body:      &dataplane.PreviewBody{Kind: dataplane.BodyForm, ContentType: "application/x-www-form-urlencoded", Raw: []byte(form)},
		BodyBytes: len(form)}
	f.ap.Reason = "because" + invisible
	f.mu.Unlock()
	for _, args := range [][]string{{"list"}, {"show", "ap_test1"}, {"show", "ap_test1", "--raw"}, {"show", "ap_test1", "--json"},
		{"list", "--json"}, {"deny", "ap_test1", "--reason", "no"}} {
		out, errOut, code := runApprovals(t, home, args...)
		if code != 0 {
			t.Fatalf("approvals %v: exit %d: %s", args, code, errOut)
		}
		if r := shownRaw(out); r != "" {
			t.Errorf("approvals %v shows %s as itself:\n%s", args, r, out)
		}
		if !strings.Contains(out, `\u3164\u115f\u1160\uffa0\u034f\ufe0f\u17b4\u200b\u202e\u009b`) {
			t.Errorf("approvals %v does not show the escapes:\n%s", args, out)
		}
	}
	out, _, _ := runApprovals(t, home, "show", "ap_test1", "--json")
	var back approvals.Approval
	if err := json.Unmarshal([]byte(out), &back); err != nil || back.Preview.Path != "/v1/send"+invisible {
		t.Errorf("show --json does not keep the value: %v %q", err, back.Preview.Path)
	}
	var screen bytes.Buffer
	w := &watcher{c: &admin.Client{Socket: filepath.Join(home, "admin.sock")}, out: &screen}
	if err := w.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := shownRaw(screen.String()); r != "" || !strings.Contains(screen.String(), `/v1/send\u3164`) {
		t.Errorf("watch shows %s as itself, or no escape:\n%s", r, screen.String())
	}
}

// TestApprovalsShowUnknownRequest: the approval of a request no operation
// matches (ask mode) is listed, shown and watched as such, naming its
// proposal and no connector, everything from the sandbox escaped.
func TestApprovalsShowUnknownRequest(t *testing.T) {
	home := t.TempDir()
	f := startFakeApprovalsAPI(t, home)
	f.mu.Lock()
	f.ap.Preview = dataplane.Preview{Method: "GET", Host: "new.example.com:443", Path: "/v1/x" + invisible, ProposalID: "pr_abc",
		Fields: []dataplane.PreviewField{{Source: "query", Name: "q", Value: "1"}}, Query: "q=1"}
	f.mu.Unlock()
	for _, c := range []struct {
		args       []string
		want, lack []string
	}{
		{[]string{"list"}, []string{"none (proposal pr_abc)", "GET new.example.com:443/v1/x"}, []string{"  /  "}},
		{[]string{"show", "ap_test1"}, []string{"no operation matches this request", "pr_abc", "aileron proposals show pr_abc"},
			[]string{"Connector:", "Tool:", "NOT DECLARED"}},
	} {
		out, errOut, code := runApprovals(t, home, c.args...)
		if code != 0 {
			t.Fatalf("approvals %v: exit %d: %s", c.args, code, errOut)
		}
		if r := shownRaw(out); r != "" {
			t.Errorf("approvals %v shows %s as itself:\n%s", c.args, r, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("approvals %v: output lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, l := range c.lack {
			if strings.Contains(out, l) {
				t.Errorf("approvals %v: output has %q:\n%s", c.args, l, out)
			}
		}
	}
	var screen bytes.Buffer
	w := &watcher{c: &admin.Client{Socket: filepath.Join(home, "admin.sock")}, out: &screen}
	if err := w.refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := screen.String(); !strings.Contains(s, "no operation matches this request") || !strings.Contains(s, "proposal pr_abc") || shownRaw(s) != "" {
		t.Errorf("watch does not show an unknown request as such:\n%s", s)
	}
}
