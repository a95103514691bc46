package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	filePrefix = "audit-"
	fileSuffix = ".jsonl"
	// nameTime is the UTC timestamp in file names; fixed width so names
	// sort in time order.
	nameTime = "20060102T150405.000000000"
)

// fileName is the base name of a log file whose first line is seq.
func fileName(t time.Time, seq uint64) string {
	return fmt.Sprintf("%s%sZ-%020d%s", filePrefix, t.UTC().Format(nameTime), seq, fileSuffix)
}

// parseFileName returns the timestamp and first seq of a log file name.
func parseFileName(base string) (time.Time, uint64, bool) {
	s, ok := strings.CutPrefix(base, filePrefix)
	if !ok {
		return time.Time{}, 0, false
	}
	if s, ok = strings.CutSuffix(s, fileSuffix); !ok {
		return time.Time{}, 0, false
	}
	ts, seqText, ok := strings.Cut(s, "Z-")
	if !ok {
		return time.Time{}, 0, false
	}
	t, err := time.Parse(nameTime, ts)
	if err != nil {
		return time.Time{}, 0, false
	}
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		return time.Time{}, 0, false
	}
	return t, seq, true
}

// ListFiles returns the paths of dir's audit files (audit-*.jsonl) sorted
// by name, which is chain order. Every failure is the os error of reading
// dir.
func ListFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: list %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries { // os.ReadDir sorts by name
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, filePrefix) && strings.HasSuffix(n, fileSuffix) {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out, nil
}

// lineHash is the chain hash of one line (without its newline).
func lineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// chainHead is the part of a line the chain checks.
type chainHead struct {
	Seq      *uint64 `json:"seq"`
	PrevHash *string `json:"prev_hash"`
}

// parseHead parses a line's seq and prev_hash, explaining what is wrong.
func parseHead(line []byte) (seq uint64, prev string, problem string) {
	var h chainHead
	if err := json.Unmarshal(line, &h); err != nil {
		return 0, "", "line is not a valid JSON object (" + err.Error() + ")"
	}
	switch {
	case h.Seq == nil:
		return 0, "", "line has no seq"
	case *h.Seq == 0:
		return 0, "", "line has seq 0; seq starts at 1"
	case *h.Seq > math.MaxInt64:
		return 0, "", fmt.Sprintf("line has seq %d, beyond 2^63-1", *h.Seq)
	case h.PrevHash == nil:
		return 0, "", "line has no prev_hash"
	}
	if p := *h.PrevHash; p != "" && !isHexHash(p) {
		return 0, "", fmt.Sprintf("prev_hash %q is not 64 lower-case hex digits", p)
	}
	return *h.Seq, *h.PrevHash, ""
}

func isHexHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// lastLine returns the last complete line of path (nil for an empty file).
// A file that does not end in '\n', or whose last line is longer than
// MaxLineBytes, is corrupt.
func lastLine(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size == 0 {
		return nil, nil
	}
	n := min(size, MaxLineBytes+2)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, size-n); err != nil && err != io.EOF {
		return nil, err
	}
	if buf[n-1] != '\n' {
		return nil, fmt.Errorf("%w: %s ends in a partial line (no trailing newline): the last write was torn or the file was truncated; run `aileron audit verify` and move the damaged file aside", ErrCorrupt, path)
	}
	buf = buf[:n-1]
	i := bytes.LastIndexByte(buf, '\n')
	if i < 0 && n < size {
		return nil, fmt.Errorf("%w: %s: last line is longer than %d bytes", ErrCorrupt, path, MaxLineBytes)
	}
	return buf[i+1:], nil
}
