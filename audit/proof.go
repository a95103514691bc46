package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Proof shows that one audit line is in a signed tree of the trail: the
// line, the RFC 6962 inclusion proof of leaf Seq-1 in the tree of the
// checkpoint, and the signed checkpoint note. Anyone with the trail's
// public key checks it (Check), without the trail.
type Proof struct {
	Seq        uint64
	Line       []byte
	Hashes     []tlog.Hash
	Checkpoint []byte // the signed note
}

// proofHeader starts a marshalled Proof.
const proofHeader = "aileron audit inclusion proof v1"

// maxProofHashes bounds a proof: a tree of 2^63 leaves needs 63.
const maxProofHashes = 64

// Prove builds the Proof of line seq from the trail in files: the first
// checkpoint after the line that covers it signs the tree the proof is
// for. It fails when no checkpoint covers the line yet, or when the
// trail's lines do not give the signed root (run VerifyTrail).
func Prove(files []string, seq uint64) (Proof, error) {
	var leaves []tlog.Hash
	p := Proof{Seq: seq}
	errDone := errors.New("done")
	for _, path := range files {
		err := eachLine(path, func(line []byte) error {
			n := uint64(len(leaves)) + 1
			if err := startsTheTrail(leaves, line); err != nil {
				return err
			}
			if n == seq {
				p.Line = append([]byte(nil), line...)
			}
			if n > seq && bytes.Contains(line, checkpointMarker) {
				signed, cp, err := unverifiedCheckpoint(line)
				if err != nil {
					return fmt.Errorf("%s: seq %d: %w", path, n, err)
				}
				if cp.Size >= seq {
					if cp.Size > uint64(len(leaves)) {
						return fmt.Errorf("%w: the checkpoint at seq %d claims %d lines, more than precede it; run `aileron audit verify`", ErrCorrupt, n, cp.Size)
					}
					if root := mth(leaves[:cp.Size]); root != cp.Root {
						return fmt.Errorf("%w: the checkpoint at seq %d signs a root its lines do not give; run `aileron audit verify`", ErrCorrupt, n)
					}
					p.Hashes, p.Checkpoint = inclusionProof(seq-1, leaves[:cp.Size]), signed
					return errDone
				}
			}
			leaves = append(leaves, leafHash(line))
			return nil
		})
		if errors.Is(err, errDone) {
			return p, nil
		}
		if err != nil {
			return Proof{}, err
		}
	}
	if p.Line == nil {
		return Proof{}, fmt.Errorf("audit: the trail has no line seq %d (it has %d lines)", seq, len(leaves))
	}
	return Proof{}, fmt.Errorf("audit: no checkpoint covers line seq %d yet; the next one is written within audit.checkpoint_interval", seq)
}

// ProveIn builds the Proof of line seq in the tree a given checkpoint
// signs, carrying signed (its note: a witness's, with its cosignature,
// proves more than the trail's own): the trail's first cp.Size lines must
// give cp.Root.
func ProveIn(files []string, seq uint64, cp Checkpoint, signed []byte) (Proof, error) {
	if seq == 0 || seq > cp.Size {
		return Proof{}, fmt.Errorf("audit: the checkpoint covers lines 1..%d, not line %d", cp.Size, seq)
	}
	var leaves []tlog.Hash
	p := Proof{Seq: seq, Checkpoint: signed}
	errDone := errors.New("done")
	for _, path := range files {
		err := eachLine(path, func(line []byte) error {
			if uint64(len(leaves)) == cp.Size {
				return errDone
			}
			if err := startsTheTrail(leaves, line); err != nil {
				return err
			}
			if uint64(len(leaves))+1 == seq {
				p.Line = append([]byte(nil), line...)
			}
			leaves = append(leaves, leafHash(line))
			return nil
		})
		if errors.Is(err, errDone) {
			break
		}
		if err != nil {
			return Proof{}, err
		}
	}
	if uint64(len(leaves)) < cp.Size {
		return Proof{}, &TrailError{Kind: ProblemTruncated, Detail: fmt.Sprintf("the trail holds %d lines, but the checkpoint covers %d", len(leaves), cp.Size)}
	}
	if mth(leaves) != cp.Root {
		return Proof{}, &TrailError{Kind: ProblemForked, Detail: fmt.Sprintf("the trail's first %d lines do not give the checkpoint's root: the trail was rewritten since it was signed", cp.Size)}
	}
	p.Hashes = inclusionProof(seq-1, leaves)
	return p, nil
}

// startsTheTrail checks that the first line read is seq 1: proofs count
// leaves from the trail's start.
func startsTheTrail(leaves []tlog.Hash, line []byte) error {
	if len(leaves) > 0 {
		return nil
	}
	if seq, _, problem := parseHead(line); problem != "" || seq != 1 {
		return fmt.Errorf("audit: the files given start at seq %d, not at the trail's first line: a proof needs every file from seq 1", seq)
	}
	return nil
}

// unverifiedCheckpoint reads a checkpoint line's note without checking
// its signature (the Proof's reader does).
func unverifiedCheckpoint(line []byte) ([]byte, Checkpoint, error) {
	var ev struct {
		Details map[string]string `json:"details"`
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return nil, Checkpoint{}, err
	}
	signed := []byte(ev.Details[ckNote])
	text, _, ok := bytes.Cut(signed, []byte("\n\n"))
	if !ok {
		return nil, Checkpoint{}, errors.New("its note has no signature")
	}
	cp, err := ParseCheckpoint(string(text) + "\n")
	return signed, cp, err
}

// Marshal renders p as text: a header line, "seq N", "line <the line>",
// one "hash <base64>" per proof hash, an empty line, the signed note.
func (p Proof) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nseq %d\nline %s\n", proofHeader, p.Seq, p.Line)
	for _, h := range p.Hashes {
		fmt.Fprintf(&b, "hash %s\n", base64.StdEncoding.EncodeToString(h[:]))
	}
	b.WriteByte('\n')
	b.Write(p.Checkpoint)
	return b.Bytes()
}

// ParseProof reads what Marshal wrote.
func ParseProof(b []byte) (Proof, error) {
	head, signed, ok := bytes.Cut(b, []byte("\n\n"))
	if !ok {
		return Proof{}, errors.New("audit: proof: no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	if len(lines) < 3 || lines[0] != proofHeader {
		return Proof{}, fmt.Errorf("audit: proof: not an Aileron inclusion proof (it starts with %q)", proofHeader)
	}
	var p Proof
	s, ok := strings.CutPrefix(lines[1], "seq ")
	seq, err := strconv.ParseUint(s, 10, 64)
	if !ok || err != nil || seq == 0 {
		return Proof{}, fmt.Errorf("audit: proof: %q is not \"seq N\"", lines[1])
	}
	line, ok := strings.CutPrefix(lines[2], "line ")
	if !ok {
		return Proof{}, fmt.Errorf("audit: proof: %q is not \"line <audit line>\"", lines[2])
	}
	p.Seq, p.Line, p.Checkpoint = seq, []byte(line), signed
	if len(lines)-3 > maxProofHashes {
		return Proof{}, fmt.Errorf("audit: proof: %d hashes; no tree needs more than %d", len(lines)-3, maxProofHashes)
	}
	for _, l := range lines[3:] {
		s, ok := strings.CutPrefix(l, "hash ")
		h, err := base64.StdEncoding.Strict().DecodeString(s)
		if !ok || err != nil || len(h) != tlog.HashSize {
			return Proof{}, fmt.Errorf("audit: proof: %q is not \"hash <base64 SHA-256>\"", l)
		}
		p.Hashes = append(p.Hashes, tlog.Hash(h))
	}
	return p, nil
}

// Check verifies p offline with the trail's verifier key (as `aileron
// audit key` prints it): the checkpoint's signature, that the line has
// seq p.Seq, and that its leaf is in the signed tree. It returns the
// checkpoint.
func (p Proof) Check(vkey string) (Checkpoint, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: key %q: %w", vkey, err)
	}
	cp, err := OpenCheckpoint(p.Checkpoint, v)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: proof: the checkpoint does not verify with that key: %w", err)
	}
	if seq, _, problem := parseHead(p.Line); problem != "" || seq != p.Seq {
		return Checkpoint{}, fmt.Errorf("audit: proof: the line is not audit line seq %d", p.Seq)
	}
	if p.Seq > cp.Size {
		return Checkpoint{}, fmt.Errorf("audit: proof: the checkpoint covers %d lines, not line %d", cp.Size, p.Seq)
	}
	if err := tlog.CheckRecord(p.Hashes, int64(cp.Size), cp.Root, int64(p.Seq-1), leafHash(p.Line)); err != nil {
		return Checkpoint{}, fmt.Errorf("audit: proof: the line is not in the signed tree: %w", err)
	}
	return cp, nil
}
