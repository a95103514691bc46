package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/witness"
	"github.com/rs/zerolog"
	"golang.org/x/mod/sumdb/note"
)

// writeTrail writes n proxy lines to home's trail as the daemon does:
// signed with home's key, its Mark in home's database, each checkpoint
// handed to push (when set).
func writeTrail(t *testing.T, home string, n int, push func(audit.Signed)) {
	t.Helper()
	var evs []*audit.Event
	for i := range n {
		evs = append(evs, &audit.Event{Name: audit.EventProxied, Method: "GET", Host: "api.example.com", Port: 443,
			Path: fmt.Sprintf("/items/%d", i), Decision: "allow", Reason: "matched_operation", Client: "127.0.0.1:5555"})
	}
	appendEvents(t, home, func(l *audit.Log) { l.CheckpointEvery, l.Checkpointed = 5, push }, evs...)
}

func TestAuditProofCommands(t *testing.T) {
	home := t.TempDir()
	writeTrail(t, home, 12, nil)
	code, vkey, errOut := runCLI(t, home, "audit", "key")
	vkey = strings.TrimSpace(vkey)
	if _, err := note.NewVerifier(vkey); code != 0 || err != nil {
		t.Fatalf("audit key = %d %q %s", code, vkey, errOut)
	}
	code, out, errOut := runCLI(t, home, "audit", "verify")
	if code != 0 || !strings.Contains(out, "checkpoint(s) verified") || !strings.Contains(out, "last checkpoint (seq") {
		t.Fatalf("audit verify = %d\n%s%s", code, out, errOut)
	}
	code, proof, errOut := runCLI(t, home, "audit", "prove", "3")
	if code != 0 {
		t.Fatalf("audit prove = %d %s", code, errOut)
	}
	p := filepath.Join(t.TempDir(), "proof")
	if err := os.WriteFile(p, []byte(proof), 0o600); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir() // offline: another home, no trail, only the key
	if code, out, errOut := runCLI(t, other, "audit", "check-proof", p, "--key", vkey); code != 0 || !strings.Contains(out, "ok: line seq 3") {
		t.Fatalf("audit check-proof = %d %s%s", code, out, errOut)
	}
	forged := strings.Replace(proof, "/items/2", "/items/9", 1)
	if err := os.WriteFile(p, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI(t, other, "audit", "check-proof", p, "--key", vkey); code != 1 || !strings.Contains(errOut, "not in the signed tree") {
		t.Fatalf("a forged line checked: %d %s", code, errOut)
	}
	code, out, _ = runCLI(t, home, "audit", "export", "--format", "ocsf", "--from", "2")
	first, _, _ := strings.Cut(out, "\n")
	var ev map[string]any
	if code != 0 || json.Unmarshal([]byte(first), &ev) != nil || ev["class_uid"] != float64(4002) || ev["type_uid"] != float64(400203) {
		t.Fatalf("audit export --format ocsf = %d %s", code, first)
	}
	if md := ev["metadata"].(map[string]any); md["sequence"] != float64(2) {
		t.Fatalf("export --from 2 began at %v", md["sequence"])
	}
}

func TestAuditVerifyAndNewTrailAfterACutTail(t *testing.T) {
	home := t.TempDir()
	writeTrail(t, home, 12, nil)
	files, _ := audit.ListFiles(filepath.Join(home, "audit"))
	b, _ := os.ReadFile(files[len(files)-1])
	lines := strings.SplitAfter(string(b), "\n")
	keep := len(lines) - 3
	for keep > 1 && strings.Contains(lines[keep-1], `"event":"audit.checkpoint"`) {
		keep-- // ending on an older checkpoint reads as a rollback, not a cut
	}
	if err := os.WriteFile(files[len(files)-1], []byte(strings.Join(lines[:keep], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI(t, home, "audit", "verify")
	if code != 1 || !strings.Contains(errOut, "truncated") || !strings.Contains(errOut, "cut off its end") {
		t.Fatalf("audit verify of a cut trail = %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, home, "audit", "new-trail"); code != 2 || !strings.Contains(errOut, "--reason") {
		t.Fatalf("new-trail without a reason = %d %s", code, errOut)
	}
	code, out, errOut := runCLI(t, home, "audit", "new-trail", "--reason", "the tail was cut; see ticket 42")
	if code != 0 || !strings.Contains(out, "previous files are in") {
		t.Fatalf("new-trail = %d %s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, home, "audit", "verify"); code != 0 {
		t.Fatalf("verify of the new trail = %d %s%s", code, out, errOut)
	}
	_, out, _ = runCLI(t, home, "audit", "export")
	if !strings.Contains(out, `"event":"audit.trail_started"`) || !strings.Contains(out, "ticket 42") || !strings.Contains(out, "truncated") {
		t.Fatalf("the new trail does not record the break:\n%s", out)
	}
}

func TestWitnessCosignsAndCatchesARollback(t *testing.T) {
	home := t.TempDir()
	writeTrail(t, home, 1, nil) // names the trail
	_, vkey, _ := runCLI(t, home, "audit", "key")
	w := &witness.Witness{Dir: t.TempDir(), Name: "test/witness", Logs: []string{strings.TrimSpace(vkey)}}
	if err := w.Open(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()
	nop := zerolog.Nop()
	p := &witnessPusher{dir: filepath.Join(home, "audit"), client: srv.Client(), log: &nop,
		next: make(chan audit.Signed, 1), done: make(chan struct{}),
		targets: []*witnessTarget{{url: srv.URL, key: w.VerifierKey()}}}
	go p.run()
	writeTrail(t, home, 20, p.offer)
	p.close()
	if p.targets[0].failing != "" || p.targets[0].size == 0 {
		t.Fatalf("the witness did not cosign: %+v", p.targets[0])
	}
	if f := p.figures(); f[0].Cosigned != p.targets[0].size || f[0].Failures != 0 {
		t.Fatalf("witness figures %+v, want it cosigned %d lines and no failure", f, p.targets[0].size)
	}
	code, out, errOut := runCLI(t, home, "audit", "verify", "--witness", srv.URL, "--witness-key", w.VerifierKey())
	if code != 0 || !strings.Contains(out, "witness: it cosigned") {
		t.Fatalf("verify --witness = %d %s%s", code, out, errOut)
	}
	// A proof that carries the witness's cosignature, checked elsewhere
	// with the two public keys.
	code, proof, errOut := runCLI(t, home, "audit", "prove", "3", "--witness", srv.URL, "--witness-key", w.VerifierKey())
	if code != 0 {
		t.Fatalf("prove --witness = %d %s", code, errOut)
	}
	pf := filepath.Join(t.TempDir(), "proof")
	if err := os.WriteFile(pf, []byte(proof), 0o600); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	code, out, errOut = runCLI(t, other, "audit", "check-proof", pf, "--key", strings.TrimSpace(vkey), "--witness-key", w.VerifierKey())
	if code != 0 || !strings.Contains(out, "cosigned by the witness") {
		t.Fatalf("check-proof --witness-key = %d %s%s", code, out, errOut)
	}
	w2 := &witness.Witness{Dir: t.TempDir(), Name: "test/other-witness"}
	if err := w2.Open(); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCLI(t, other, "audit", "check-proof", pf, "--key", strings.TrimSpace(vkey), "--witness-key", w2.VerifierKey()); code != 1 {
		t.Fatalf("a proof checked against a witness that never cosigned it: exit %d", code)
	}
	// The host's operator cuts the trail and rewrites the database's record
	// to match: only the witness still knows.
	files, _ := audit.ListFiles(filepath.Join(home, "audit"))
	b, _ := os.ReadFile(files[0])
	lines := strings.SplitAfter(string(b), "\n")
	if err := os.WriteFile(files[0], []byte(strings.Join(lines[:12], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range files[1:] {
		os.Remove(f)
	}
	os.Remove(filepath.Join(home, state.FileName))
	code, _, errOut = runCLI(t, home, "audit", "verify", "--witness", srv.URL, "--witness-key", w.VerifierKey())
	if code != 1 || !strings.Contains(errOut, "truncated") || !strings.Contains(errOut, "witness cosigned") {
		t.Fatalf("verify --witness of a cut trail = %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, home, "audit", "verify", "--witness", srv.URL); code != 2 || !strings.Contains(errOut, "--witness-key") {
		t.Fatalf("verify --witness without its key = %d %s", code, errOut)
	}
	// A "witness" that answers with the trail's checkpoint body and no
	// signature at all (a redirected URL) is not believed.
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s\n1\n%s\n\n", strings.Split(strings.TrimSpace(vkey), "+")[0], strings.Repeat("A", 43)+"=")
	}))
	defer fake.Close()
	if code, _, errOut := runCLI(t, home, "audit", "verify", "--witness", fake.URL, "--witness-key", w.VerifierKey()); code != 1 || !strings.Contains(errOut, "cosignature does not verify") {
		t.Fatalf("verify against an unsigned answer = %d %s", code, errOut)
	}
}

// TestAFailedStartEndsTheTrailAsAStopDoes: a start that fails after the
// trail was opened closes it, so the record of the daemon's last line
// stays in force and a line appended afterwards is refused at the next
// start (not taken for the unsigned tail of a crash).
func TestAFailedStartEndsTheTrailAsAStopDoes(t *testing.T) {
	home := t.TempDir()
	writeTrail(t, home, 5, nil)
	cfg, err := config.Load(config.Options{Environ: []string{"HOME=" + home, "AILERON_HOME=" + home}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstream.CAFiles = []string{filepath.Join(home, "missing-root.pem")} // fails after the trail is open
	nop := zerolog.Nop()
	if _, err := openDaemon(cfg, &nop); err == nil {
		t.Fatal("the daemon opened with a missing upstream root")
	}
	m, err := loadMark(cfg)
	if err != nil || m == nil || m.EndSeq == 0 {
		t.Fatalf("after a failed start the record names no last line: %+v, %v", m, err)
	}
	if _, out, _ := runCLI(t, home, "audit", "export"); !strings.Contains(out, `"event":"daemon.started"`) || !strings.Contains(out, `"reason":"start failed"`) {
		t.Fatalf("the trail does not record the failed start:\n%s", out)
	}
	// the trail is free again (the failed start released its lock), and a
	// line appended behind the daemon's back is refused
	key, _ := audit.LoadPublicKey(filepath.Join(home, "audit.key"))
	l := &audit.Log{Dir: filepath.Join(home, "audit")}
	if err := l.Open(); err != nil {
		t.Fatalf("the failed start kept the trail: %v", err)
	}
	if err := l.Write(&audit.Event{Name: audit.EventProxied, Host: "forged.example"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, _ := state.Open(context.Background(), filepath.Join(home, state.FileName))
	defer db.Close()
	err = newAuditLog(filepath.Join(home, "audit"), key, db, "").Open()
	if !errors.Is(err, audit.ErrTrailBroken) || !strings.Contains(err.Error(), "appended") {
		t.Fatalf("Open after a line appended behind a failed start = %v, want appended", err)
	}
}
