package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aileronhq/aileron/sessions"
)

// initPlan is what the launcher tells the helper once the fence is up.
type initPlan struct {
	Argv   []string `json:"argv"`
	Path   string   `json:"path"`
	Resolv string   `json:"resolv"` // file to bind over /etc/resolv.conf
}

// RunFenced runs argv in new network and mount namespaces whose only link
// leads to Aileron (opts.Fence), with the session's CA and no proxy
// variables, and returns its exit status. It needs root (or CAP_SYS_ADMIN
// to make the namespaces). The command runs without the capabilities that
// could undo the fence (see dropped).
func RunFenced(ctx context.Context, info sessions.Info, argv []string, opts FencedOptions) (int, error) {
	if len(argv) == 0 || argv[0] == "" {
		return -1, fmt.Errorf("%w: no command given; name one after --, e.g. aileron sandbox run -- curl https://api.example.com/", ErrLaunch)
	}
	if info.CABundlePath == "" {
		return -1, fmt.Errorf("%w: the session has no ca_bundle_path", ErrLaunch)
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	apiURL := opts.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	env := fencedEnv(environ, info, apiURL)
	path, err := lookPath(argv[0], envValue(env, "PATH"))
	if err != nil {
		return -1, err
	}
	self, err := os.Executable()
	if err != nil {
		return -1, fmt.Errorf("%w: finding this program: %v", ErrFence, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return -1, fmt.Errorf("%w: %v", ErrFence, err)
	}
	defer pw.Close()
	cmd := exec.Command(self)
	cmd.Args = []string{InitArg0}
	cmd.Env, cmd.Dir, cmd.ExtraFiles = env, opts.Dir, []*os.File{pr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = orStdin(opts.Stdin), orWriter(opts.Stdout, os.Stdout), orWriter(opts.Stderr, os.Stderr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS}
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		return -1, fmt.Errorf("%w: starting the sandbox's namespaces (this needs root): %v", ErrFence, err)
	}
	_ = pr.Close()
	dns, remove, err := opts.Fence(ctx, cmd.Process.Pid)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return -1, fmt.Errorf("%w: %w", ErrFence, err)
	}
	defer remove()
	resolv, err := writeResolv(dns)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return -1, err
	}
	defer os.Remove(resolv)
	if err := json.NewEncoder(pw).Encode(initPlan{Argv: argv, Path: path, Resolv: resolv}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return -1, fmt.Errorf("%w: %v", ErrFence, err)
	}
	_ = pw.Close()
	return wait(ctx, cmd, opts.Signals)
}

// writeResolv writes a resolv.conf naming only Aileron's DNS.
func writeResolv(dns string) (string, error) {
	f, err := os.CreateTemp("", "aileron-resolv-*.conf")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrFence, err)
	}
	_, err = fmt.Fprintf(f, "# written by aileron sandbox run: Aileron's policy DNS is the only resolver\nnameserver %s\noptions timeout:1 attempts:1\n", dns)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("%w: writing resolv.conf: %v", ErrFence, err)
	}
	return f.Name(), nil
}

// dropped are the capabilities the fenced command never has (bounding,
// effective, permitted, inheritable and ambient sets): with them it could
// rewrite its fence (NET_ADMIN), bypass it with raw frames (NET_RAW), or
// enter another namespace (SYS_ADMIN, and the rest that reach the kernel).
var dropped = []uintptr{unix.CAP_NET_ADMIN, unix.CAP_NET_RAW, unix.CAP_SYS_ADMIN, unix.CAP_SYS_MODULE,
	unix.CAP_SYS_PTRACE, unix.CAP_SYS_RAWIO, unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_SYS_BOOT, unix.CAP_MKNOD}

// FencedInit is the helper RunFenced starts: it waits for the fence, binds
// the resolv.conf, allows unprivileged ping sockets (so ICMP is refused by
// the fence, not by a missing capability), drops the capabilities in
// dropped, and becomes the command. It returns only on failure.
func FencedInit() error {
	plan, err := readPlan(os.NewFile(3, "plan"))
	if err != nil {
		return err
	}
	if err := unix.Mount(plan.Resolv, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("%w: binding %s over /etc/resolv.conf: %v", ErrFence, plan.Resolv, err)
	}
	_ = os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 2147483647"), 0o644)
	if err := dropCaps(); err != nil {
		return fmt.Errorf("%w: dropping capabilities: %v", ErrFence, err)
	}
	return syscall.Exec(plan.Path, plan.Argv, os.Environ())
}

func readPlan(f *os.File) (initPlan, error) {
	var plan initPlan
	_ = f.SetReadDeadline(time.Now().Add(time.Minute))
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	_ = f.Close()
	if err != nil || len(b) == 0 {
		return plan, fmt.Errorf("%w: the launcher gave no plan (was the fence refused?)", ErrFence)
	}
	if err := json.Unmarshal(b, &plan); err != nil || plan.Path == "" || len(plan.Argv) == 0 {
		return plan, fmt.Errorf("%w: bad plan from the launcher", ErrFence)
	}
	return plan, nil
}

func dropCaps() error {
	for _, c := range dropped {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && err != unix.EINVAL {
			return err
		}
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for _, c := range dropped {
		bit := uint32(1) << (c % 32)
		d := &data[c/32]
		d.Effective &^= bit
		d.Permitted &^= bit
		d.Inheritable &^= bit
	}
	return unix.Capset(&hdr, &data[0])
}
