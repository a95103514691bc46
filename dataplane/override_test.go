package dataplane

import (
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzFormScanner: however a form body is split into reads, the scanner
// refuses it exactly when one of its names decodes to _method.
func FuzzFormScanner(f *testing.F) {
	for _, s := range []string{"a=1&_method=DELETE", "_method", "%5Fmethod=x", "a=1;.METHOD=x", "a=_method&b=c", "x=1&" + strings.Repeat("y", 30) + "=2"} {
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, body string, chunk uint8) {
		want := false
		for part := range strings.FieldsFuncSeq(body, func(r rune) bool { return r == '&' || r == ';' }) {
			k, _, _ := strings.Cut(part, "=")
			if dk, err := url.QueryUnescape(k); err == nil && isMethodParam(dk) {
				want = true
			}
		}
		var r io.Reader = strings.NewReader(body)
		if chunk%4 == 1 {
			r = iotest.OneByteReader(r)
		} else if chunk%4 == 2 {
			r = iotest.HalfReader(r)
		}
		_, err := io.ReadAll(&formScanner{ReadCloser: io.NopCloser(r)})
		var de *DenyError
		if got := errors.As(err, &de); got != want {
			t.Fatalf("form %q: refused %v, want %v (%v)", body, got, want, err)
		}
	})
}
