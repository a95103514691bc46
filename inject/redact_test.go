package inject

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// refRedact is the reference semantics, written independently of the
// Redactor: scan left to right; where secrets start, mask the longest.
func refRedact(in string, secrets []string) string {
	var b strings.Builder
	for i := 0; i < len(in); {
		best := 0
		for _, s := range secrets {
			if len(s) >= MinRedactLen && len(s) > best && strings.HasPrefix(in[i:], s) {
				best = len(s)
			}
		}
		if best > 0 {
			b.WriteString(Mask(best))
			i += best
			continue
		}
		b.WriteByte(in[i])
		i++
	}
	return b.String()
}

// masked is the mask of secret s.
func masked(s string) string { return Mask(len(s)) }

func TestRedactorString(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"single", []string{"sk-secret"}, "key=sk-secret&x", "key=" + masked("sk-secret") + "&x"},
		{"every occurrence", []string{"sk-secret"}, "sk-secretsk-secret sk-secret", masked("sk-secret") + masked("sk-secret") + " " + masked("sk-secret")},
		{"longest at same start", []string{"tok1", "tok1234"}, "a tok1234 b", "a " + masked("tok1234") + " b"},
		{"leftmost wins overlap", []string{"abcd", "cdef"}, "abcdef", masked("abcd") + "ef"},
		{"short ignored", []string{"abc", ""}, "abc abc", "abc abc"},
		{"no match", []string{"sk-secret"}, "sk-secre", "sk-secre"},
		{"formatted and raw", []string{"Bearer sk-secret", "sk-secret"}, "h: Bearer sk-secret; sk-secret", "h: " + masked("Bearer sk-secret") + "; " + masked("sk-secret")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRedactor(tc.secrets...)
			if got := r.String(tc.in); got != tc.want {
				t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if ref := refRedact(tc.in, tc.secrets); ref != tc.want {
				t.Errorf("reference disagrees with the table: %q", ref)
			}
		})
	}
}

func TestRedactorNilAndEmpty(t *testing.T) {
	for _, r := range []*Redactor{nil, NewRedactor(), NewRedactor("", "ab")} {
		if !r.Empty() {
			t.Fatal("Empty() = false")
		}
		if r.String("abc") != "abc" {
			t.Fatal("String changed input")
		}
		h := http.Header{"A": {"ab"}}
		r.Header(h)
		rc := io.NopCloser(strings.NewReader("x"))
		if r.Body(rc) != rc {
			t.Fatal("Body wrapped without secrets")
		}
	}
}

// chunkReader returns its input in the given chunk sizes, then the rest.
type chunkReader struct {
	data   []byte
	chunks []int
	err    error // returned with the last bytes instead of io.EOF when set
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.chunks) > 0 {
		n = min(c.chunks[0], n)
		c.chunks = c.chunks[1:]
	}
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func readAllBody(t *testing.T, r *Redactor, src io.Reader) string {
	t.Helper()
	got, err := io.ReadAll(r.Body(io.NopCloser(src)))
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

func TestRedactorBodyEverySplit(t *testing.T) {
	secrets := []string{"sk-live-0123456789", "Bearer sk-live-0123456789", "c2stbGl2ZS0wMTIzNDU2Nzg5"}
	r := NewRedactor(secrets...)
	inputs := []string{
		`{"headers":{"Authorization":"Bearer sk-live-0123456789"},"b64":"c2stbGl2ZS0wMTIzNDU2Nzg5"}`,
		"sk-live-0123456789",
		"sk-live-012345678sk-live-0123456789sk-",
		"ssssk-live-0123456789k",
		"sk-live-012345678", // a prefix only: flushed at EOF
	}
	for _, in := range inputs {
		want := refRedact(in, secrets)
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j += max(1, len(in)/7) {
				got := readAllBody(t, r, &chunkReader{data: []byte(in), chunks: []int{i, j - i}})
				if got != want {
					t.Fatalf("split %d/%d of %q:\n got %q\nwant %q", i, j, in, got, want)
				}
			}
		}
		if got := readAllBody(t, r, iotest.OneByteReader(strings.NewReader(in))); got != want {
			t.Fatalf("one byte at a time %q: got %q", in, got)
		}
		if got := readAllBody(t, r, iotest.HalfReader(strings.NewReader(in))); got != want {
			t.Fatalf("half reads %q: got %q", in, got)
		}
	}
}

func TestRedactorBodySmallReads(t *testing.T) {
	// The caller's buffer may be smaller than a masked chunk.
	r := NewRedactor("secret-value")
	in := strings.Repeat("x secret-value y ", 100)
	var out bytes.Buffer
	body := r.Body(io.NopCloser(strings.NewReader(in)))
	buf := make([]byte, 3)
	for {
		n, err := body.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if out.String() != refRedact(in, []string{"secret-value"}) {
		t.Fatalf("got %q", out.String())
	}
}

func TestRedactorBodyStreamsEvents(t *testing.T) {
	const secret = "sk-stream-secret-42"
	r := NewRedactor(secret, "Bearer "+secret)
	events := []string{
		"event: a\ndata: hello\n\n",
		"data: token " + secret + "\n\n",
		"data: sk-stream\n\n",   // a secret's prefix inside an event: released at the blank line
		"data: " + secret[:5],   // split secret across two writes...
		secret[5:] + " end\n\n", // ...caught
		"data: bye\n\n",
	}
	pr, pw := io.Pipe()
	body := r.Body(pr)
	next := make(chan struct{})
	go func() {
		for _, e := range events {
			if _, err := pw.Write([]byte(e)); err != nil {
				return
			}
			<-next // the reader saw this event before the next is written
		}
		pw.Close()
	}()
	wants := []string{
		"event: a\ndata: hello\n\n",
		"data: token " + masked(secret) + "\n\n",
		"data: sk-stream\n\n",
		"data: ", // the possible prefix "sk-st" is held back
		masked(secret) + " end\n\n",
		"data: bye\n\n",
	}
	for i, want := range wants {
		got := make([]byte, 0, len(want))
		buf := make([]byte, 64)
		for len(got) < len(want) {
			n, err := readWithin(body, buf, 10*time.Second)
			if err != nil {
				t.Fatalf("event %d: %v after %q", i, err, got)
			}
			got = append(got, buf[:n]...)
		}
		if string(got) != want {
			t.Fatalf("event %d = %q, want %q", i, got, want)
		}
		next <- struct{}{}
	}
	if rest, err := io.ReadAll(body); err != nil || len(rest) != 0 {
		t.Fatalf("after the last event: %q, %v", rest, err)
	}
}

// readWithin reads once, failing if the read does not return within d: a
// redactor that held a complete event back would block forever.
func readWithin(r io.Reader, p []byte, d time.Duration) (int, error) {
	type res struct {
		n   int
		err error
	}
	c := make(chan res, 1)
	go func() {
		n, err := r.Read(p)
		c <- res{n, err}
	}()
	select {
	case x := <-c:
		return x.n, x.err
	case <-time.After(d):
		return 0, errors.New("the redactor held back a released event (blocked read)")
	}
}

func TestRedactorBodySourceError(t *testing.T) {
	r := NewRedactor("secret-value")
	boom := errors.New("connection reset")
	src := &chunkReader{data: []byte("ok secret-value then secret-va"), err: boom}
	got, err := io.ReadAll(r.Body(io.NopCloser(src)))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if string(got) != "ok "+masked("secret-value")+" then " {
		t.Fatalf("got %q; a held partial secret must be dropped on error", got)
	}
}

func TestRedactorHeader(t *testing.T) {
	pass := "hunter2-password"
	echoes, err := Apply(newOut(t, "https://api.example.com/", nil), Placement{}, Secret{Kind: KindBasic, Username: "bob", Password: pass}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRedactor(echoes...)
	b64 := base64.StdEncoding.EncodeToString([]byte("bob:" + pass))
	h := http.Header{
		"X-Echo-Auth":        {"Basic " + b64},
		"X-Echo-B64":         {b64, "plain"},
		"X-Echo-Pass":        {"pw=" + pass},
		"X-Hunter2-Password": {"name carries it"},
		"Content-Type":       {"application/json"},
	}
	r.Header(h)
	want := http.Header{
		"X-Echo-Auth":  {masked("Basic " + b64)},
		"X-Echo-B64":   {masked(b64), "plain"},
		"X-Echo-Pass":  {"pw=" + masked(pass)},
		"Content-Type": {"application/json"},
	}
	if len(h) != len(want) {
		t.Fatalf("headers after masking: %v", h)
	}
	for k, vs := range want {
		if strings.Join(h[k], "|") != strings.Join(vs, "|") {
			t.Errorf("%s = %q, want %q", k, h[k], vs)
		}
	}
}

func TestRedactorBodyNoAllocsAfterWarmup(t *testing.T) {
	r := NewRedactor("secret-value", "c2VjcmV0LXZhbHVl")
	chunk := []byte(strings.Repeat("data: secret-value and c2VjcmV0LXZhbHVl ", 500))
	src := &loopReader{chunk: chunk}
	body := r.Body(io.NopCloser(src))
	buf := make([]byte, 64<<10)
	for range 10 { // warm-up: buffers reach their final size
		if _, err := body.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := body.Read(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Read allocates %.1f times after warm-up", allocs)
	}
}

// loopReader returns chunk forever, one copy per Read.
type loopReader struct{ chunk []byte }

func (l *loopReader) Read(p []byte) (int, error) { return copy(p, l.chunk), nil }

func BenchmarkRedactorBody(b *testing.B) {
	r := NewRedactor("sk-live-0123456789abcdef", "Bearer sk-live-0123456789abcdef", "c2stbGl2ZS0wMTIzNDU2Nzg5YWJjZGVm")
	chunk := bytes.Repeat([]byte(`{"id":12345,"text":"lorem ipsum dolor sit amet"},`), 700)
	body := r.Body(io.NopCloser(&loopReader{chunk: chunk}))
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := io.ReadFull(body, buf); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzRedactor checks, for arbitrary secrets, input and read splits, that
// the streaming output equals the reference masking and String, and that no
// secret survives. Secrets and input are drawn from a small alphabet so that
// overlaps and partial matches are frequent; it shares no byte with a mask.
func FuzzRedactor(f *testing.F) {
	f.Add("sk-1", "sk-12", []byte("xx sk-12 sk-1 sk-"), []byte{1, 2, 3})
	f.Add("abab", "babab", []byte("abababababab"), []byte{5})
	f.Add("aaaa", "", []byte("aaaaaaaaa"), []byte{1, 1, 1, 1})
	f.Add("abc-", "c-ab", []byte("abc-abc-ab"), []byte{0, 4, 2})
	f.Add("0123456789", "9-9-", []byte("01234567899-9-01234"), []byte{9, 1})
	const alpha = "abc-19"
	squash := func(b []byte) string {
		out := make([]byte, len(b))
		for i, c := range b {
			out[i] = alpha[int(c)%len(alpha)]
		}
		return string(out)
	}
	f.Fuzz(func(t *testing.T, s1, s2 string, input, splits []byte) {
		if len(s1) > 64 || len(s2) > 64 || len(input) > 4096 {
			return
		}
		secrets := []string{squash([]byte(s1)), squash([]byte(s2))}
		in := squash(input)
		r := NewRedactor(secrets...)
		want := refRedact(in, secrets)
		if got := r.String(in); got != want {
			t.Fatalf("String(%q) with %q = %q, want %q", in, secrets, got, want)
		}
		chunks := make([]int, len(splits))
		for i, c := range splits {
			chunks[i] = int(c%16) + 1
		}
		var got []byte
		var err error
		if r.Empty() {
			got = []byte(in)
		} else {
			// the caller's buffer: small ones go through the Redactor's own
			// buffer, larger ones are masked in place
			got, err = readSizes(r.Body(io.NopCloser(&chunkReader{data: []byte(in), chunks: chunks})), readSizesOf(splits))
		}
		if err != nil || string(got) != want {
			t.Fatalf("Body(%q) with %q, chunks %v = %q, %v; want %q", in, secrets, chunks, got, err, want)
		}
		for _, s := range secrets {
			if len(s) >= MinRedactLen && strings.Contains(string(got), s) {
				t.Fatalf("secret %q survives in %q", s, got)
			}
		}
	})
}

// TestRedactorsKeepOnePerSet: the same secrets give the same Redactor;
// another set (a rotated secret, or lists that would read alike if
// joined) gets its own, which masks its own secrets.
func TestRedactorsKeepOnePerSet(t *testing.T) {
	var c Redactors
	a := c.For([]string{"secret-one", "c2VjcmV0LW9uZQ"})
	if c.For([]string{"secret-one", "c2VjcmV0LW9uZQ"}) != a {
		t.Fatal("the same set built a second Redactor")
	}
	for _, other := range [][]string{{"secret-two"}, {"secret-one"}, {"secret-onec2VjcmV0LW9uZQ"}, {"2:ab", "cdef"}, {"2:abcdef"}} {
		r := c.For(other)
		if r == a {
			t.Fatalf("%q shares the Redactor of another set", other)
		}
		for _, s := range other {
			if got := r.String("x " + s + " y"); got != "x "+masked(s)+" y" && len(s) >= MinRedactLen {
				t.Fatalf("%q: %q not masked: %q", other, s, got)
			}
		}
	}
	if c.For([]string{"2:ab", "cdef"}) == c.For([]string{"2:abcdef"}) {
		t.Fatal("two lists share a key")
	}
}

// readSizesOf turns fuzz bytes into caller's buffer sizes, from 1 byte to
// past the size read into directly.
func readSizesOf(b []byte) []int {
	sizes := make([]int, len(b))
	for i, c := range b {
		sizes[i] = 1 + int(c)*5
	}
	return sizes
}

// readSizes reads r to its end with buffers of the given sizes in turn
// (the last repeats; 4 KiB when none).
func readSizes(r io.Reader, sizes []int) ([]byte, error) {
	var out []byte
	for i, idle := 0, 0; ; i++ {
		size := 4 << 10
		if len(sizes) > 0 {
			size = sizes[min(i, len(sizes)-1)]
		}
		buf := make([]byte, size)
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if idle++; n > 0 {
			idle = 0
		} else if idle > 1000 {
			return out, errors.New("1000 reads in a row gave nothing: the reader makes no progress")
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestRedactorBodyEqualsWholeMasking: masking a stream, whatever the
// pieces the source gives and the buffers the caller reads into, equals
// masking the whole body at once, and is as long as the body.
func TestRedactorBodyEqualsWholeMasking(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 1))
	const alpha = "ab-1"
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	for i := range 3000 {
		secrets := []string{word(4 + rng.IntN(6)), word(4 + rng.IntN(12))}
		var in strings.Builder
		for size := rng.IntN(3000); in.Len() < size; {
			if rng.IntN(3) == 0 {
				in.WriteString(secrets[rng.IntN(2)])
			} else {
				in.WriteString(word(1 + rng.IntN(8)))
			}
		}
		r := NewRedactor(secrets...)
		whole := r.String(in.String())
		var chunks, sizes []int
		for range 8 {
			chunks = append(chunks, 1+rng.IntN(700))
			sizes = append(sizes, 1+rng.IntN(1500))
		}
		got, err := readSizes(r.Body(io.NopCloser(&chunkReader{data: []byte(in.String()), chunks: chunks})), sizes)
		if err != nil || string(got) != whole || len(got) != in.Len() {
			t.Fatalf("case %d: secrets %q, chunks %v, reads %v:\n got %q, %v\nwant %q", i, secrets, chunks, sizes, got, err, whole)
		}
	}
}

func TestMask(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{4, "[RED"},
		{9, "[REDACTED"},
		{10, "[REDACTED]"},
		{16, "[REDACTED]******"},
	} {
		if got := Mask(tc.n); got != tc.want {
			t.Errorf("Mask(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	r := NewRedactor("sk-live-0123456789")
	if got := r.String("key sk-live-0123456789."); got != "key [REDACTED]********." {
		t.Errorf("String = %q", got)
	}
}

// TestRedactorBodyLongSecret: a secret longer than the buffer a small
// read goes through is still masked whole, whatever the reads.
func TestRedactorBodyLongSecret(t *testing.T) {
	secret := strings.Repeat("k", readChunk) + "-end"
	in := "a " + secret + " b " + secret[:100] + " c " + secret
	r := NewRedactor(secret)
	for _, sizes := range [][]int{{7}, {4 << 10}, {200 << 10}} {
		got, err := readSizes(r.Body(io.NopCloser(&chunkReader{data: []byte(in), chunks: []int{1000, 5000, 70000}})), sizes)
		if err != nil || string(got) != r.String(in) || strings.Contains(string(got), secret) {
			t.Fatalf("reads of %v: %d bytes, %v", sizes, len(got), err)
		}
	}
}
