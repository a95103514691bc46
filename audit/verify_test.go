package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tamper rewrites one file of a copied log line by line.
func tamper(t *testing.T, path string, edit func(lines [][]byte) []byte) {
	t.Helper()
	if err := os.WriteFile(path, edit(fileLines(t, path)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// join puts lines back together, each with its newline.
func join(lines [][]byte) []byte {
	var b []byte
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	return b
}

// tamperCase damages a copy of a real log and says what Verify must report.
type tamperCase struct {
	name     string
	src      string
	file     int // which file to tamper with
	edit     func(lines [][]byte) []byte
	wantFile int // file and line the report names
	wantLine int
	want     string
}

func tamperCases(single, multi string) []tamperCase {
	return []tamperCase{
		{"edited byte", single, 0, func(ls [][]byte) []byte {
			ls[3] = bytes.Replace(ls[3], []byte("h4.example"), []byte("h4.exbmple"), 1)
			return join(ls)
		}, 0, 4, "was edited"},
		{"edited seq", single, 0, func(ls [][]byte) []byte {
			ls[3] = bytes.Replace(ls[3], []byte(`"seq":4`), []byte(`"seq":5`), 1)
			return join(ls)
		}, 0, 4, "seq jumps from 3 to 5"},
		{"deleted line", single, 0, func(ls [][]byte) []byte {
			return join(append(ls[:4:4], ls[5:]...))
		}, 0, 5, "seq jumps from 4 to 6"},
		{"swapped lines", single, 0, func(ls [][]byte) []byte {
			ls[2], ls[3] = ls[3], ls[2]
			return join(ls)
		}, 0, 3, "seq jumps from 2 to 4"},
		{"duplicated line", single, 0, func(ls [][]byte) []byte {
			return join(append(ls[:3:3], ls[2:]...))
		}, 0, 4, "seq goes back from 3 to 3"},
		{"bytes removed inside a line", single, 0, func(ls [][]byte) []byte {
			b := join(ls)
			start := bytes.Index(b, ls[5]) + len(ls[5])/2
			return append(b[:start:start], b[start+20:]...)
		}, 0, 6, "not a valid JSON"},
		{"bytes removed across two lines", single, 0, func(ls [][]byte) []byte {
			// Line 6's first half joins line 7's second half into valid
			// JSON with line 6's seq: the break shows at the next line.
			b := join(ls)
			start := bytes.Index(b, ls[5]) + len(ls[5])/2
			end := bytes.Index(b, ls[6]) + len(ls[6])/2
			return append(b[:start:start], b[end:]...)
		}, 0, 7, "seq jumps from 6 to 8"},
		{"partial last line", single, 0, func(ls [][]byte) []byte {
			b := join(ls)
			return b[:len(b)-7]
		}, 0, 10, "partial last line"},
		{"unparsable line", single, 0, func(ls [][]byte) []byte {
			ls[1] = []byte("not json")
			return join(ls)
		}, 0, 2, "not a valid JSON"},
		{"empty line", single, 0, func(ls [][]byte) []byte {
			return join(append(ls[:2:2], append([][]byte{{}}, ls[2:]...)...))
		}, 0, 3, "empty line"},
		{"first line of a later file deleted", multi, 1, func(ls [][]byte) []byte {
			return join(ls[1:])
		}, 1, 1, "seq jumps from 3 to 5"},
		{"last line of a file edited", multi, 0, func(ls [][]byte) []byte {
			ls[2] = bytes.Replace(ls[2], []byte(`"GET"`), []byte(`"PUT"`), 1)
			return join(ls)
		}, 0, 3, "was edited"},
		{"middle file truncated to a partial line", multi, 1, func(ls [][]byte) []byte {
			return join(ls)[:100]
		}, 1, 1, "partial last line"},
	}
}

func TestVerifyFindsFirstBreak(t *testing.T) {
	single := t.TempDir()
	writeLog(t, single, 10, 0)
	multi := t.TempDir()
	writeLog(t, multi, 10, 1000) // 3 lines per file
	mustVerifyOK(t, single, 10)
	mustVerifyOK(t, multi, 10)
	for _, c := range tamperCases(single, multi) {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, c.src)
			files := mustFiles(t, dir)
			tamper(t, files[c.file], c.edit)
			rep, err := VerifyDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.File != files[c.wantFile] || rep.Line != c.wantLine || !strings.Contains(rep.Problem, c.want) {
				t.Fatalf("report = %+v\nwant file %s line %d problem containing %q",
					rep, filepath.Base(files[c.wantFile]), c.wantLine, c.want)
			}
		})
	}
}

func TestVerifyReport(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 5, 0)
	rep, err := VerifyDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := fileLines(t, mustFiles(t, dir)[0])
	if !rep.OK || rep.FirstSeq != 1 || rep.LastSeq != 5 || rep.LastHash != lineHash(lines[4]) {
		t.Errorf("report = %+v", rep)
	}
	if rep, err := VerifyDir(t.TempDir()); err != nil || !rep.OK || rep.Lines != 0 {
		t.Errorf("empty dir: %+v, %v", rep, err)
	}
	if _, err := Verify([]string{filepath.Join(dir, "missing.jsonl")}); err == nil {
		t.Error("Verify of a missing file succeeded")
	}
}

// A log file whose first line does not start the chain verifies alone (a
// later file given on its own) but its seq-1 line must have no prev_hash.
func TestVerifyChainStart(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 6, 1000)
	files := mustFiles(t, dir)
	rep, err := Verify(files[1:])
	if err != nil || !rep.OK || rep.FirstSeq != 4 {
		t.Errorf("later files alone: %+v, %v", rep, err)
	}
	first := files[0]
	tamper(t, first, func(ls [][]byte) []byte {
		ls[0] = bytes.Replace(ls[0], []byte(`"prev_hash":""`), []byte(`"prev_hash":"`+strings.Repeat("0", 64)+`"`), 1)
		return join(ls)
	})
	if rep, _ := Verify(files); rep.OK || rep.Line != 1 || !strings.Contains(rep.Problem, "seq 1") {
		t.Errorf("seq 1 with a prev_hash: %+v", rep)
	}
}

func FuzzVerify(f *testing.F) {
	dir := f.TempDir()
	writeLog(f, dir, 3, 0)
	b, err := os.ReadFile(mustFiles(f, dir)[0])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)-3])
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"seq":1,"prev_hash":""}` + "\n" + `{"seq":2,"prev_hash":"zz"}` + "\n"))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "audit-x.jsonl")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify([]string{path})
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK && rep.Lines != bytes.Count(data, []byte("\n")) {
			t.Fatalf("OK with %d lines, file has %d", rep.Lines, bytes.Count(data, []byte("\n")))
		}
		if !rep.OK && (rep.Problem == "" || rep.Line < 1) {
			t.Fatalf("failure without a location: %+v", rep)
		}
	})
}
