package inject

import (
	"io"
	"strings"
	"testing"
)

// deltas is an Anthropic stream whose text deltas carry s, n bytes an event.
func deltas(s string, n int) string {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
	for i := 0; i < len(s); i += n {
		b.WriteString(`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + s[i:min(i+n, len(s))] + `"}}` + "\n\n")
		if i == 2*n {
			b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
	}
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.String()
}

// text is what a client makes of a stream of deltas: the texts joined.
func text(stream string) string {
	var b strings.Builder
	for _, ev := range strings.Split(stream, "\n\n") {
		if _, after, ok := strings.Cut(ev, `"text":"`); ok {
			v, _, _ := strings.Cut(after, `"`)
			b.WriteString(v)
		}
	}
	return b.String()
}

func TestEventStreamMasksASecretSpreadOverEvents(t *testing.T) {
	const secret = "sk-ant-api03-SEKRIT0123456789abcdef"
	r := NewRedactor(secret, "Bearer "+secret)
	for _, tc := range []struct {
		name, in, wantText string
	}{
		{"in one event", deltas("key: "+secret+" ok", 100), "key: " + masked(secret) + " ok"},
		{"two events", deltas("key: "+secret+" ok", len("key: "+secret+" ok")/2), "key: " + masked(secret) + " ok"},
		{"four bytes an event, a ping between: sk- was released", deltas("key: "+secret+" ok", 4), "key: sk-" + masked(secret)[3:] + " ok"},
		{"one byte an event: the first 3 bytes were released", deltas("k "+secret+" x", 1), "k sk-" + masked(secret)[3:] + " x"},
		{"twice", deltas(secret+" and "+secret, 5), masked(secret) + " and " + masked(secret)},
		{"a prefix that goes nowhere", deltas("sk-ant-api03-nothing here", 3), "sk-ant-api03-nothing here"},
		{"chat completions", "data: {\"choices\":[{\"delta\":{\"content\":\"" + secret[:10] + "\"}}]}\r\n\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"" + secret[10:] + "\"}}]}\r\n\r\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, step := range []int{1, 7, 1 << 20} {
				out, err := io.ReadAll(r.EventStream(io.NopCloser(&chunkReader{data: []byte(tc.in), chunks: repeat(step, len(tc.in))})))
				if err != nil {
					t.Fatal(err)
				}
				got := string(out)
				if len(got) != len(tc.in) {
					t.Fatalf("step %d: %d bytes out of %d: a masked event stream keeps its length", step, len(got), len(tc.in))
				}
				if strings.Contains(got, "SEKRIT") {
					t.Fatalf("step %d: the secret's middle got through:\n%s", step, got)
				}
				if tc.wantText != "" && text(got) != tc.wantText {
					t.Fatalf("step %d: text %q, want %q", step, text(got), tc.wantText)
				}
				if tc.wantText == "" && !strings.Contains(got, Redacted) {
					t.Fatalf("step %d: nothing masked:\n%s", step, got)
				}
			}
		})
	}
}

// TestEventStreamHoldsNothingElse: an event goes out as soon as it is
// complete when its text begins no secret.
func TestEventStreamHoldsNothingElse(t *testing.T) {
	r := NewRedactor("sk-ant-api03-SEKRIT0123456789abcdef")
	pr, pw := io.Pipe()
	es := r.EventStream(pr)
	go func() {
		_, _ = io.WriteString(pw, "data: {\"text\":\"hello sk\"}\n\n")
		_, _ = io.WriteString(pw, "data: {\"text\":\"-ant\"}\n\n")
		_, _ = io.WriteString(pw, "data: {\"text\":\"ordinary\"}\n\n")
	}()
	for _, want := range []string{"data: {\"text\":\"hello sk\"}\n\n", "data: {\"text\":\"-ant\"}\n\ndata: {\"text\":\"ordinary\"}\n\n"} {
		got := make([]byte, len(want))
		if _, err := io.ReadFull(es, got); err != nil || string(got) != want {
			t.Fatalf("got %q (%v), want %q", got, err, want)
		}
	}
	_ = pw.Close()
}

func repeat(step, total int) []int {
	var out []int
	for n := 0; n < total; n += step {
		out = append(out, step)
	}
	return out
}

// FuzzEventStream: any stream, in any pieces, is masked without panic and
// the same whatever the pieces; a secret contiguous in it never gets out.
func FuzzEventStream(f *testing.F) {
	const secret = "sk-SEKRIT-0123"
	f.Add([]byte(deltas("a "+secret+" b", 3)), uint8(1))
	f.Add([]byte("data: {\"t\":\"sk-SE\"}\r\n\r\ndata: {\"t\":\"KRIT-0123\"}\r\r"), uint8(5))
	f.Add([]byte("data: \"\\\"\n\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		r := NewRedactor(secret)
		whole, err := io.ReadAll(r.EventStream(io.NopCloser(&chunkReader{data: in})))
		if err != nil {
			t.Fatal(err)
		}
		n := int(step%32) + 1
		split, err := io.ReadAll(r.EventStream(io.NopCloser(&chunkReader{data: in, chunks: repeat(n, len(in))})))
		if err != nil {
			t.Fatal(err)
		}
		if string(whole) != string(split) {
			t.Fatalf("whole %q, in pieces of %d %q", whole, n, split)
		}
		if strings.Contains(string(whole), secret) {
			t.Fatalf("the secret got out: %q", whole)
		}
	})
}

// BenchmarkEventStreamEvent is EventStream's cost per text delta event of
// an Anthropic stream (the common event), against Body's.
func BenchmarkEventStreamEvent(b *testing.B) {
	ev := []byte(`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + strings.Repeat("word ", 12) + `"}}` + "\n\n")
	r := NewRedactor("sk-ant-api03-SEKRIT0123456789abcdef", "Bearer sk-ant-api03-SEKRIT0123456789abcdef")
	for _, tc := range []struct {
		name string
		wrap func(io.ReadCloser) io.ReadCloser
	}{{"EventStream", r.EventStream}, {"Body", r.Body}} {
		b.Run(tc.name, func(b *testing.B) {
			src := &eventLoop{ev: ev}
			body := tc.wrap(io.NopCloser(src))
			buf := make([]byte, 32<<10)
			b.SetBytes(int64(len(ev)))
			b.ReportAllocs()
			for b.Loop() {
				src.left = 1
				for src.left > 0 {
					if _, err := body.Read(buf); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// eventLoop gives ev once per left.
type eventLoop struct {
	ev   []byte
	left int
}

func (l *eventLoop) Read(p []byte) (int, error) {
	l.left--
	return copy(p, l.ev), nil
}

// BenchmarkEventStreamByteAtATime: an upstream that sends large events a
// byte at a time costs linear time (the search for an event's end
// resumes where it stopped).
func BenchmarkEventStreamByteAtATime(b *testing.B) {
	r := NewRedactor("sk-ant-api03-SEKRIT0123456789abcdef")
	in := []byte(strings.Repeat("data: {\"text\":\""+strings.Repeat("a", 63<<10)+"\"}\n\n", 4))
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		_, _ = io.ReadAll(r.EventStream(io.NopCloser(&chunkReader{data: in, chunks: repeat(1, len(in))})))
	}
}
