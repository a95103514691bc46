//go:build unix

package audit

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
)

// fsizeChildEnv makes the test binary run fsizeChild (RLIMIT_FSIZE and the
// SIGXFSZ disposition are process-wide, so they are changed in a child).
const fsizeChildEnv = "AILERON_AUDIT_FSIZE_CHILD_DIR"

// TestFileSizeLimit hits a real EFBIG (RLIMIT_FSIZE), which fails even for
// root: Write must fail closed without advancing the chain, leave no torn
// bytes, and recover once the limit is lifted.
func TestFileSizeLimit(t *testing.T) {
	if dir := os.Getenv(fsizeChildEnv); dir != "" {
		fsizeChild(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFileSizeLimit$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fsizeChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	mustVerifyOK(t, dir, 4)
	if files := mustFiles(t, dir); len(files) != 1 {
		t.Errorf("files = %v, want the one file, its torn append truncated away", files)
	}
}

func fsizeChild(t *testing.T, dir string) {
	signal.Ignore(syscall.SIGXFSZ)
	l := openLog(t, dir, 0)
	for i := 1; i <= 3; i++ {
		if err := l.Write(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	name := l.Stats().File
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := syscall.Rlimit{Cur: uint64(st.Size()) + 10, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	for try := 0; try < 2; try++ {
		err := l.Write(testEvent(4))
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.EFBIG) {
			t.Fatalf("Write over RLIMIT_FSIZE = %v, want ErrUnavailable wrapping EFBIG", err)
		}
		if s := l.Stats(); s.Seq != 3 {
			t.Fatalf("seq advanced to %d on a failed write", s.Seq)
		}
		if now, err := os.Stat(name); err != nil || now.Size() != st.Size() {
			t.Fatalf("file is %v bytes (err %v), want the torn append removed (%d)", now.Size(), err, st.Size())
		}
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(testEvent(4)); err != nil {
		t.Fatalf("Write after lifting the limit: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
