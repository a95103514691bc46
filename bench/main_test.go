package main

import (
	"strings"
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
		names string // the flag the error names; empty: no error
	}{
		{"defaults", func(*options) {}, 0, ""},
		{"no streams", func(o *options) { o.streamMiB = 0 }, 0, ""},
		{"zero rounds", func(o *options) { o.rounds = 0 }, 0, "--rounds"},
		{"zero split duration", func(o *options) { o.splitDur = 0 }, 0, "--split-duration"},
		{"negative stream", func(o *options) { o.streamMiB = -1 }, 0, "--stream-mib"},
		{"zero concurrency", func(o *options) { o.conc = 0 }, 0, "--concurrency"},
		{"an argument", func(*options) {}, 1, "no arguments"},
	} {
		o := good
		tc.edit(&o)
		err := o.check(tc.nargs)
		switch {
		case tc.names == "" && err != nil:
			t.Errorf("%s: check = %v, want no error", tc.name, err)
		case tc.names != "" && (err == nil || !strings.Contains(err.Error(), tc.names)):
			t.Errorf("%s: check = %v, want an error naming %s", tc.name, err, tc.names)
		case err != nil && strings.Count(err.Error(), "\n") > 0:
			t.Errorf("%s: check names more than the one bad setting: %v", tc.name, err)
		}
	}
}
