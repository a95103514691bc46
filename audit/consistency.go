package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/mod/sumdb/tlog"
)

// ProveConsistency is the RFC 6962 proof that the trail's tree of old
// lines is a prefix of its tree of next lines (what a witness that
// cosigned old lines asks for), read from the files of dir: it starts
// from the range on the checkpoint line that signed the old lines (line
// seq old+1) and hashes the lines after. at, when it is that checkpoint
// (Size old, with File and Offset), saves reading its file from the
// start.
func ProveConsistency(dir string, old, next uint64, at *Signed) ([]tlog.Hash, error) {
	if old == 0 || old == next {
		return nil, nil
	}
	if old > next {
		return nil, fmt.Errorf("audit: no proof from %d lines to fewer (%d)", old, next)
	}
	files, err := ListFiles(dir)
	if err != nil {
		return nil, err
	}
	i, offset := fileHolding(files, old+1), int64(0)
	if at != nil && at.Size == old && at.File != "" {
		i = sort.SearchStrings(files, filepath.Join(dir, at.File))
		if i == len(files) || filepath.Base(files[i]) != at.File {
			return nil, fmt.Errorf("audit: %s, which holds the checkpoint of %d lines, is gone", at.File, old)
		}
		offset = at.Offset
	}
	if i < 0 {
		return nil, fmt.Errorf("audit: no file holds line seq %d", old+1)
	}
	c := &consistencyReader{old: old, next: next}
	for ; i < len(files) && !c.done(); i++ {
		if err := c.read(files[i], offset); err != nil {
			return nil, err
		}
		offset = 0
	}
	if !c.done() {
		return nil, fmt.Errorf("audit: the trail ends before line seq %d", next)
	}
	return consistencyProof(&c.rng, c.leaves)
}

// fileHolding is the index of the file whose lines start at or before seq
// and after which the next file starts later (-1: none).
func fileHolding(files []string, seq uint64) int {
	at := -1
	for i, f := range files {
		if _, first, ok := parseFileName(filepath.Base(f)); ok && first <= seq {
			at = i
		}
	}
	return at
}

// consistencyReader collects the range at old lines and the leaves from
// there to next.
type consistencyReader struct {
	old, next uint64
	started   bool
	rng       compactRange
	leaves    []tlog.Hash
	seq       uint64
}

func (c *consistencyReader) done() bool { return c.started && c.seq == c.next }

func (c *consistencyReader) read(path string, offset int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	lr := newLineReader(f)
	for !c.done() {
		line, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit: read %s: %w", path, err)
		}
		if err := c.line(line); err != nil {
			return fmt.Errorf("audit: %s: %w", path, err)
		}
	}
	return nil
}

func (c *consistencyReader) line(line []byte) error {
	seq, _, problem := parseHead(line)
	switch {
	case problem != "":
		return errors.New(problem)
	case !c.started && seq < c.old+1:
		return nil // before the checkpoint line
	case !c.started && seq > c.old+1:
		return fmt.Errorf("line seq %d is missing", c.old+1)
	case !c.started:
		var ev struct {
			Name    EventName         `json:"event"`
			Details map[string]string `json:"details"`
		}
		if err := json.Unmarshal(line, &ev); err != nil || ev.Name != EventCheckpoint || ev.Details[ckSize] != fmt.Sprint(c.old) {
			return fmt.Errorf("line seq %d is not the checkpoint of %d lines", seq, c.old)
		}
		nodes, err := rangeNodes(ev.Details[ckRange])
		if err == nil {
			c.rng, err = newCompactRange(c.old, nodes)
		}
		if err != nil {
			return fmt.Errorf("checkpoint at seq %d: %w", seq, err)
		}
		c.started = true
	case seq != c.seq+1:
		return fmt.Errorf("line seq %d follows seq %d", seq, c.seq)
	}
	c.leaves = append(c.leaves, leafHash(line))
	c.seq = seq
	return nil
}
