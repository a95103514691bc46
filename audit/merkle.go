package audit

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"

	"golang.org/x/mod/sumdb/tlog"
)

// The trail's Merkle tree is the RFC 6962 tree whose leaf i is the
// SHA-256 of line seq i+1 (its bytes without the newline: the 32 bytes
// its chain hash is the hex of): leaf hash SHA-256(0x00 || SHA-256(line)),
// node hash SHA-256(0x01 || left || right), as tlog.RecordHash and
// tlog.NodeHash compute them. The leaf is the line's digest rather than
// the line so that the chain's hash of each line, computed anyway, is all
// the tree needs: a line costs one more hash of 33 bytes. Proofs are
// RFC 6962 / RFC 9162 inclusion and consistency proofs, checked with
// tlog.CheckRecord and tlog.CheckTree.

// leafHash is the tree's leaf hash of a line (without its newline).
func leafHash(line []byte) tlog.Hash {
	return leafOfSum(sha256.Sum256(line))
}

// leafOfSum is the leaf hash of the line whose SHA-256 is sum.
func leafOfSum(sum [sha256.Size]byte) tlog.Hash {
	return tlog.RecordHash(sum[:])
}

// emptyRoot is the root of the tree with no leaves (RFC 6962: the hash of
// the empty string).
var emptyRoot = tlog.Hash(sha256.Sum256(nil))

// compactRange is the state of the tree after size leaves: the roots of
// the perfect subtrees that cover [0, size), largest (leftmost) first,
// one per bit set in size. It grows by one leaf at a time in O(1)
// amortized hashes and gives the root in O(log size).
type compactRange struct {
	size  uint64
	nodes []tlog.Hash
}

// add appends one leaf hash.
func (r *compactRange) add(h tlog.Hash) {
	r.nodes = append(r.nodes, h)
	for s := r.size; s&1 == 1; s >>= 1 {
		n := len(r.nodes)
		r.nodes[n-2] = tlog.NodeHash(r.nodes[n-2], r.nodes[n-1])
		r.nodes = r.nodes[:n-1]
	}
	r.size++
}

// root is the tree head after size leaves.
func (r *compactRange) root() tlog.Hash {
	if len(r.nodes) == 0 {
		return emptyRoot
	}
	h := r.nodes[len(r.nodes)-1]
	for i := len(r.nodes) - 2; i >= 0; i-- {
		h = tlog.NodeHash(r.nodes[i], h)
	}
	return h
}

// clone is an independent copy.
func (r *compactRange) clone() compactRange {
	return compactRange{size: r.size, nodes: append([]tlog.Hash(nil), r.nodes...)}
}

// copyFrom makes r equal to o, reusing r's storage.
func (r *compactRange) copyFrom(o *compactRange) {
	r.size, r.nodes = o.size, append(r.nodes[:0], o.nodes...)
}

// newCompactRange checks that nodes is a compact range of size leaves.
func newCompactRange(size uint64, nodes []tlog.Hash) (compactRange, error) {
	if bits.OnesCount64(size) != len(nodes) {
		return compactRange{}, fmt.Errorf("a range of %d leaves has %d subtree roots, not %d", size, bits.OnesCount64(size), len(nodes))
	}
	return compactRange{size: size, nodes: append([]tlog.Hash(nil), nodes...)}, nil
}

// subtreeSpans are the [lo, hi) leaf spans of r's nodes, in order.
func (r *compactRange) span(i int) (lo, hi uint64) {
	for j := 0; j <= i; j++ {
		lo = hi
		hi = lo + highBit(r.size, j)
	}
	return lo, hi
}

// highBit is the j-th set bit of size counting from the most significant
// one, as a value (the size of the j-th subtree of a compact range).
func highBit(size uint64, j int) uint64 {
	for k := 63; k >= 0; k-- {
		if size&(1<<k) != 0 {
			if j == 0 {
				return 1 << k
			}
			j--
		}
	}
	return 0
}

// mth is the Merkle tree hash of leaves (RFC 6962 MTH).
func mth(leaves []tlog.Hash) tlog.Hash {
	switch len(leaves) {
	case 0:
		return emptyRoot
	case 1:
		return leaves[0]
	}
	k := splitPoint(uint64(len(leaves)))
	return tlog.NodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

// splitPoint is the largest power of two below n (n > 1).
func splitPoint(n uint64) uint64 {
	return 1 << (bits.Len64(n-1) - 1)
}

// consistencyProof is the RFC 6962 proof that the tree of old leaves is a
// prefix of the tree of old+len(added) leaves, built from the compact
// range at old and the leaf hashes added after it: every node of the
// proof either lies left of old (a union of the range's subtrees) or
// right of it (a hash over added leaves).
func consistencyProof(at *compactRange, added []tlog.Hash) ([]tlog.Hash, error) {
	m, n := at.size, at.size+uint64(len(added))
	if m == 0 || m == n {
		return nil, nil
	}
	hash := func(lo, hi uint64) (tlog.Hash, error) {
		if lo >= m {
			return mth(added[lo-m : hi-m]), nil
		}
		return at.fold(lo, hi)
	}
	var proof []tlog.Hash
	var sub func(lo, hi uint64, complete bool) error
	sub = func(lo, hi uint64, complete bool) error {
		if m == hi {
			if complete {
				return nil
			}
			h, err := hash(lo, hi)
			proof = append(proof, h)
			return err
		}
		k := splitPoint(hi - lo)
		if m <= lo+k {
			if err := sub(lo, lo+k, complete); err != nil {
				return err
			}
			h, err := hash(lo+k, hi)
			proof = append(proof, h)
			return err
		}
		if err := sub(lo+k, hi, false); err != nil {
			return err
		}
		h, err := hash(lo, lo+k)
		proof = append(proof, h)
		return err
	}
	err := sub(0, n, true)
	return proof, err
}

// fold is the hash of the leaves [lo, hi), which must be exactly a run of
// r's subtrees.
func (r *compactRange) fold(lo, hi uint64) (tlog.Hash, error) {
	var hs []tlog.Hash
	for i := range r.nodes {
		a, b := r.span(i)
		if a >= lo && b <= hi {
			hs = append(hs, r.nodes[i])
		}
	}
	if len(hs) == 0 {
		return tlog.Hash{}, errors.New("audit: no subtree of the range spans the proof node")
	}
	h := hs[len(hs)-1]
	for i := len(hs) - 2; i >= 0; i-- {
		h = tlog.NodeHash(hs[i], h)
	}
	return h, nil
}

// inclusionProof is the RFC 6962 audit path of leaf index in the tree of
// leaves.
func inclusionProof(index uint64, leaves []tlog.Hash) []tlog.Hash {
	var proof []tlog.Hash
	lo, hi := uint64(0), uint64(len(leaves))
	var path []tlog.Hash
	for hi-lo > 1 {
		k := splitPoint(hi - lo)
		if index < lo+k {
			path = append(path, mth(leaves[lo+k:hi]))
			hi = lo + k
		} else {
			path = append(path, mth(leaves[lo:lo+k]))
			lo += k
		}
	}
	for i := len(path) - 1; i >= 0; i-- { // leaf to root
		proof = append(proof, path[i])
	}
	return proof
}
