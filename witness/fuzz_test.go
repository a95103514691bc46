package witness

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// FuzzParseAddRequest feeds arbitrary bodies to the request parser and to
// Add (the trust boundary): no panic, every refusal a protocol error, and
// whatever parses is canonical (formatting it back gives the same bytes).
func FuzzParseAddRequest(f *testing.F) {
	a := newTestLog(f, "example.com/log-a").grow("a", 8)
	w := newWitness(f, f.TempDir(), a)
	f.Add(formatAddRequest(0, nil, a.checkpoint(5)))
	f.Add(formatAddRequest(5, a.proof(5, 8), a.checkpoint(8)))
	f.Add(formatAddRequest(3, a.proof(3, 5), a.checkpoint(5)))
	f.Add([]byte("old 0\n\n"))
	f.Add([]byte("old 01\nAAAA\n\nx\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		old, proof, checkpoint, err := parseAddRequest(body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("parse error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		if len(proof) > MaxProofLines || old > maxSize || len(checkpoint) == 0 {
			t.Fatalf("parsed out of bounds: old %d, %d proof hashes, %d-byte checkpoint", old, len(proof), len(checkpoint))
		}
		if again := formatAddRequest(old, proof, checkpoint); !bytes.Equal(again, body) {
			t.Fatalf("not canonical: %q formats back as %q", body, again)
		}
		if _, err := w.Add(old, proof, checkpoint); err != nil && statusOf(err) == 500 {
			t.Fatalf("Add: internal error %v", err)
		}
	})
}

// FuzzParseCheckpoint checks that ParseCheckpoint accepts only canonical
// bodies: what it parses formats back to the same first three lines, and
// the rest is non-empty extension lines.
func FuzzParseCheckpoint(f *testing.F) {
	root := tlog.RecordHash([]byte("x"))
	h := base64.StdEncoding.EncodeToString(root[:])
	f.Add("example.com/log\n0\n" + h + "\n")
	f.Add("example.com/log\n123\n" + h + "\next\n")
	f.Add("o\n9223372036854775807\n" + h + "\n")
	f.Add("o\n01\n" + h + "\n")
	f.Add("o\n1\n" + h[:43] + "\n")
	f.Fuzz(func(t *testing.T, body string) {
		origin, size, root, err := ParseCheckpoint(body)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		head := fmt.Sprintf("%s\n%d\n%s\n", origin, size, base64.StdEncoding.EncodeToString(root[:]))
		ext, ok := strings.CutPrefix(body, head)
		if !ok || origin == "" || strings.Contains(origin, "\n") || size > maxSize {
			t.Fatalf("ParseCheckpoint(%q) = %q, %d, %x: not the canonical head", body, origin, size, root)
		}
		for _, line := range strings.SplitAfter(ext, "\n") {
			if line == "\n" {
				t.Fatalf("ParseCheckpoint(%q) accepted an empty extension line", body)
			}
		}
		if ext != "" && !strings.HasSuffix(ext, "\n") {
			t.Fatalf("ParseCheckpoint(%q) accepted a body without a final newline", body)
		}
	})
}
