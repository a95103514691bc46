package main

import (
	"testing"
	"time"
)

// TestOptionsCheck checks that settings no table can be measured with are
// refused before anything starts, and the defaults are taken.
func TestOptionsCheck(t *testing.T) {
	good := options{conc: 8, duration: 5 * time.Second, warmup: 500 * time.Millisecond, blobMiB: 256, rounds: 5, splitDur: 2 * time.Second, streamMiB: 1024}
	for _, tc := range []struct {
		name  string
		edit  func(*options)
		nargs int
		ok    bool
	}{
		{"defaults", func(*options) {}, 0, true},
		{"no streams", func(o *options) { o.streamMiB = 0 }, 0, true},
		{"zero rounds", func(o *options) { o.rounds = 0 }, 0, false},
		{"zero split duration", func(o *options) { o.splitDur = 0 }, 0, false},
		{"negative stream", func(o *options) { o.streamMiB = -1 }, 0, false},
		{"zero concurrency", func(o *options) { o.conc = 0 }, 0, false},
		{"an argument", func(*options) {}, 1, false},
	} {
		o := good
		tc.edit(&o)
		if err := o.check(tc.nargs); (err == nil) != tc.ok {
			t.Errorf("%s: check = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
