package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tailFilters: `audit tail --json` prints the trail's lines verbatim, and
// its filters select by event and session.
func (f *auditFixture) tailFilters(t *testing.T) {
	all, err := parseAuditLines([]byte(f.d.cli(t, "audit", "tail", "--json")))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < len(f.lines) {
		t.Fatalf("audit tail --json printed %d lines, the files held %d", len(all), len(f.lines))
	}
	for i := range f.lines {
		if !bytes.Equal(all[i].Raw, f.lines[i].Raw) {
			t.Fatalf("audit tail --json line %d differs from the file:\n%s\n%s", i+1, all[i].Raw, f.lines[i].Raw)
		}
	}
	for _, tc := range []struct {
		args []string
		ok   func(auditLine) bool
	}{
		{[]string{"--event", "store.installed"}, func(l auditLine) bool { return l.str("event") == "store.installed" }},
		{[]string{"--session", f.s.ID}, func(l auditLine) bool { return l.str("session") == f.s.ID }},
		{[]string{"--decision", "deny"}, func(l auditLine) bool { return l.str("decision") == "deny" }},
	} {
		got, err := parseAuditLines([]byte(f.d.cli(t, append([]string{"audit", "tail", "--json"}, tc.args...)...)))
		if err != nil {
			t.Fatal(err)
		}
		// The trail only grows (a revoked session's tunnels are cut a
		// moment after the delete): the filtered lines must hold every
		// matching line of the trail read before, and be the start of the
		// matching lines of the trail read after.
		after, err := parseAuditLines([]byte(f.d.cli(t, "audit", "tail", "--json")))
		if err != nil {
			t.Fatal(err)
		}
		before, upto := matching(all, tc.ok), matching(after, tc.ok)
		if len(got) < len(before) || len(got) > len(upto) || len(before) == 0 {
			t.Errorf("audit tail %v printed %d lines, want %d..%d (> 0)", tc.args, len(got), len(before), len(upto))
		}
		for i, l := range got {
			if !tc.ok(l) {
				t.Errorf("audit tail %v printed a line it should have filtered out: %s", tc.args, l.Raw)
			} else if i < len(upto) && !bytes.Equal(l.Raw, upto[i].Raw) {
				t.Errorf("audit tail %v line %d is not the trail's next matching line:\n%s\n%s", tc.args, i+1, l.Raw, upto[i].Raw)
			}
		}
	}
	if table := f.d.cli(t, "audit", "tail", "--event", "connector.proxy.rejected"); !strings.HasPrefix(table, "TIME") ||
		!strings.Contains(table, "no_matching_operation") {
		t.Errorf("audit tail (table) lacks its header or the denial:\n%s", table)
	}
}

// matching returns the lines ok accepts, in order.
func matching(lines []auditLine, ok func(auditLine) bool) []auditLine {
	var out []auditLine
	for _, l := range lines {
		if ok(l) {
			out = append(out, l)
		}
	}
	return out
}

// verify: the real log verifies; copies with an edited byte, a deleted
// line, swapped lines or a cut-out middle fail, naming the first bad line;
// a copy missing its LAST line still verifies (the documented limit).
func (f *auditFixture) verify(t *testing.T) {
	out := f.d.cli(t, "audit", "verify")
	m := regexp.MustCompile(`^ok: (\d+) lines, seq 1\.\.(\d+), last hash [0-9a-f]{64}\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("audit verify on the real log printed %q, want `ok: N lines, seq 1..N, last hash HEX`", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < len(f.lines) {
		t.Errorf("audit verify checked %d lines, the log holds at least %d", n, len(f.lines))
	}
	files := auditFiles(t, f.d)
	if len(files) != 1 {
		t.Fatalf("want one audit file (no rotation at the default size), got %v", files)
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty remainder after the last newline
	if len(lines) < 10 {
		t.Fatalf("the log holds %d lines; the tampering cases need at least 10", len(lines))
	}
	const k = 5 // 1-based line the damage starts at
	start := func(n int) int { return len(bytes.Join(lines[:n-1], nil)) }
	edited := bytes.Clone(raw)
	ev := bytes.Index(edited[start(k):], []byte(`"event":"`))
	edited[start(k)+ev+len(`"event":"`)] = 'X' // still valid JSON
	cases := []struct {
		name     string
		data     []byte
		wantLine int // 0: verifies
	}{
		{"edited_byte", edited, k},
		{"deleted_line", bytes.Join(append(cloneLines(lines[:k-1]), lines[k:]...), nil), k},
		{"swapped_lines", bytes.Join(append(append(cloneLines(lines[:k-1]), lines[k], lines[k-1]), lines[k+1:]...), nil), k},
		{"truncated_middle", append(bytes.Clone(raw[:start(k)+25]), raw[start(k+3)+25:]...), k},
		{"last_line_removed", bytes.Join(lines[:len(lines)-1], nil), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "audit-copy.jsonl")
			if err := os.WriteFile(cp, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, err := f.d.run(t.Context(), "audit", "verify", cp)
			if tc.wantLine == 0 {
				if err != nil || !strings.HasPrefix(stdout, fmt.Sprintf("ok: %d lines", len(lines)-1)) {
					t.Errorf("audit verify on a log missing its last line: %v\n%s%s\n(removing the END of a log is only detectable against a saved last seq/hash)", err, stdout, stderr)
				}
				return
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("audit verify on a damaged copy: err %v, want a non-zero exit\nstdout: %s\nstderr: %s", err, stdout, stderr)
			}
			if want := fmt.Sprintf(" at %s:%d (seq", cp, tc.wantLine); !strings.Contains(stderr, want) {
				t.Errorf("audit verify did not name line %d:\nstdout: %s\nstderr: %s\nwant it to contain %q", tc.wantLine, stdout, stderr, want)
			}
			t.Logf("%s: %s", tc.name, strings.TrimSpace(stderr))
		})
	}
}

func cloneLines(ls [][]byte) [][]byte { return append([][]byte(nil), ls...) }

// privacy: no needle (query, unnamed body member, dropped body member,
// hashed body member, header) and no credential byte appears in any audit
// file; declared fields are recorded as their redaction says.
func (f *auditFixture) privacy(t *testing.T) {
	u := f.s.proxyURL(t)
	token, _ := u.User.Password()
	forbidden := append([]string{needleQuery, needleQueryPost, needleBodyTo, needleBodyDrop, needleBodyOther, needleHeader,
		"needle-", "X-Needle", "x-needle", token}, f.secrets...)
	files := auditFiles(t, f.d)
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range forbidden {
			if i := bytes.Index(raw, []byte(n)); i >= 0 {
				ls := bytes.LastIndexByte(raw[:i], '\n') + 1
				le := bytes.IndexByte(raw[i:], '\n')
				t.Errorf("%s holds %q raw, in line: %s", file, n, raw[ls:i+max(le, 0)])
			}
		}
	}
	wantFields := map[string]map[string]any{
		"allowed":      {"query": sha256Field(needleQuery), "limit": "7"},
		"allowed_body": {"box": "inbox", "to": sha256Field(needleBodyTo), "subject": auditSubject, "attachment": true},
	}
	for req, want := range wantFields {
		var seen bool
		for _, l := range f.lines {
			if l.str("audit_id") != f.ids[req] || l.M["fields"] == nil {
				continue
			}
			seen = true
			if got := l.M["fields"]; !reflect.DeepEqual(got, any(want)) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Errorf("%s: fields %s, want %s (line %s)", req, gj, wj, l.Raw)
			}
		}
		if !seen {
			t.Errorf("no audit line of request %q (audit id %s) carries fields", req, f.ids[req])
		}
	}
	for _, l := range f.lines {
		if p := l.str("path"); strings.ContainsAny(p, "?#") {
			t.Errorf("an audit path holds a query or fragment: %s", l.Raw)
		}
	}
}
