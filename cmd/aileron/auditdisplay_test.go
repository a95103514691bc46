package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/state"
)

// hostile is what a refused request's target can carry: C1 controls (CSI
// and OSC), a direction override, an ESC, and invisible characters.
const hostile = "/x\u009b2J\u009d0;owned\u0007\u202eevil\x1b[31m\u3164\u200b"

// writeOldTrail writes, as a daemon from before escaping did, a chained
// trail of three lines whose second carries hostile bytes as themselves,
// then opens it with the daemon's log (which builds its tree and signs it)
// and appends n more lines, so the hostile line is in a signed tree.
func writeOldTrail(t *testing.T, home string, n int) {
	t.Helper()
	dir := filepath.Join(home, "audit")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Add(-time.Minute)
	var b strings.Builder
	prev := ""
	for seq := 1; seq <= 3; seq++ {
		path := fmt.Sprintf("/items/%d", seq)
		if seq == 2 {
			path = "/x\u009b2J\u009d0;owned\u0007\u202eevil\u3164\u200b" // JSON holds no raw ESC; the rest as themselves
		}
		line, err := json.Marshal(struct { // encoding/json writes U+202E, C1 and U+3164 as themselves
			Time     time.Time `json:"time"`
			Seq      int       `json:"seq"`
			PrevHash string    `json:"prev_hash"`
			Event    string    `json:"event"`
			Session  string    `json:"session"`
			Method   string    `json:"method"`
			Host     string    `json:"host"`
			Port     int       `json:"port"`
			Path     string    `json:"path"`
			Decision string    `json:"decision"`
			Reason   string    `json:"reason"`
			Status   int       `json:"status"`
		}{now.Add(time.Duration(seq) * time.Millisecond), seq, prev, "connector.proxy.rejected", "s_x\u202e", "GET",
			"api.example.com", 443, path, "deny", "no_matching_operation\u009b", 403})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(line), "\u202e") {
			t.Fatalf("the line holds no raw U+202E: %q", line)
		}
		sum := sha256.Sum256(line)
		prev = hex.EncodeToString(sum[:])
		b.Write(append(line, '\n'))
	}
	name := filepath.Join(dir, fmt.Sprintf("audit-%sZ-%020d.jsonl", now.Format("20060102T150405.000000000"), 1))
	if err := os.WriteFile(name, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var evs []*audit.Event
	for i := range n {
		evs = append(evs, &audit.Event{Name: audit.EventRejected, Method: "GET", Host: "api.example.com", Port: 443,
			Path: hostile + fmt.Sprint(i), Decision: "deny", Reason: "no_matching_operation", Session: "s_y\u009b"})
	}
	appendEvents(t, home, func(l *audit.Log) { l.CheckpointEvery = 2 }, evs...)
}

// appendEvents opens home's trail with the daemon's log (which builds the
// tree of what is there and signs it), set up by setup when set, writes
// evs and closes it.
func appendEvents(t *testing.T, home string, setup func(*audit.Log), evs ...*audit.Event) {
	t.Helper()
	key, err := audit.LoadOrCreateKey(filepath.Join(home, "audit.key"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := state.Open(context.Background(), filepath.Join(home, state.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := newAuditLog(filepath.Join(home, "audit"), key, db, "")
	if setup != nil {
		setup(l)
	}
	if err := l.Open(); err != nil {
		t.Fatalf("opening the trail: %v", err)
	}
	for _, ev := range evs {
		if err := l.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAuditTailShowsWhatTheFenceSaw: the tail table's row of a blocked
// packet names its protocol, destination and source, and says when that
// source was forged (the packet got no answer); the row of a refused
// ClientHello names the server it asked for. What the sandbox chose (the
// name) is shown escaped.
func TestAuditTailShowsWhatTheFenceSaw(t *testing.T) {
	home := t.TempDir()
	blocked := func(client, host string, port int, det map[string]string) *audit.Event {
		return &audit.Event{Name: audit.EventEgressBlocked, Session: "s_1", Client: client, Host: host, Port: port,
			Decision: "deny", Reason: "egress_blocked", Details: det}
	}
	appendEvents(t, home, nil,
		blocked("10.237.0.2", "203.0.113.10", 53, map[string]string{"protocol": "udp", "sandbox": "sbx-1"}),
		blocked("203.0.113.78", "203.0.113.9", 443, map[string]string{"protocol": "tcp", "sandbox": "sbx-1", "foreign_source": "true"}),
		blocked("2001:db8:f::78", "2001:db8:f::9", 0, map[string]string{"protocol": "icmpv6", "sandbox": "sbx-1", "foreign_source": "true"}),
		&audit.Event{Name: audit.EventRejected, Session: "s_1", Client: "127.0.0.1:50112", Host: "api.example.com", Port: 443,
			Decision: "deny", Reason: "authority_mismatch", Details: map[string]string{"sni": "other.example\u202e\u200b"}})
	code, out, errOut := runCLI(t, home, "audit", "tail")
	if code != 0 {
		t.Fatalf("audit tail = %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"udp 203.0.113.10:53 from 10.237.0.2\n",
		"tcp 203.0.113.9:443 from 203.0.113.78 (forged source, dropped)\n",
		"icmpv6 2001:db8:f::9 from 2001:db8:f::78 (forged source, dropped)\n",
		`- api.example.com:443 sni=other.example\u202e\u200b` + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table has no row ending %q:\n%s", want, out)
		}
	}
	if r := shownRaw(out); r != "" {
		t.Errorf("the table shows %s as itself:\n%q", r, out)
	}
}

// TestAuditTailShowsModelCalls: a model call's rows name the model and the
// tokens the provider reported (a turn also how it ended); the model, which
// the sandbox chose, is shown escaped.
func TestAuditTailShowsModelCalls(t *testing.T) {
	home := t.TempDir()
	call := func(name audit.EventName, model string, in, out, cached int64, det map[string]string) *audit.Event {
		return &audit.Event{Name: name, Session: "s_1", Method: "POST", Host: "api.anthropic.com", Port: 443, Path: "/v1/messages",
			Decision: "allow", Reason: "operation_matched", Model: model, Streamed: in != 0, InputTokens: in, OutputTokens: out,
			CachedTokens: cached, TTFBMS: float64(in) / 10, Details: det}
	}
	appendEvents(t, home, nil,
		call(audit.EventProxied, "claude-sonnet-4-5\u202e\x1b[31m", 0, 0, 0, nil),
		call(audit.EventCompleted, "claude-sonnet-4-5", 2095, 503, 1024, nil),
		call(audit.EventTurn, "gpt-5-codex", 1200, 34, 0, map[string]string{"end": "completed"}),
		&audit.Event{Name: audit.EventCompleted, Session: "s_1", Method: "GET", Host: "api.example.com", Port: 443, Path: "/x", Decision: "allow", Reason: "operation_matched"})
	code, out, errOut := runCLI(t, home, "audit", "tail")
	if code != 0 {
		t.Fatalf("audit tail = %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"POST api.anthropic.com:443/v1/messages model=claude-sonnet-4-5\\u202e\\x1b[31m\n",
		"POST api.anthropic.com:443/v1/messages model=claude-sonnet-4-5 tokens in=2095 out=503 cached=1024 streamed ttfb=209.5ms\n",
		"model=gpt-5-codex tokens in=1200 out=34 cached=0 streamed ttfb=120ms end=completed\n",
		"GET api.example.com:443/x\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table has no row ending %q:\n%s", want, out)
		}
	}
	if r := shownRaw(out); r != "" {
		t.Errorf("the table shows %s as itself:\n%q", r, out)
	}
}

// TestAuditCommandsShowSandboxBytesEscaped: what a sandbox sent, in the
// daemon's lines and in lines some other writer left in the file, reaches
// the terminal escaped from audit tail (table and --json), audit verify,
// audit prove (on a terminal) and audit check-proof; the JSON keeps its
// value.
func TestAuditCommandsShowSandboxBytesEscaped(t *testing.T) {
	home := t.TempDir()
	writeOldTrail(t, home, 4)
	for _, args := range [][]string{
		{"audit", "tail"},
		{"audit", "tail", "--json"},
		{"audit", "tail", "--decision", "deny", "--json"},
		{"audit", "export", "--format", "ocsf"},
		{"audit", "verify"},
	} {
		code, out, errOut := runCLI(t, home, args...)
		if code != 0 {
			t.Fatalf("%v = %d\n%s%s", args, code, out, errOut)
		}
		if r := shownRaw(out + errOut); r != "" {
			t.Errorf("%v shows %s as itself:\n%q", args, r, out)
		}
		if args[1] == "tail" && !strings.Contains(out, `\u202e`) {
			t.Errorf("%v shows no \\u202e escape:\n%s", args, out)
		}
	}
	code, out, _ := runCLI(t, home, "audit", "tail", "--json")
	if code != 0 || !strings.Contains(out, `"path":"/x\u009b2J\u009d0;owned\u0007\u202eevil\u3164\u200b"`) {
		t.Errorf("tail --json does not keep the old line's value with its escapes:\n%s", out)
	}
	if code, out, _ := runCLI(t, home, "audit", "tail"); code != 0 || !strings.Contains(out, `GET api.example.com:443/x\u009b2J\u009d0;owned\x07\u202eevil\x1b[31m\u3164\u200b0`) {
		t.Errorf("the table does not show the daemon's line escaped:\n%s", out)
	}

	code, proof, errOut := runCLI(t, home, "audit", "prove", "2")
	if code != 0 || !strings.Contains(proof, "\u202e") {
		t.Fatalf("audit prove 2 (to a file: the line's exact bytes) = %d %q %s", code, proof, errOut)
	}
	p := filepath.Join(t.TempDir(), "proof")
	if err := os.WriteFile(p, []byte(proof), 0o600); err != nil {
		t.Fatal(err)
	}
	_, vkey, _ := runCLI(t, home, "audit", "key")
	code, out, errOut = runCLI(t, home, "audit", "check-proof", p, "--key", strings.TrimSpace(vkey))
	if code != 0 || !strings.Contains(out, "ok: line seq 2") || !strings.Contains(out, `\u202e`) {
		t.Fatalf("audit check-proof = %d %s%s", code, out, errOut)
	}
	if r := shownRaw(out); r != "" {
		t.Errorf("audit check-proof shows %s as itself:\n%q", r, out)
	}
}

// TestDaemonLogIsEscaped: the daemon's log lines (which quote what
// sandboxes sent) carry every character a terminal would act on as its
// JSON escape.
func TestDaemonLogIsEscaped(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, "info")
	log.Info().Str("path", hostile).Str("host", "a\u3164b").Msg("request \u202e")
	line := buf.String()
	if r := shownRaw(line); r != "" || !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
		t.Fatalf("the log line shows %s as itself, or is not one line:\n%q", r, line)
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(line), &v); err != nil || v["path"] != hostile || v["host"] != "a\u3164b" {
		t.Fatalf("the log line does not keep its values: %v %q", err, v)
	}
}

// TestErrorsAreEscaped: an error that quotes what it was given (here the
// admin API's answer naming an approval id) reaches stderr escaped.
func TestErrorsAreEscaped(t *testing.T) {
	home := t.TempDir()
	startFakeApprovalsAPI(t, home)
	_, errOut, code := runApprovals(t, home, "show", "ap_\u202e\u009b2J\u3164")
	if code != 1 || !strings.Contains(errOut, `ap_\u202e\u009b2J\u3164`) {
		t.Fatalf("show of an unknown id: exit %d, stderr %q", code, errOut)
	}
	if r := shownRaw(errOut); r != "" {
		t.Errorf("stderr shows %s as itself: %q", r, errOut)
	}
}

// TestAuditTailRunTree: --run shows only that run's lines, each indented
// under the line its parent_audit_id names; --json keeps them as recorded.
func TestAuditTailRunTree(t *testing.T) {
	home := t.TempDir()
	step := func(name audit.EventName, id, run, parent string) *audit.Event {
		return &audit.Event{Name: name, AuditID: id, RunID: run, ParentAuditID: parent, Session: "s_1", Method: "GET",
			Host: "api.linear.app", Port: 443, Path: "/issues/" + id, Decision: "allow", Reason: "operation_matched"}
	}
	appendEvents(t, home, nil,
		&audit.Event{Name: audit.EventActionStarted, AuditID: "a_run_1", RunID: "ar_1", Session: "s_1", Details: map[string]string{"action": "two-step"}},
		step(audit.EventProxied, "a_1", "ar_1", "a_run_1"),
		step(audit.EventProxied, "a_other", "ar_2", "a_run_2"),
		step(audit.EventCompleted, "a_1", "ar_1", "a_run_1"),
		step(audit.EventProxied, "a_plain", "", ""),
		&audit.Event{Name: audit.EventActionCompleted, RunID: "ar_1", ParentAuditID: "a_run_1", Session: "s_1"})
	code, out, errOut := runCLI(t, home, "audit", "tail", "--run", "ar_1")
	if code != 0 {
		t.Fatalf("audit tail --run = %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"  action.started ", "    connector.proxy.proxied ", "    connector.proxy.completed ", "    action.completed "} {
		if !strings.Contains(out, want) {
			t.Errorf("the tree has no row %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "a_other") || strings.Contains(out, "a_plain") || strings.Count(out, "\n") != 5 {
		t.Errorf("--run shows other lines:\n%s", out)
	}
	code, out, _ = runCLI(t, home, "audit", "tail", "--run", "ar_1", "--json")
	if code != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(out, `"run_id":"ar_1","parent_audit_id":"a_run_1"`) {
		t.Errorf("--json:\n%s", out)
	}
}
