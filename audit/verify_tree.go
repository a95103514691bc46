package audit

import (
	"bytes"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// VerifyOptions says what VerifyTrail checks beyond the chain.
type VerifyOptions struct {
	// Files are the trail's files in name order; nil means every file
	// of Dir.
	Files []string
	Dir   string
	// Key or VerifierKey (a signed-note verifier key, as printed by
	// `aileron audit key`) turn on the tree checks: every checkpoint
	// line must verify, be signed under the trail's one origin (with
	// VerifierKey: under the key's name) and match the tree of the lines
	// before it. Neither: the chain only.
	Key         *Key
	VerifierKey string
	// Mark, when set, is the daemon's record of the last checkpoint it
	// wrote: a trail that no longer holds that line, unchanged, is
	// truncated, rolled back, rewritten, swapped or missing.
	Mark *Mark
	// Witnessed, when set, is a checkpoint a witness cosigned for this
	// trail: the trail must hold a checkpoint of that size with that
	// root.
	Witnessed *Checkpoint
}

// treeCheck follows the tree over the lines as Verify reads them. It
// keeps the range at the last verified checkpoint and the leaves after
// it, so memory grows only with the distance between checkpoints.
type treeCheck struct {
	vf       verifierFor
	at       compactRange // the tree at the last verified checkpoint
	pending  []tlog.Hash  // leaves after it
	last     *ckLine
	markSeq  uint64
	markHash string
	endSeq   uint64
	endHash  string
}

func newTreeCheck(o VerifyOptions) (*treeCheck, error) {
	tc := &treeCheck{}
	if o.Mark != nil {
		tc.markSeq, tc.endSeq = o.Mark.Seq, o.Mark.EndSeq
	}
	if o.Key != nil {
		want := ""
		if o.Mark != nil {
			want = o.Mark.Origin
		}
		tc.vf = o.Key.trailVerifier(want)
		return tc, nil
	}
	v, err := note.NewVerifier(o.VerifierKey)
	if err != nil {
		return nil, fmt.Errorf("audit: the trail's public key %q: %w", o.VerifierKey, err)
	}
	tc.vf = func(origin string) (note.Verifier, error) {
		if origin != v.Name() {
			return nil, &TrailError{Kind: ProblemSwapped, Detail: fmt.Sprintf("the checkpoint is signed as %s, but the key given is for %s: this trail is not the one that key signs", origin, v.Name())}
		}
		return v, nil
	}
	return tc, nil
}

// line adds a chained line to the tree and checks it when it is a
// checkpoint; false means a problem was recorded.
func (tc *treeCheck) line(v *verifier, path string, n int, seq uint64, line []byte) bool {
	if seq != tc.at.size+uint64(len(tc.pending))+1 {
		v.bad(ProblemBadCheck, path, n, seq, fmt.Sprintf("the tree checks start at seq 1, but this line has seq %d: verify the whole trail, from its first file", seq))
		return false
	}
	if seq == tc.markSeq {
		tc.markHash = lineHash(line)
	}
	if seq == tc.endSeq {
		tc.endHash = lineHash(line)
	}
	if bytes.Contains(line, checkpointMarker) {
		if !tc.checkpoint(v, path, n, seq, line) {
			return false
		}
	}
	tc.pending = append(tc.pending, leafHash(line))
	return true
}

// checkpoint checks one checkpoint line against the lines before it.
func (tc *treeCheck) checkpoint(v *verifier, path string, n int, seq uint64, line []byte) bool {
	ck, err := parseCheckpointLine(line, tc.vf)
	if err != nil {
		kind := ProblemBadCheck
		var te *TrailError
		if errors.As(err, &te) {
			kind = te.Kind
		}
		v.bad(kind, path, n, seq, err.Error())
		return false
	}
	if tc.last != nil && ck.cp.Origin != tc.last.cp.Origin {
		v.bad(ProblemSwapped, path, n, seq, fmt.Sprintf("this checkpoint is signed as %s, the ones before it as %s: files of two trails were put together", ck.cp.Origin, tc.last.cp.Origin))
		return false
	}
	from := tc.at.size
	if ck.cp.Size < from {
		v.bad(ProblemBadCheck, path, n, seq, fmt.Sprintf("this checkpoint covers %d lines, fewer than the one before it (%d)", ck.cp.Size, from))
		return false
	}
	r := tc.at.clone()
	for _, h := range tc.pending[:ck.cp.Size-from] {
		r.add(h)
	}
	if r.root() != ck.cp.Root {
		v.bad(ProblemRewritten, path, n, seq, fmt.Sprintf("the root this checkpoint signed for %d lines does not match them: a line among seq %d..%d was rewritten and the chain recomputed (the signed note is the original)", ck.cp.Size, from+1, ck.cp.Size))
		return false
	}
	tc.at, tc.pending, tc.last = r, append(tc.pending[:0], tc.pending[ck.cp.Size-from:]...), &ck
	v.rep.Origin, v.rep.Signed = ck.cp.Origin, ck.cp.Size
	v.rep.Checkpoints++
	if v.rep.Roots == nil {
		v.rep.Roots = map[uint64]tlog.Hash{}
	}
	v.rep.Roots[ck.cp.Size] = ck.cp.Root
	return true
}

// end checks the whole trail against the Mark and the witnessed
// checkpoint; false means a problem was recorded.
func (tc *treeCheck) end(v *verifier, o VerifyOptions) bool {
	if o.Mark != nil && o.Mark.Seq != 0 {
		origin := ""
		if tc.last != nil {
			origin = tc.last.cp.Origin
		}
		t := trailEnd{dir: o.Dir, lines: v.started, lastSeq: v.prevSeq, origin: origin, last: tc.last, markHash: tc.markHash, endHash: tc.endHash}
		if te := againstMark(t, *o.Mark); te != nil {
			v.bad(te.Kind, v.prevFile, v.prevLine, te.Seq, te.Detail)
			return false
		}
	}
	if o.Witnessed != nil {
		if te := v.rep.AgainstWitness(*o.Witnessed); te != nil {
			v.bad(te.Kind, v.prevFile, v.prevLine, te.Seq, te.Detail)
			return false
		}
	}
	return true
}

// AgainstWitness compares a verified trail with a checkpoint a witness
// cosigned of it: the trail must hold a checkpoint of that size with that
// root. nil means it does.
func (r Report) AgainstWitness(w Checkpoint) *TrailError {
	root, ok := r.Roots[w.Size]
	switch {
	case r.Origin != "" && w.Origin != r.Origin:
		return &TrailError{Kind: ProblemSwapped, Detail: fmt.Sprintf("the witness holds trail %s, this trail is %s", w.Origin, r.Origin)}
	case w.Size > r.Signed:
		return &TrailError{Kind: ProblemTruncated, Seq: r.LastSeq, Detail: fmt.Sprintf("the witness cosigned a checkpoint of %d lines, but this trail's checkpoints cover only %d: lines were cut off its end, or an older copy was put back", w.Size, r.Signed)}
	case !ok || root != w.Root:
		return &TrailError{Kind: ProblemForked, Detail: fmt.Sprintf("the witness cosigned a different tree of %d lines than this trail holds: the trail was rewritten after the witness saw it", w.Size)}
	}
	return nil
}
