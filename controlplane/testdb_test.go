package controlplane

import (
	"testing"

	"github.com/aileronhq/aileron/state"
)

func openTestDB(t *testing.T, path string) *state.DB {
	t.Helper()
	d, err := state.Open(path)
	if err != nil {
		t.Fatalf("state.Open(%s): %v", path, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
