package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/printable"
)

// auditExport writes the trail for the tools admins already run: plain
// JSON lines (the lines as recorded) or OCSF events, one per line, from a
// seq or a time on, following new lines with -f.
func auditExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit export", "audit export [--format json|ocsf] [--from SEQ] [--since DUR|RFC3339] [--dir DIR]... [-f]", stderr)
	_, cfgFile := clientFlags(fs)
	dirs := fs.StringArray("dir", nil, "export the trail in this directory instead of audit.dir; repeat it for several nodes' trails, merged by time")
	format := fs.String("format", "json", "json: the audit lines as recorded; ocsf: OCSF "+audit.OCSFVersion+" events (docs/audit.md has the mapping)")
	from := fs.Uint64("from", 0, "start at this seq")
	since := fs.String("since", "", "start at this time: a duration ago (15m) or an RFC 3339 time")
	follow := fs.BoolP("follow", "f", false, "keep writing new lines, across rotation")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("want no arguments")
	}
	if *format != "json" && *format != "ocsf" {
		return usagef("--format %q: want json or ocsf", *format)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	f := audit.Filter{FromSeq: *from}
	trails, ctx, stop, err := trailToRead(fs, *cfgFile, *since, *dirs, &f)
	if err != nil {
		return err
	}
	defer stop()
	if *from != 0 && len(trails) > 1 {
		return usagef("--from is a seq of one trail; with several --dir, start with --since")
	}
	tty := isTerminal(stdout)
	err = tailMany(ctx, trails, *follow, f, func(line []byte, ev *audit.Event) error {
		if *format == "ocsf" { // re-encoded: a character a terminal would act on as its \u escape
			buf.Reset()
			if err := enc.Encode(audit.OCSF(ev)); err != nil {
				return err
			}
			_, err := stdout.Write(printable.JSON(buf.Bytes()))
			return err
		}
		if tty { // to read: hidden characters as their \u escapes (a file or pipe gets the lines as recorded)
			line = printable.JSON(line)
		}
		_, err := fmt.Fprintf(stdout, "%s\n", line)
		return err
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
