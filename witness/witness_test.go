package witness

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// TestStateSurvivesRestart opens a second Witness over the same Dir: it
// knows each log's size and root, and keeps its key.
func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	a := newTestLog(t, "example.com/log-a").grow("a", 10)
	b := newTestLog(t, "example.com/log-b").grow("b", 4)
	forked := a.fork(3).grow("f", 7)
	w1 := newWitness(t, dir, a, b)
	if _, err := w1.Add(0, nil, a.checkpoint(5)); err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Add(5, a.proof(5, 7), a.checkpoint(7)); err != nil {
		t.Fatal(err)
	}

	w2 := newWitness(t, dir, a, b)
	if w2.VerifierKey() != w1.VerifierKey() {
		t.Errorf("VerifierKey after restart = %q, want %q", w2.VerifierKey(), w1.VerifierKey())
	}
	var conflict *ConflictError
	if _, err := w2.Add(0, nil, a.checkpoint(10)); !errors.As(err, &conflict) || conflict.Size != 7 {
		t.Errorf("old 0 after restart: %v, want *ConflictError{7}", err)
	}
	if _, err := w2.Add(7, nil, forked.checkpoint(7)); !errors.As(err, &conflict) || conflict.Size != 7 {
		t.Errorf("same size, forked root after restart: %v, want *ConflictError{7}", err)
	}
	if _, err := w2.Add(7, forked.proof(7, 10), forked.checkpoint(10)); !errors.Is(err, ErrBadProof) {
		t.Errorf("forked growth after restart: %v, want ErrBadProof (the root survived)", err)
	}
	if _, err := w2.Add(7, a.proof(7, 10), a.checkpoint(10)); err != nil {
		t.Errorf("consistent growth after restart: %v", err)
	}
	if _, err := w2.latest(b.origin); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("log without state: %v, want ErrNoCheckpoint", err)
	}
	stored, err := w2.latest(a.origin)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(stored), a.body(10)+"\n— example.com/log-a ") {
		t.Errorf("stored note = %q", stored)
	}
	fi, err := os.Stat(stateFile(dir, a.origin))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v, mode %v, want 0600", err, fi.Mode().Perm())
	}
}

// TestConcurrentConflictingAdds races conflicting checkpoints from the
// same old size: exactly one is cosigned, the rest get the winner's size.
func TestConcurrentConflictingAdds(t *testing.T) {
	const racers = 8
	for _, from := range []int{0, 4} {
		t.Run(fmt.Sprintf("from %d", from), func(t *testing.T) {
			a := newTestLog(t, "example.com/log-a").grow("a", 4)
			w := newWitness(t, t.TempDir(), a)
			if from > 0 {
				if _, err := w.Add(0, nil, a.checkpoint(from)); err != nil {
					t.Fatal(err)
				}
			}
			forks := make([]*testLog, racers)
			for i := range forks {
				forks[i] = a.fork(from).grow(fmt.Sprintf("r%d-", i), 4)
			}
			size := from + 4
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, racers)
			for i, f := range forks {
				proof, cp := f.proof(from, size), f.checkpoint(size)
				wg.Go(func() {
					<-start
					_, errs[i] = w.Add(uint64(from), proof, cp)
				})
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				var conflict *ConflictError
				switch {
				case err == nil && winner >= 0:
					t.Errorf("racers %d and %d were both cosigned", winner, i)
				case err == nil:
					winner = i
				case !errors.As(err, &conflict) || conflict.Size != uint64(size):
					t.Errorf("racer %d: %v, want *ConflictError{%d}", i, err, size)
				}
			}
			if winner < 0 {
				t.Fatal("no racer was cosigned")
			}
			stored, err := w.latest(a.origin)
			if err != nil || !strings.HasPrefix(string(stored), forks[winner].body(size)) {
				t.Errorf("stored %q (%v), want the winner's checkpoint", stored, err)
			}
		})
	}
}

// TestCosignatureFormat checks the cosignature against the C2SP layout
// computed here independently, and VerifyCosignature's refusals.
func TestCosignatureFormat(t *testing.T) {
	a := newTestLog(t, "example.com/log-a").grow("a", 3)
	w := newWitness(t, t.TempDir(), a)
	cp := a.checkpoint(3)
	cosig, err := w.Add(0, nil, cp)
	if err != nil {
		t.Fatal(err)
	}

	name, rest, _ := strings.Cut(w.VerifierKey(), "+")
	hash16, keyB64, _ := strings.Cut(rest, "+")
	raw, err := base64.StdEncoding.DecodeString(keyB64)
	if err != nil || len(raw) != 33 || raw[0] != 0x04 || name != w.Name {
		t.Fatalf("vkey %q: want name+hash+base64(0x04 || 32-byte key)", w.VerifierKey())
	}
	pub := ed25519.PublicKey(raw[1:])
	sum := sha256.Sum256(append([]byte(name+"\n\x04"), pub...))
	if want := fmt.Sprintf("%x", sum[:4]); hash16 != want {
		t.Errorf("vkey key ID %s, want %s", hash16, want)
	}

	line, ok := strings.CutPrefix(string(cosig), "— "+w.Name+" ")
	line, nl := strings.CutSuffix(line, "\n")
	sig, err := base64.StdEncoding.DecodeString(line)
	if !ok || !nl || err != nil || len(sig) != 4+8+64 {
		t.Fatalf("cosignature line %q: want — <name> base64(72 bytes)\\n", cosig)
	}
	if fmt.Sprintf("%x", sig[:4]) != hash16 {
		t.Errorf("cosignature key ID %x, want %s", sig[:4], hash16)
	}
	ts := binary.BigEndian.Uint64(sig[4:12])
	if ts != uint64(testNow.Unix()) {
		t.Errorf("cosignature timestamp %d, want %d", ts, testNow.Unix())
	}
	msg := fmt.Sprintf("cosignature/v1\ntime %d\n%s", ts, a.body(3))
	if !ed25519.Verify(pub, []byte(msg), sig[12:]) {
		t.Error("the cosignature does not verify over cosignature/v1\\ntime <t>\\n<body>")
	}

	cosigned := append(cp, cosig...)
	otherW := newWitness(t, t.TempDir(), a)
	tampered := []byte(strings.Replace(string(cosigned), line, base64.StdEncoding.EncodeToString(flipLast(sig)), 1))
	for _, c := range []struct {
		name, vkey string
		note       []byte
	}{
		{"another witness's key", otherW.VerifierKey(), cosigned},
		{"no cosignature", w.VerifierKey(), cp},
		{"tampered cosignature", w.VerifierKey(), tampered},
		{"the log's key", a.vkey, cosigned},
		{"malformed vkey", "witness.example/w1+00000000+AAAA", cosigned},
		{"vkey key ID mismatch", name + "+00000000+" + keyB64, cosigned},
	} {
		if _, err := VerifyCosignature(c.vkey, c.note); err == nil {
			t.Errorf("%s: VerifyCosignature succeeded", c.name)
		}
	}
}

func flipLast(b []byte) []byte {
	b = append([]byte(nil), b...)
	b[len(b)-1] ^= 1
	return b
}

// TestSpecExampleLayout decodes the cosignature of the C2SP
// tlog-cosignature example: key ID first, then the big-endian timestamp
// that its signed-message example shows (time 1679315147).
func TestSpecExampleLayout(t *testing.T) {
	sig, err := base64.StdEncoding.DecodeString("jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==")
	if err != nil || len(sig) != 4+8+64 {
		t.Fatalf("%d bytes, %v", len(sig), err)
	}
	if ts := binary.BigEndian.Uint64(sig[4:12]); ts != 1679315147 {
		t.Errorf("timestamp %d, want 1679315147", ts)
	}
}

// TestOpenKeyFile covers the key file and the configuration Open refuses.
func TestOpenKeyFile(t *testing.T) {
	a := newTestLog(t, "example.com/log-a")
	dir := filepath.Join(t.TempDir(), "state")
	w := newWitness(t, dir, a)
	keyPath := filepath.Join(dir, keyFile)
	for path, want := range map[string]os.FileMode{dir: 0o700, keyPath: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v, want %v", path, err, fi.Mode().Perm(), want)
		}
	}
	if err := w.Open(); err == nil {
		t.Error("a second Open succeeded")
	}
	if again := newWitness(t, dir, a); again.VerifierKey() != w.VerifierKey() {
		t.Errorf("reopened key %q, want %q", again.VerifierKey(), w.VerifierKey())
	}
	if _, err := (&Witness{}).Add(0, nil, a.checkpoint(0)); !errors.Is(err, errNotOpen) {
		t.Errorf("Add before Open: %v", err)
	}

	open := func(mutate func(*Witness)) error {
		w := &Witness{Dir: dir, Name: "witness.example/w1", Logs: []string{a.vkey}}
		mutate(w)
		return w.Open()
	}
	keyData, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		setup  func() // undone by restoring the key file and modes
		mutate func(*Witness)
	}{
		{"key group-readable", func() { chmod(t, keyPath, 0o640) }, nil},
		{"key other-readable", func() { chmod(t, keyPath, 0o604) }, nil},
		{"dir group-writable", func() { chmod(t, dir, 0o770) }, nil},
		{"key for another name", nil, func(w *Witness) { w.Name = "witness.example/w2" }},
		{"malformed key file", func() { write(t, keyPath, "PRIVATE+KEY+witness.example/w1+00000000+AAAA\n") }, nil},
		{"key ID mismatch", func() { write(t, keyPath, badID(string(keyData))) }, nil},
		{"name with a space", nil, func(w *Witness) { w.Name = "witness w1" }},
		{"empty name", nil, func(w *Witness) { w.Name = "" }},
		{"empty dir", nil, func(w *Witness) { w.Dir = "" }},
		{"malformed log key", nil, func(w *Witness) { w.Logs = []string{"example.com/log-a+1234"} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				write(t, keyPath, string(keyData))
				chmod(t, dir, 0o700)
			}()
			if c.setup != nil {
				c.setup()
			}
			if c.mutate == nil {
				c.mutate = func(*Witness) {}
			}
			if err := open(c.mutate); err == nil {
				t.Error("Open succeeded")
			}
		})
	}
	if err := open(func(*Witness) {}); err != nil {
		t.Errorf("Open after the cases: %v", err)
	}
}

// badID rewrites the key ID of a key file line.
func badID(line string) string {
	parts := strings.SplitN(line, "+", 5)
	if parts[3] == "00000000" {
		parts[3] = "00000001"
	} else {
		parts[3] = "00000000"
	}
	return strings.Join(parts, "+")
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, 0o600)
}

func TestParseCheckpoint(t *testing.T) {
	root := tlog.Hash(sha256.Sum256([]byte("root")))
	h := base64.StdEncoding.EncodeToString(root[:])
	nonCanonical := nonCanonical(t, h)
	for _, c := range []struct {
		body   string
		origin string
		size   uint64
		ok     bool
	}{
		{"example.com/log\n0\n" + h + "\n", "example.com/log", 0, true},
		{"example.com/log\n20852163\n" + h + "\n", "example.com/log", 20852163, true},
		{"o\n9223372036854775807\n" + h + "\next one\next two\n", "o", 1<<63 - 1, true},
		{"o\n9223372036854775808\n" + h + "\n", "", 0, false},
		{"o\n5\n" + h, "", 0, false},
		{"o\n5\n" + h + "\n\n", "", 0, false},
		{"o\n5\n" + h + "\next\n\n", "", 0, false},
		{"\n5\n" + h + "\n", "", 0, false},
		{"o\n05\n" + h + "\n", "", 0, false},
		{"o\n-5\n" + h + "\n", "", 0, false},
		{"o\n+5\n" + h + "\n", "", 0, false},
		{"o\n5 \n" + h + "\n", "", 0, false},
		{"o\n5\n" + nonCanonical + "\n", "", 0, false},
		{"o\n5\n" + h[:43] + "\n", "", 0, false},
		{"o\n5\n" + strings.TrimRight(h, "=") + "\n", "", 0, false},
		{"o\r\n5\n" + h + "\n", "", 0, false},
		{"o\n5\n" + h + "\r\n", "", 0, false},
		{"o\xff\n5\n" + h + "\n", "", 0, false},
		{"o\n5\n", "", 0, false},
		{"", "", 0, false},
	} {
		origin, size, r, err := ParseCheckpoint(c.body)
		if c.ok != (err == nil) || origin != c.origin || size != c.size || (c.ok && r != root) {
			t.Errorf("ParseCheckpoint(%q) = %q, %d, %v, %v", c.body, origin, size, r, err)
		}
		if err != nil && !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseCheckpoint(%q): %v does not wrap ErrBadRequest", c.body, err)
		}
	}
}

// TestClockSteppedBack: a cosignature is never older than the previous
// one for the log, also across a restart.
func TestClockSteppedBack(t *testing.T) {
	dir := t.TempDir()
	a := newTestLog(t, "example.com/log-a").grow("a", 6)
	w1 := newWitness(t, dir, a)
	if _, err := w1.Add(0, nil, a.checkpoint(3)); err != nil {
		t.Fatal(err)
	}
	w2 := &Witness{Dir: dir, Name: w1.Name, Logs: w1.Logs, Now: func() time.Time { return testNow.Add(-time.Hour) }}
	if err := w2.Open(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		old, size int
	}{{3, 3}, {3, 6}} {
		cosig, err := w2.Add(uint64(c.old), a.proof(c.old, c.size), a.checkpoint(c.size))
		if err != nil {
			t.Fatal(err)
		}
		ts, err := VerifyCosignature(w2.VerifierKey(), append(a.checkpoint(c.size), cosig...))
		if err != nil || !ts.Equal(testNow) {
			t.Errorf("size %d with the clock an hour back: timestamp %v (%v), want %v", c.size, ts, err, testNow)
		}
	}
}

// TestStoreFailure: when the state cannot be written the witness cosigns
// nothing, keeps its state, and the handler answers a bare 500.
func TestStoreFailure(t *testing.T) {
	dir := t.TempDir()
	a := newTestLog(t, "example.com/log-a").grow("a", 6)
	var logged strings.Builder
	w := newWitness(t, dir, a)
	w.ErrorLog = log.New(&logged, "", 0)
	if _, err := w.Add(0, nil, a.checkpoint(3)); err != nil {
		t.Fatal(err)
	}
	// A non-empty directory where the state file goes: rename fails, even
	// as root.
	path := stateFile(dir, a.origin)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	cosig, err := w.Add(3, a.proof(3, 6), a.checkpoint(6))
	if err == nil || statusOf(err) != http.StatusInternalServerError {
		t.Fatalf("Add = %q, %v; want an internal error", cosig, err)
	}
	srv := httptest.NewServer(w.Handler())
	defer srv.Close()
	code, _, body := post(t, srv.URL+"/add-checkpoint", formatAddRequest(3, a.proof(3, 6), a.checkpoint(6)))
	if code != http.StatusInternalServerError || strings.Contains(body, dir) || !strings.Contains(logged.String(), "storing the checkpoint") {
		t.Errorf("status %d body %q, log %q: want a bare 500 and the detail logged", code, body, logged.String())
	}
	stored, err := w.latest(a.origin)
	if err != nil || !strings.HasPrefix(string(stored), a.body(3)) {
		t.Errorf("state after failed stores: %q, %v; want size 3 kept", stored, err)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(entries) != 0 {
		t.Errorf("temp files left behind: %v", entries)
	}
}
