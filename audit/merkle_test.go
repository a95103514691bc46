package audit

import (
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// storedTree is tlog's reference tree over records, to check ours against.
type storedTree struct {
	hashes []tlog.Hash
	n      int64
}

func (s *storedTree) add(t *testing.T, data []byte) {
	t.Helper()
	hs, err := tlog.StoredHashes(s.n, data, s)
	if err != nil {
		t.Fatal(err)
	}
	s.hashes = append(s.hashes, hs...)
	s.n++
}

func (s *storedTree) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		out[i] = s.hashes[x]
	}
	return out, nil
}

func TestMerkleMatchesTlog(t *testing.T) {
	const max = 70
	ref := &storedTree{}
	var r compactRange
	var leaves []tlog.Hash
	ranges := []compactRange{r.clone()}
	for i := range max {
		data := fmt.Appendf(nil, "line %d", i)
		ref.add(t, data)
		leaves = append(leaves, tlog.RecordHash(data))
		r.add(tlog.RecordHash(data))
		ranges = append(ranges, r.clone())
		want, err := tlog.TreeHash(ref.n, ref)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.root(); got != want {
			t.Fatalf("size %d: root %v, tlog says %v", ref.n, got, want)
		}
		if got := mth(leaves); got != want {
			t.Fatalf("size %d: mth %v, tlog says %v", ref.n, got, want)
		}
	}
	for n := 1; n <= max; n++ {
		root := ranges[n].root()
		for m := 1; m <= n; m++ {
			p, err := consistencyProof(&ranges[m], leaves[m:n])
			if err != nil {
				t.Fatalf("%d→%d: %v", m, n, err)
			}
			if err := tlog.CheckTree(p, int64(n), root, int64(m), ranges[m].root()); err != nil {
				t.Fatalf("consistency %d→%d does not check: %v", m, n, err)
			}
		}
		for i := 0; i < n; i++ {
			p := inclusionProof(uint64(i), leaves[:n])
			if err := tlog.CheckRecord(p, int64(n), root, int64(i), leaves[i]); err != nil {
				t.Fatalf("inclusion of %d in %d does not check: %v", i, n, err)
			}
		}
	}
}

func TestConsistencyProofCatchesAFork(t *testing.T) {
	build := func(n, rewritten int) (compactRange, []tlog.Hash) {
		var r compactRange
		var leaves []tlog.Hash
		for i := range n {
			h := tlog.RecordHash(fmt.Appendf(nil, "%d", i))
			if i == rewritten {
				h = tlog.RecordHash([]byte("rewritten"))
			}
			r.add(h)
			leaves = append(leaves, h)
		}
		return r, leaves
	}
	old, _ := build(9, -1)
	honest, leaves := build(13, -1)
	forked, forkedLeaves := build(13, 4)
	p, err := consistencyProof(&old, leaves[9:])
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(p, 13, honest.root(), 9, old.root()); err != nil {
		t.Fatalf("honest growth must check: %v", err)
	}
	if err := tlog.CheckTree(p, 13, forked.root(), 9, old.root()); err == nil {
		t.Fatal("a tree with a rewritten old leaf checked as consistent")
	}
	p, _ = consistencyProof(&old, forkedLeaves[9:])
	if err := tlog.CheckTree(p, 13, forked.root(), 9, old.root()); err == nil {
		t.Fatal("a proof over the forked tree checked as consistent")
	}
}
