package witness

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// testNow is the witness clock in tests.
var testNow = time.Unix(1_700_000_000, 0)

// testLog is a real RFC 6962 log over string records, signing
// checkpoints with a real note key.
type testLog struct {
	t       testing.TB
	origin  string
	signer  note.Signer
	vkey    string
	records []string
	hashes  []tlog.Hash // the stored hashes (tlog.StoredHashes layout)
}

func newTestLog(t testing.TB, origin string) *testLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{t: t, origin: origin, signer: signer, vkey: vkey}
}

// grow appends n records named prefix0, prefix1, ...
func (l *testLog) grow(prefix string, n int) *testLog {
	l.t.Helper()
	for i := range n {
		rec := fmt.Sprintf("%s%d", prefix, len(l.records)+i)
		hs, err := tlog.StoredHashes(int64(len(l.records)), []byte(rec), l.reader())
		if err != nil {
			l.t.Fatal(err)
		}
		l.hashes = append(l.hashes, hs...)
		l.records = append(l.records, rec)
	}
	return l
}

// fork returns a log with the same key and the first at records.
func (l *testLog) fork(at int) *testLog {
	l.t.Helper()
	f := &testLog{t: l.t, origin: l.origin, signer: l.signer, vkey: l.vkey}
	for _, rec := range l.records[:at] {
		hs, err := tlog.StoredHashes(int64(len(f.records)), []byte(rec), f.reader())
		if err != nil {
			l.t.Fatal(err)
		}
		f.hashes = append(f.hashes, hs...)
		f.records = append(f.records, rec)
	}
	return f
}

func (l *testLog) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(l.hashes)) {
				return nil, fmt.Errorf("no stored hash %d", x)
			}
			out[i] = l.hashes[x]
		}
		return out, nil
	})
}

func (l *testLog) root(n int) tlog.Hash {
	l.t.Helper()
	h, err := tlog.TreeHash(int64(n), l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	return h
}

// proof is the consistency proof from size old to size n (empty when old
// is 0 or equals n).
func (l *testLog) proof(old, n int) []tlog.Hash {
	l.t.Helper()
	if old == 0 || old == n {
		return nil
	}
	p, err := tlog.ProveTree(int64(n), int64(old), l.reader())
	if err != nil {
		l.t.Fatal(err)
	}
	return p
}

func (l *testLog) body(n int) string {
	r := l.root(n)
	return fmt.Sprintf("%s\n%d\n%s\n", l.origin, n, base64.StdEncoding.EncodeToString(r[:]))
}

// checkpoint is the signed checkpoint at size n.
func (l *testLog) checkpoint(n int) []byte { return l.sign(l.body(n)) }

// sign signs any note text with the log's key.
func (l *testLog) sign(text string) []byte {
	l.t.Helper()
	msg, err := note.Sign(&note.Note{Text: text}, l.signer)
	if err != nil {
		l.t.Fatal(err)
	}
	return msg
}

// newWitness opens a witness over dir for logs, with the test clock.
func newWitness(t testing.TB, dir string, logs ...*testLog) *Witness {
	t.Helper()
	w := &Witness{Dir: dir, Name: "witness.example/w1", Now: func() time.Time { return testNow }}
	for _, l := range logs {
		w.Logs = append(w.Logs, l.vkey)
	}
	if err := w.Open(); err != nil {
		t.Fatal(err)
	}
	return w
}

// post sends body to url and returns the status, Content-Type and body.
func post(t testing.TB, url string, body []byte) (int, string, string) {
	t.Helper()
	resp, err := http.Post(url, "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func flip(h tlog.Hash) tlog.Hash {
	h[0] ^= 1
	return h
}

func b64(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

// nonCanonical returns another base64 spelling of the same 32 bytes as h:
// the last character's two padding bits set to non-zero, which the
// standard decoder accepts.
func nonCanonical(t testing.TB, h string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.IndexByte(alphabet, h[42])
	s := h[:42] + string(alphabet[i^1]) + "="
	a, err1 := base64.StdEncoding.DecodeString(h)
	b, err2 := base64.StdEncoding.DecodeString(s)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) || s == h {
		t.Fatalf("nonCanonical(%q) = %q: not the same bytes (%v, %v)", h, s, err1, err2)
	}
	return s
}
