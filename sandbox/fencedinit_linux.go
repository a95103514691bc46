package sandbox

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rootKeeps are the only capabilities a command run as root keeps (the set
// container engines give by default): none of them reaches the network
// configuration, raw sockets, other namespaces, kernel memory or
// file handles outside the mount namespace. A command run as any other
// user has none, and can gain none (no_new_privs, empty bounding set).
var rootKeeps = map[uintptr]bool{unix.CAP_CHOWN: true, unix.CAP_DAC_OVERRIDE: true, unix.CAP_FOWNER: true,
	unix.CAP_FSETID: true, unix.CAP_KILL: true, unix.CAP_SETGID: true, unix.CAP_SETUID: true, unix.CAP_SETPCAP: true,
	unix.CAP_NET_BIND_SERVICE: true, unix.CAP_SYS_CHROOT: true, unix.CAP_AUDIT_WRITE: true, unix.CAP_SETFCAP: true}

// readOnlyProc are the parts of the fresh /proc a command may read but
// never write: kernel tunables (core_pattern runs a program outside the
// fence), sysrq and the rest.
var readOnlyProc = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/bus", "/proc/fs", "/proc/irq"}

// FencedInit is the helper RunFenced starts as the first process of the
// sandbox's PID namespace. Once the launcher sends the plan (after the
// fence is up) it:
//   - mounts a fresh /proc showing only the sandbox's processes, with
//     /proc/sys and the other kernel knobs read-only, a fresh read-only
//     /sys (no cgroup files, only the sandbox's own interfaces) and a
//     minimal /dev;
//   - covers /run with a private tmpfs (no host sockets: D-Bus, systemd,
//     container engines), copies the session CA into it and makes
//     Aileron's DNS the only resolver;
//   - hides each path in plan.Hide (those the daemon named: its home,
//     admin socket, audit directory and key files): a directory under an
//     empty read-only tmpfs, a file under /dev/null;
//   - starts the command as plan.User, in a session of its own (no
//     controlling terminal), with no_new_privs and the capabilities in
//     rootKeeps at most (none unless the user is root), and makes itself
//     undumpable so even a root command cannot ptrace it;
//   - relays the launcher's signals, reaps orphans, and returns the
//     command's exit status. When it exits the kernel kills whatever the
//     command left running in the namespace.
//
// It returns an error only when the sandbox could not be set up.
func FencedInit() (int, error) {
	runtime.LockOSThread() // no_new_privs and capabilities are per thread; the command is started from this one
	// Nothing this process inherited (the plan pipe included) reaches the
	// command.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return -1, fmt.Errorf("%w: marking inherited descriptors close-on-exec: %v", ErrFence, err)
	}
	if err := unix.SetNonblock(3, true); err != nil {
		return -1, fmt.Errorf("%w: the launcher's pipe: %v", ErrFence, err)
	}
	pipe := os.NewFile(3, "plan")
	ctl := bufio.NewReader(pipe)
	_ = pipe.SetReadDeadline(time.Now().Add(time.Minute))
	plan, err := readPlan(ctl)
	if err != nil {
		return -1, err
	}
	if err := fenceMounts(plan); err != nil {
		return -1, err
	}
	if err := restrict(plan.User); err != nil {
		return -1, fmt.Errorf("%w: dropping privileges: %v", ErrFence, err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs) // every signal: none may end the helper (a root command could send it SIGABRT)
	cmd := exec.Command(plan.Path)
	cmd.Args, cmd.Env, cmd.Dir = plan.Argv, os.Environ(), plan.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	u := plan.User
	// Its own session: no controlling terminal, so it cannot push input into
	// the launcher's (TIOCSTI); the launcher relays the terminal's signals.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}}
	// Not dumpable: a command run as root cannot ptrace this process or
	// open its /proc files (its other threads keep full capabilities).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return -1, fmt.Errorf("%w: %v", ErrFence, err)
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("%w: starting %s as %s in %s: %v (the user must be able to enter the directory and run the program; cd to one it can read, or pass --user)",
			ErrLaunch, plan.Path, u, plan.Dir, err)
	}
	go func() { // signals sent to this process come from the terminal or from outside; the launcher relays what the command should get
		for range sigs {
		}
	}()
	_ = pipe.SetReadDeadline(time.Time{})
	go relaySignals(ctl, cmd.Process.Pid)
	return reap(cmd.Process.Pid), nil
}

// readPlan reads the launcher's plan: one JSON line, within the deadline
// FencedInit sets.
func readPlan(r *bufio.Reader) (initPlan, error) {
	var plan initPlan
	line, err := r.ReadBytes('\n')
	if err != nil || len(line) == 0 {
		return plan, fmt.Errorf("%w: the launcher gave no plan (was the fence refused?)", ErrFence)
	}
	if err := json.Unmarshal(line, &plan); err != nil || plan.Path == "" || len(plan.Argv) == 0 || plan.DNS == "" {
		return plan, fmt.Errorf("%w: bad plan from the launcher", ErrFence)
	}
	return plan, nil
}

// relaySignals sends pid each signal number the launcher writes after the
// plan; when the launcher goes away it kills pid.
func relaySignals(r io.Reader, pid int) {
	b := make([]byte, 1)
	for {
		if _, err := r.Read(b); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		_ = syscall.Kill(pid, syscall.Signal(b[0]))
	}
}

// reap waits for every child (orphans are reparented here) until pid
// exits, and returns its status: its exit code, 128+N when signal N ended
// it.
func reap(pid int) int {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return -1
		case got != pid:
			continue
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// fenceMounts makes the sandbox's view of the filesystem (FencedInit).
func fenceMounts(plan initPlan) error {
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("%w: mounting /proc: %v", ErrFence, err)
	}
	// Unprivileged ping sockets, so ICMP is refused by the fence (and
	// audited), not by a missing capability.
	_ = os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 2147483647"), 0o644)
	for _, p := range readOnlyProc {
		if err := bindReadOnly(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("%w: making %s read-only: %v", ErrFence, p, err)
		}
	}
	if err := maskProc(); err != nil {
		return err
	}
	if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("%w: mounting a read-only /sys: %v", ErrFence, err)
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,size=16m"); err != nil {
		return fmt.Errorf("%w: mounting a tmpfs on /run: %v", ErrFence, err)
	}
	if err := minimalDev(); err != nil {
		return err
	}
	for _, p := range plan.Hide {
		st, err := os.Stat(p)
		switch {
		case err != nil: // gone, or under something hidden already
		case st.IsDir():
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0,size=4k")
		default:
			err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
		}
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("%w: hiding %s: %v", ErrFence, p, err)
		}
	}
	if err := os.MkdirAll(sandboxRun, 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrFence, err)
	}
	if err := os.WriteFile(sandboxCA, plan.CA, 0o644); err != nil {
		return fmt.Errorf("%w: copying the session CA: %v", ErrFence, err)
	}
	resolv := fmt.Sprintf("# written by aileron sandbox run: Aileron's policy DNS is the only resolver\nnameserver %s\noptions timeout:1 attempts:1\n", plan.DNS)
	return installResolv([]byte(resolv))
}

// minimalDev replaces /dev with a tmpfs holding only the harmless devices
// (bound from the host's), a private devpts, shm and the fd links: no
// /dev/kmsg, disks or other hardware. It is built under /run (already the
// sandbox's own tmpfs), then moved over /dev.
func minimalDev() error {
	const stage = "/run/.dev"
	fail := func(err error) error { return fmt.Errorf("%w: building /dev: %v", ErrFence, err) }
	if err := os.Mkdir(stage, 0o755); err != nil {
		return fail(err)
	}
	if err := unix.Mount("tmpfs", stage, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
		return fail(err)
	}
	for _, name := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		f, err := os.Create(stage + "/" + name)
		if err == nil {
			_ = f.Close()
			err = unix.Mount("/dev/"+name, stage+"/"+name, "", unix.MS_BIND, "")
		}
		if err != nil {
			return fail(err)
		}
	}
	for _, d := range []string{"pts", "shm"} {
		if err := os.Mkdir(stage+"/"+d, 0o755); err != nil {
			return fail(err)
		}
	}
	if err := unix.Mount("devpts", stage+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fail(err)
	}
	if err := unix.Mount("tmpfs", stage+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
		return fail(err)
	}
	for link, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd",
		"stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, stage+"/"+link); err != nil {
			return fail(err)
		}
	}
	if err := unix.Mount(stage, "/dev", "", unix.MS_MOVE, ""); err != nil {
		return fail(err)
	}
	return os.Remove(stage)
}

// maskedProc are the parts of /proc container engines hide: kernel key
// rings, timers and scheduler state of the whole machine, and hardware
// knobs a root command could write.
var maskedProc = []string{"/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/kcore", "/proc/latency_stats",
	"/proc/timer_stats", "/proc/acpi", "/proc/scsi", "/proc/asound"}

// maskProc covers each of maskedProc that exists: a file with /dev/null, a
// directory with an empty read-only tmpfs.
func maskProc() error {
	for _, p := range maskedProc {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			continue
		case st.IsDir():
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0")
		default:
			err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("%w: masking %s: %v", ErrFence, p, err)
		}
	}
	return nil
}

func bindReadOnly(p string) error {
	if _, err := os.Lstat(p); err != nil {
		return err
	}
	if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// installResolv makes content the sandbox's /etc/resolv.conf. When that is
// a symbolic link into /run (systemd-resolved's stub file), the file is
// written at the link's target in the sandbox's own /run; otherwise it is
// bind-mounted over the file, in the sandbox's mount namespace only.
func installResolv(content []byte) error {
	src := filepath.Join(sandboxRun, "resolv.conf")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		return fmt.Errorf("%w: writing resolv.conf: %v", ErrFence, err)
	}
	target := "/etc/resolv.conf"
	for range 8 {
		link, err := os.Readlink(target)
		if err != nil {
			break
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(target), link)
		}
		target = filepath.Clean(link)
	}
	if _, err := os.Stat(target); err != nil {
		if !strings.HasPrefix(target, "/run/") {
			return fmt.Errorf("%w: /etc/resolv.conf leads to %s, which does not exist; create it (any content) so the sandbox's resolver can be bound over it", ErrFence, target)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("%w: %v", ErrFence, err)
		}
		return os.WriteFile(target, content, 0o644)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("%w: binding the sandbox's resolv.conf over %s: %v", ErrFence, target, err)
	}
	return nil
}

// restrict sets no_new_privs and the bounding set on this thread (the one
// that starts the command) and, for root, drops the capabilities outside
// rootKeeps from every set. For any other user, the kernel clears the
// command's capabilities when it changes uid, and the empty bounding set
// and no_new_privs keep set-uid and file-capability programs from giving
// any back.
func restrict(u Identity) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	root := u.UID == 0
	for c := uintptr(0); c <= 63; c++ {
		if root && rootKeeps[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && err != unix.EINVAL {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return err
	}
	if !root {
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for c := range rootKeeps {
		data[c/32].Effective |= 1 << (c % 32)
	}
	for i := range data {
		data[i].Permitted, data[i].Inheritable = data[i].Effective, 0
	}
	return unix.Capset(&hdr, &data[0])
}
