package audit

import (
	"bufio"

	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/tlog"
)

// errLineTooLong reports a line over MaxLineBytes.
var errLineTooLong = errors.New("line too long")

// lineReader yields complete lines. At EOF the bytes of an incomplete last
// line stay pending, so a follower can pick the line up once it is
// complete.
type lineReader struct {
	r       *bufio.Reader
	pending []byte
	taken   bool // pending holds a line returned by next; clear it first
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next complete line without its '\n', valid until the
// next call. It returns io.EOF when no complete line is available (see
// partial), errLineTooLong for a line over MaxLineBytes, or a read error.
func (lr *lineReader) next() ([]byte, error) {
	if lr.taken {
		lr.pending, lr.taken = lr.pending[:0], false
	}
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if len(lr.pending)+len(chunk) > MaxLineBytes+1 {
			return nil, errLineTooLong
		}
		lr.pending = append(lr.pending, chunk...)
		switch err {
		case nil:
			lr.taken = true
			return lr.pending[:len(lr.pending)-1], nil
		case bufio.ErrBufferFull:
			continue
		default:
			return nil, err
		}
	}
}

// partial is the length of an incomplete line read so far.
func (lr *lineReader) partial() int {
	if lr.taken {
		return 0
	}
	return len(lr.pending)
}

// reset drops pending bytes and reads from r again.
func (lr *lineReader) reset(r io.Reader) {
	lr.r.Reset(r)
	lr.pending, lr.taken = lr.pending[:0], false
}

// Report is the outcome of Verify.
type Report struct {
	// Lines is how many lines verified before the first problem (all of
	// them when OK).
	Lines int
	// OK is true when every line chains correctly.
	OK bool
	// Problem says what broke at File:Line ("" when OK).
	Problem string
	// File and Line (1-based) locate the first bad line.
	File string
	Line int
	// Seq is the bad line's seq when it could be read (0 otherwise).
	Seq uint64
	// FirstSeq and LastSeq are the seq of the first and last line read. A
	// FirstSeq above 1 means the start of the log was not included (or was
	// removed): Verify cannot tell which.
	FirstSeq, LastSeq uint64
	// LastHash is the hash of the last line (when OK). Removing lines from
	// the END of a log is only detectable against a LastHash/LastSeq kept
	// elsewhere: a Mark, or a witness (VerifyOptions).
	LastHash string
	// Kind names the problem (when not OK).
	Kind Problem
	// With a key: Origin is the trail's name, Checkpoints how many
	// checkpoints verified, Signed how many lines the last one covers.
	Origin      string
	Checkpoints int
	Signed      uint64
	// Roots are the verified tree roots by size, for checks against a
	// witness.
	Roots map[uint64]tlog.Hash
}

// verifier walks the chain across files.
type verifier struct {
	rep      Report
	started  bool
	prevSeq  uint64
	prevHash string
	prevFile string
	prevLine int
	tree     *treeCheck // nil: chain only
}

// Verify checks the chain over files, in the order given (pass them in
// name order; VerifyDir does). It recomputes each line's hash and checks
// that seq grows by one and prev_hash names the previous line, across file
// boundaries, and reports the FIRST break: an unparsable or empty line, a
// seq that jumps (lines deleted) or goes back (lines reordered or
// duplicated), a line whose content no longer matches the next line's
// prev_hash (that line was edited; Report names it), a partial last line
// (no trailing newline: truncated file or torn write), or a line longer
// than MaxLineBytes. A break is reported in Report with a nil error; the
// error is for files that cannot be read and wraps the os error.
func Verify(files []string) (Report, error) {
	return VerifyTrail(VerifyOptions{Files: files})
}

// VerifyTrail is Verify with the checks of a provable trail; see
// VerifyOptions.
func VerifyTrail(o VerifyOptions) (Report, error) {
	v := &verifier{}
	files := o.Files
	if files == nil && o.Dir != "" {
		var err error
		if files, err = ListFiles(o.Dir); err != nil {
			return Report{}, err
		}
	}
	if o.Key != nil || o.VerifierKey != "" {
		tc, err := newTreeCheck(o)
		if err != nil {
			return Report{}, err
		}
		v.tree = tc
	}
	for _, path := range files {
		ok, err := v.file(path)
		if err != nil || !ok {
			return v.rep, err
		}
	}
	if v.tree != nil && !v.tree.end(v, o) {
		return v.rep, nil
	}
	v.rep.OK = true
	return v.rep, nil
}

// VerifyDir verifies every audit file of dir in name order; see Verify.
func VerifyDir(dir string) (Report, error) {
	files, err := ListFiles(dir)
	if err != nil {
		return Report{}, err
	}
	return Verify(files)
}

// file verifies one file; false means a problem was recorded.
func (v *verifier) file(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("audit: verify: %w", err)
	}
	defer f.Close()
	lr := newLineReader(f)
	for n := 1; ; n++ {
		line, err := lr.next()
		switch {
		case err == io.EOF:
			if p := lr.partial(); p > 0 {
				return false, v.bad(ProblemPartialLine, path, n, 0, fmt.Sprintf("partial last line (%d bytes, no trailing newline): the file was truncated or a write was torn", p))
			}
			return true, nil
		case errors.Is(err, errLineTooLong):
			return false, v.bad(ProblemUnparsable, path, n, 0, fmt.Sprintf("line is longer than %d bytes", MaxLineBytes))
		case err != nil:
			return false, fmt.Errorf("audit: verify: read %s: %w", path, err)
		}
		if !v.line(path, n, line) {
			return false, nil
		}
	}
}

// bad records the first problem; it returns nil so callers can return it.
func (v *verifier) bad(kind Problem, file string, line int, seq uint64, problem string) error {
	v.rep.Kind = kind
	v.rep.File, v.rep.Line, v.rep.Seq, v.rep.Problem = file, line, seq, problem
	return nil
}

// line checks one complete line; false means a problem was recorded.
func (v *verifier) line(path string, n int, line []byte) bool {
	if len(line) == 0 {
		v.bad(ProblemUnparsable, path, n, 0, "empty line")
		return false
	}
	seq, prev, problem := parseHead(line)
	if problem != "" {
		v.bad(ProblemUnparsable, path, n, 0, problem)
		return false
	}
	if prev == "" && seq != 1 {
		v.bad(ProblemUnparsable, path, n, seq, fmt.Sprintf("prev_hash is empty but seq is %d; only seq 1 starts a chain", seq))
		return false
	}
	if seq == 1 && prev != "" {
		v.bad(ProblemUnparsable, path, n, seq, "seq 1 has a non-empty prev_hash; the first line of a log chains from nothing")
		return false
	}
	if !v.started {
		v.rep.FirstSeq = seq
	} else {
		switch {
		case seq > v.prevSeq+1:
			v.bad(ProblemLinesMissing, path, n, seq, fmt.Sprintf("seq jumps from %d to %d: %d line(s) before this one are missing (deleted, or cut out together with the end of the previous line), or lines were reordered", v.prevSeq, seq, seq-v.prevSeq-1))
			return false
		case seq <= v.prevSeq:
			v.bad(ProblemReordered, path, n, seq, fmt.Sprintf("seq goes back from %d to %d: lines were reordered or duplicated", v.prevSeq, seq))
			return false
		case prev != v.prevHash:
			v.rep.Lines--
			v.bad(ProblemEditedLine, v.prevFile, v.prevLine, v.prevSeq, fmt.Sprintf("line seq %d does not match the prev_hash recorded by the next line (%s line %d, seq %d): this line was edited (or the next line's prev_hash was)", v.prevSeq, path, n, seq))
			return false
		}
	}
	if v.tree != nil && !v.tree.line(v, path, n, seq, line) {
		return false
	}
	v.started = true
	v.prevSeq, v.prevHash, v.prevFile, v.prevLine = seq, lineHash(line), path, n
	v.rep.Lines++
	v.rep.LastSeq, v.rep.LastHash = seq, v.prevHash
	return true
}
