package audit

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestProofChecksOfflineWithThePublicKey(t *testing.T) {
	dir := t.TempDir()
	key := testKey(t, 1)
	session(t, provableLog(dir, key, nil), 45)
	vkey, _ := key.VerifierKey("test.example/aileron-audit/" + filepath.Base(dir))
	files := mustFiles(t, dir)
	n := len(trailLines(t, dir))
	for seq := uint64(1); seq < uint64(n); seq++ {
		p, err := Prove(files, seq)
		if err != nil {
			t.Fatalf("Prove(%d): %v", seq, err)
		}
		q, err := ParseProof(p.Marshal())
		if err != nil {
			t.Fatalf("ParseProof(Marshal(%d)): %v", seq, err)
		}
		cp, err := q.Check(vkey)
		if err != nil || cp.Size < seq {
			t.Fatalf("Check of line %d: %v (%+v)", seq, err, cp)
		}
	}
	if _, err := Prove(files, uint64(n)); err == nil || !strings.Contains(err.Error(), "no checkpoint covers") {
		t.Fatalf("the last line (a checkpoint, covered by none) proved: %v", err)
	}
	p, _ := Prove(files, 7)
	bad := []struct {
		name string
		edit func(Proof) Proof
		key  string
	}{
		{"edited line", func(p Proof) Proof {
			p.Line = bytes.Replace(p.Line, []byte(`"allow"`), []byte(`"deny"`), 1)
			return p
		}, vkey},
		{"another seq", func(p Proof) Proof { p.Seq = 8; return p }, vkey},
		{"a hash changed", func(p Proof) Proof {
			p.Hashes = append(p.Hashes[:0:0], p.Hashes...)
			p.Hashes[0][0] ^= 1
			return p
		}, vkey},
		{"another key", func(p Proof) Proof { return p }, mustVKey(t, testKey(t, 2), "test.example/aileron-audit/"+filepath.Base(dir))},
	}
	for _, b := range bad {
		if _, err := b.edit(p).Check(b.key); err == nil {
			t.Errorf("%s: the proof still checked", b.name)
		}
	}
}

func mustVKey(t testing.TB, k *Key, origin string) string {
	t.Helper()
	v, err := k.VerifierKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func FuzzParseProof(f *testing.F) {
	f.Add([]byte(proofHeader + "\nseq 3\nline {}\nhash " + strings.Repeat("A", 43) + "=\n\nx\n1\n" + strings.Repeat("A", 43) + "=\n\n— x AAAA\n"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseProof(b)
		if err != nil {
			return
		}
		if _, err := ParseProof(p.Marshal()); err != nil {
			t.Fatalf("a parsed proof does not parse again: %v", err)
		}
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add("example.com/log\n10\n" + strings.Repeat("A", 43) + "=\n")
	f.Add("x\n01\nAAAA\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCheckpoint(s)
		if err != nil {
			return
		}
		if d, err := ParseCheckpoint(c.Body()); err != nil || d != c {
			t.Fatalf("round trip of %q: %+v, %v", s, d, err)
		}
	})
}

func TestProveConsistencyBetweenCheckpoints(t *testing.T) {
	dir := t.TempDir()
	key := testKey(t, 1)
	var signed []Signed
	for range 3 {
		l := provableLog(dir, key, nil)
		l.Checkpointed = func(s Signed) { signed = append(signed, s) }
		session(t, l, 40)
	}
	if len(signed) < 6 {
		t.Fatalf("%d checkpoints", len(signed))
	}
	for i, a := range signed {
		for _, b := range signed[i:] {
			for _, at := range []*Signed{&a, nil} {
				p, err := ProveConsistency(dir, a.Size, b.Size, at)
				if err != nil {
					t.Fatalf("%d→%d: %v", a.Size, b.Size, err)
				}
				if err := tlog.CheckTree(p, int64(b.Size), b.Root, int64(a.Size), a.Root); err != nil {
					t.Fatalf("%d→%d (hint %v): %v", a.Size, b.Size, at != nil, err)
				}
			}
		}
	}
}

func TestProveRefusesACheckpointClaimingMoreLinesThanPrecedeIt(t *testing.T) {
	dir := t.TempDir()
	session(t, provableLog(dir, testKey(t, 1), nil), 6)
	files := mustFiles(t, dir)
	last := files[len(files)-1]
	lines := fileLines(t, last)
	forged := []byte(`{"time":"2026-11-22T05:00:00Z","seq":999,"prev_hash":"","event":"audit.checkpoint","details":{"note":"x\n999999\n` + strings.Repeat("A", 43) + `=\n\n— x AAAA\n"}}`)
	writeLines(t, last, append(lines, forged))
	n := uint64(len(trailLines(t, dir)) - 1) // the last real line: no real checkpoint covers it
	if _, err := Prove(files, n); err == nil || !errors.Is(err, ErrCorrupt) {
		t.Fatal("Prove took a checkpoint claiming more lines than precede it")
	}
}

func TestSeqBeyondInt64IsUnparsable(t *testing.T) {
	if _, _, problem := parseHead([]byte(`{"seq":18446744073709551615,"prev_hash":""}`)); problem == "" {
		t.Fatal("a seq of 2^64-1 parsed")
	}
	if _, err := ParseCheckpoint("o\n9223372036854775808\n" + strings.Repeat("A", 43) + "=\n"); err == nil {
		t.Fatal("a checkpoint of 2^63 lines parsed")
	}
}
