package dataplane

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// framesOf is a client's byte stream: the preface, then n SETTINGS frames
// (each with one setting), a DATA frame with a payload that looks like
// frame headers, and an ACK.
func framesOf(t testing.TB, n int) ([]byte, int) {
	var b bytes.Buffer
	b.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&b, nil)
	_ = fr.WriteData(1, false, bytes.Repeat([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0}, 40)) // SETTINGS headers as payload: skipped
	var bad int
	for i := range n {
		if i == h2SettingsBurst {
			bad = b.Len()
		}
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(i)})
		_ = fr.WriteSettingsAck() // acknowledgements of the proxy's settings cost nothing
	}
	return b.Bytes(), bad
}

// TestFrameWatch: the watch finds the SETTINGS frame past the burst at the
// same byte offset however the stream is cut into reads, and never before
// it; payloads are skipped, not parsed; acknowledgements are free.
func TestFrameWatch(t *testing.T) {
	stream, bad := framesOf(t, h2SettingsBurst+3)
	now := time.Unix(1000, 0)
	for _, chunk := range []int{1, 2, 7, 9, 10, 64, 4096} {
		var w frameWatch
		pos := 0
		for pos < len(stream) {
			end := min(pos+chunk, len(stream))
			keep, err := w.scan(stream[pos:end], now)
			if err != nil {
				if want := max(bad, pos); pos+keep != want { // bytes of the frame read before are gone already
					t.Fatalf("chunk %d: refused at %d, want %d", chunk, pos+keep, want)
				}
				break
			}
			if keep != end-pos {
				t.Fatalf("chunk %d: kept %d of %d without an error", chunk, keep, end-pos)
			}
			pos = end
		}
		if w.err == nil {
			t.Fatalf("chunk %d: %d SETTINGS frames at once were not refused", chunk, h2SettingsBurst+3)
		}
	}
	// The same frames spread over time (about four a second) are fine.
	var w frameWatch
	stream, _ = framesOf(t, 10*h2SettingsBurst)
	for i := range stream {
		if _, err := w.scan(stream[i:i+1], now.Add(time.Duration(i)*10*time.Millisecond)); err != nil {
			t.Fatalf("settings changes at a steady pace were refused at byte %d", i)
		}
	}
}

// FuzzFrameWatch: any byte stream, cut anywhere, never panics, keeps at
// most what it was given, and is refused (or not) whether read whole or
// in two pieces, at the offending frame's start (or, when its header was
// cut in two, where the second read began).
func FuzzFrameWatch(f *testing.F) {
	s, _ := framesOf(f, h2SettingsBurst+1)
	f.Add(s, 30)
	f.Add([]byte(http2.ClientPreface+"\xff\xff\xff\x04\x00\x00\x00\x00\x00"), 25)
	f.Fuzz(func(t *testing.T, p []byte, cut int) {
		now := time.Unix(1000, 0)
		var whole frameWatch
		keepW, errW := whole.scan(p, now)
		if keepW > len(p) || keepW < 0 {
			t.Fatalf("kept %d of %d", keepW, len(p))
		}
		if len(p) == 0 {
			return
		}
		cut = ((cut % len(p)) + len(p)) % len(p)
		var split frameWatch
		at := -1
		if keep, err := split.scan(p[:cut], now); err != nil {
			at = keep
		} else if keep, err := split.scan(p[cut:], now); err != nil {
			at = cut + keep
		}
		want := keepW
		if keepW+9 > cut { // the header completed in the second read
			want = max(keepW, cut)
		}
		if (errW != nil) != (at >= 0) || (errW != nil && at != want) {
			t.Fatalf("whole: %d %v; split at %d: refused at %d", keepW, errW, cut, at)
		}
	})
}
