package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: what is written to tty is read from
// ptm, as a terminal would show it.
func openPTY(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptm, tty
}

// onTerminal runs the CLI with args, its standard output a terminal, on a
// home holding an old trail with hostile lines; it returns the exit code,
// what the terminal showed (without the \r a terminal adds) and stderr.
func onTerminal(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	home := t.TempDir()
	writeOldTrail(t, home, 4)
	ptm, tty := openPTY(t)
	seen := make(chan []byte)
	go func() {
		var b bytes.Buffer
		io.Copy(&b, ptm) // until the terminal's last holder closes it (EIO)
		seen <- b.Bytes()
	}()
	t.Setenv("AILERON_HOME", home)
	var errb bytes.Buffer
	code := run(args, strings.NewReader(""), tty, &errb)
	tty.Close()
	return code, strings.ReplaceAll(string(<-seen), "\r", ""), errb.String()
}

// TestAuditProveOnATerminalShowsTheLineEscaped: `audit prove` writes a
// proof's exact bytes to a file (TestAuditCommandsShowSandboxBytesEscaped
// checks them), and on a terminal shows the line escaped.
func TestAuditProveOnATerminalShowsTheLineEscaped(t *testing.T) {
	code, shown, errs := onTerminal(t, "audit", "prove", "2")
	if code != 0 || !strings.Contains(shown, "line {") {
		t.Fatalf("audit prove 2 on a terminal = %d %q %s", code, shown, errs)
	}
	if r := shownRaw(shown); r != "" || !strings.Contains(shown, `\u202eevil`) {
		t.Errorf("audit prove on a terminal shows %s as itself, or no escape:\n%q", r, shown)
	}
}

// TestAuditExportOnATerminalShowsLinesEscaped: `audit export` writes the
// lines as recorded to a file or pipe, and on a terminal writes what a
// terminal would act on as its JSON escape (a trail of an older daemon,
// or anything else that reached the file, may hold it raw).
func TestAuditExportOnATerminalShowsLinesEscaped(t *testing.T) {
	code, shown, errs := onTerminal(t, "audit", "export")
	if code != 0 || !strings.Contains(shown, `"seq":2`) {
		t.Fatalf("audit export on a terminal = %d %q %s", code, shown, errs)
	}
	if r := shownRaw(shown); r != "" || !strings.Contains(shown, `\u202eevil`) {
		t.Errorf("audit export on a terminal shows %s as itself, or no escape:\n%q", r, shown)
	}
}
