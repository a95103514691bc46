package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Details keys of an audit.checkpoint line.
const (
	ckOrigin = "origin"
	ckSize   = "size"
	ckRoot   = "root"
	ckRange  = "range"
	ckNote   = "note"
)

// checkpointMarker finds candidate checkpoint lines without decoding
// every line.
var checkpointMarker = []byte(`"event":"` + string(EventCheckpoint) + `"`)

// ckLine is a checkpoint line of the trail, checked: its signature
// verifies and its range gives its root.
type ckLine struct {
	seq uint64
	cp  Checkpoint
	rng compactRange // the tree after cp.Size lines
}

// checkpointDetails are the details of a checkpoint line: the signed
// note, its fields in plain sight, and the compact range a daemon resumes
// the tree from without rereading the trail.
func checkpointDetails(cp Checkpoint, rng *compactRange, signed []byte) map[string]string {
	parts := make([]string, len(rng.nodes))
	for i, h := range rng.nodes {
		parts[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return map[string]string{
		ckOrigin: cp.Origin,
		ckSize:   strconv.FormatUint(cp.Size, 10),
		ckRoot:   base64.StdEncoding.EncodeToString(cp.Root[:]),
		ckRange:  strings.Join(parts, ","),
		ckNote:   string(signed),
	}
}

// verifierFor gives the verifier of a trail named origin, or an error
// saying why that trail is not the expected one.
type verifierFor func(origin string) (note.Verifier, error)

// trailVerifier checks checkpoints with k under the origin they name
// (the key signs every trail of its daemon), refusing any but want when
// want is set (the trail the daemon's record names).
func (k *Key) trailVerifier(want string) verifierFor {
	return func(origin string) (note.Verifier, error) {
		if want != "" && origin != want {
			return nil, &TrailError{Kind: ProblemSwapped, Detail: fmt.Sprintf("the checkpoint is signed as %s, but the daemon's trail is %s: these files come from another daemon or another trail", origin, want)}
		}
		return k.verifier(origin)
	}
}

// parseCheckpointLine reads a checkpoint line: its note must verify under
// its origin, and its range must give the signed root.
func parseCheckpointLine(line []byte, vf verifierFor) (ckLine, error) {
	var ev struct {
		Seq     uint64            `json:"seq"`
		Name    EventName         `json:"event"`
		Details map[string]string `json:"details"`
	}
	if err := json.Unmarshal(line, &ev); err != nil || ev.Name != EventCheckpoint {
		return ckLine{}, fmt.Errorf("not a checkpoint line")
	}
	v, err := vf(ev.Details[ckOrigin])
	if err != nil {
		return ckLine{}, err
	}
	cp, err := OpenCheckpoint([]byte(ev.Details[ckNote]), v)
	if err != nil {
		return ckLine{}, &TrailError{Kind: ProblemBadSignature, Seq: ev.Seq,
			Detail: fmt.Sprintf("the checkpoint at seq %d does not verify under %s: %v", ev.Seq, v.Name(), err)}
	}
	nodes, err := rangeNodes(ev.Details[ckRange])
	if err != nil {
		return ckLine{}, fmt.Errorf("checkpoint at seq %d: %w", ev.Seq, err)
	}
	rng, err := newCompactRange(cp.Size, nodes)
	if err == nil && rng.root() != cp.Root {
		err = errors.New("its range does not give its signed root")
	}
	if err != nil {
		return ckLine{}, fmt.Errorf("checkpoint at seq %d: %w", ev.Seq, err)
	}
	if cp.Size >= ev.Seq {
		return ckLine{}, fmt.Errorf("checkpoint at seq %d claims %d lines: a checkpoint covers only lines before it", ev.Seq, cp.Size)
	}
	return ckLine{seq: ev.Seq, cp: cp, rng: rng}, nil
}

// rangeNodes parses the range of a checkpoint line.
func rangeNodes(r string) ([]tlog.Hash, error) {
	if r == "" {
		return nil, nil
	}
	var nodes []tlog.Hash
	for _, s := range strings.Split(r, ",") {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || len(b) != tlog.HashSize {
			return nil, fmt.Errorf("range hash %q is not base64 SHA-256", s)
		}
		nodes = append(nodes, tlog.Hash(b))
	}
	return nodes, nil
}

// tailScan is what Open learns from the end of a trail it keeps a tree
// over.
type tailScan struct {
	tree     compactRange // over every line
	last     *ckLine      // the last checkpoint line (nil: none)
	lastSeq  uint64
	lastHash string
	// markHash and endHash are the hashes of the lines at the seqs asked
	// for ("" when the trail does not hold that line).
	markHash, endHash string
}

// scanTail rebuilds the tree of the trail in files (in chain order)
// from its last checkpoint on, so that only the lines after it are read
// twice. It also picks up the hashes of lines markSeq and endSeq (0: none
// wanted), and checks that the first file it reads chains onto the one
// before.
func scanTail(files []string, vf verifierFor, markSeq, endSeq uint64) (tailScan, error) {
	var ts tailScan
	start := 0
	for i := len(files) - 1; i >= 0; i-- {
		if ts.last == nil {
			ck, err := lastCheckpointIn(files[i], vf)
			if err != nil {
				return ts, err
			}
			ts.last = ck
		}
		_, first, ok := parseFileName(filepath.Base(files[i]))
		if ts.last != nil && ok && first <= ts.last.cp.Size+1 && (markSeq == 0 || first <= markSeq) {
			start = i
			break
		}
	}
	if ts.last != nil {
		ts.tree = ts.last.rng.clone()
	}
	if start > 0 { // the junction with the file before: it must chain
		line, err := lastLine(files[start-1])
		if err != nil {
			return ts, err
		}
		if seq, _, problem := parseHead(line); problem == "" && line != nil {
			ts.lastSeq, ts.lastHash = seq, lineHash(line)
		}
	}
	for _, path := range files[start:] {
		if err := ts.forward(path, markSeq, endSeq); err != nil {
			return ts, err
		}
	}
	return ts, nil
}

// lastCheckpointIn is the last checkpoint line of path (nil: none).
func lastCheckpointIn(path string, vf verifierFor) (*ckLine, error) {
	var found []byte
	err := eachLine(path, func(line []byte) error {
		if bytes.Contains(line, checkpointMarker) {
			found = append(found[:0], line...)
		}
		return nil
	})
	if err != nil || found == nil {
		return nil, err
	}
	ck, err := parseCheckpointLine(found, vf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	return &ck, nil
}

// forward adds path's lines after the tree's size to the tree, checking
// that they chain.
func (ts *tailScan) forward(path string, markSeq, endSeq uint64) error {
	return eachLine(path, func(line []byte) error {
		seq, prev, problem := parseHead(line)
		switch {
		case problem != "":
			return fmt.Errorf("%w: %s: seq after %d: %s; run `aileron audit verify`", ErrCorrupt, path, ts.lastSeq, problem)
		case ts.lastSeq != 0 && (seq != ts.lastSeq+1 || prev != ts.lastHash):
			return fmt.Errorf("%w: %s: line seq %d does not chain onto seq %d; run `aileron audit verify`", ErrCorrupt, path, seq, ts.lastSeq)
		}
		h := lineHash(line)
		if seq == markSeq {
			ts.markHash = h
		}
		if seq == endSeq {
			ts.endHash = h
		}
		if seq > ts.tree.size {
			if seq != ts.tree.size+1 {
				return fmt.Errorf("%w: %s: the trail goes on at seq %d, but its last checkpoint covers %d lines", ErrCorrupt, path, seq, ts.tree.size)
			}
			ts.tree.add(leafHash(line))
		}
		ts.lastSeq, ts.lastHash = seq, h
		return nil
	})
}

// eachLine calls fn with each complete line of path (a torn tail, left by
// a write that failed, is not a line).
func eachLine(path string, fn func(line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	lr := newLineReader(f)
	for {
		line, err := lr.next()
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, errLineTooLong):
			return fmt.Errorf("%w: %s: a line is longer than %d bytes", ErrCorrupt, path, MaxLineBytes)
		case err != nil:
			return fmt.Errorf("audit: read %s: %w", path, err)
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}

// LastOrigin is the origin of the last checkpoint line in files (read
// without checking its signature: for finding the trail, not trusting
// it).
func LastOrigin(files []string) (string, error) {
	for i := len(files) - 1; i >= 0; i-- {
		var origin string
		err := eachLine(files[i], func(line []byte) error {
			if bytes.Contains(line, checkpointMarker) {
				var ev struct {
					Details map[string]string `json:"details"`
				}
				if json.Unmarshal(line, &ev) == nil && ev.Details[ckOrigin] != "" {
					origin = ev.Details[ckOrigin]
				}
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		if origin != "" {
			return origin, nil
		}
	}
	return "", errors.New("audit: the trail has no checkpoint yet: nothing of it is signed")
}
