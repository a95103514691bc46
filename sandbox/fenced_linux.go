package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/aileronhq/aileron/sessions"
)

// initPlan is what the launcher tells the helper once the fence is up.
type initPlan struct {
	Argv []string `json:"argv"`
	Path string   `json:"path"`
	Dir  string   `json:"dir"`
	DNS  string   `json:"dns"` // the only nameserver in the sandbox's resolv.conf
	CA   []byte   `json:"ca"`  // the session's CA bundle, copied to sandboxCA
	User Identity `json:"user"`
	Hide []string `json:"hide,omitempty"`
}

// RunFenced runs argv in new network, mount and PID namespaces whose only
// link leads to Aileron (opts.Fence), as opts.User, with the session's CA
// and no proxy variables, and returns its exit status. It needs root (or
// CAP_SYS_ADMIN and CAP_NET_ADMIN to make the namespaces). See FencedInit
// for what the command can and cannot do.
func RunFenced(ctx context.Context, info sessions.Info, argv []string, opts FencedOptions) (int, error) {
	plan, env, err := fencedPlan(info, argv, opts)
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
	cmd.Env, cmd.Dir, cmd.ExtraFiles = env, "/", []*os.File{pr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = orStdin(opts.Stdin), orWriter(opts.Stdout, os.Stdout), orWriter(opts.Stderr, os.Stderr)
	// Go makes the new mount namespace's mounts private when it unshares
	// it (Unshareflags), so nothing mounted inside reaches the host; the
	// helper is the first process (pid 1) of the new PID namespace, so
	// every process the command leaves behind dies with it.
	// IPC, UTS and cgroup namespaces of its own too: no System V or POSIX
	// IPC object of the host is reachable from inside.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
		Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		return -1, fmt.Errorf("%w: starting the sandbox's namespaces (this needs root): %v", ErrFence, err)
	}
	_ = pr.Close()
	abort := func(err error) (int, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return -1, fmt.Errorf("%w: %w", ErrFence, err)
	}
	f, err := opts.Fence(ctx, cmd.Process.Pid)
	if err != nil {
		return abort(err)
	}
	if f.Remove != nil {
		defer f.Remove()
	}
	if err := checkHide(f.Hide); err != nil {
		return abort(err)
	}
	plan.DNS, plan.Hide = f.DNS, f.Hide
	if err := json.NewEncoder(pw).Encode(plan); err != nil {
		return abort(err)
	}
	// The pipe stays open while the command runs: signals for it go this
	// way (the helper drops those sent to it directly, which come from the
	// terminal the command shares), and its closing tells the helper that
	// the launcher is gone.
	relay := func(sig os.Signal) {
		if s, ok := sig.(syscall.Signal); ok && s > 0 && s < 256 {
			_, _ = pw.Write([]byte{byte(s)})
		}
	}
	return wait(ctx, cmd, opts.Signals, relay)
}

// fencedPlan checks RunFenced's arguments and gives the helper's plan (all
// but DNS and Hide, which the fence gives) and the command's environment.
func fencedPlan(info sessions.Info, argv []string, opts FencedOptions) (initPlan, []string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return initPlan{}, nil, fmt.Errorf("%w: no command given; name one after --, e.g. aileron sandbox run -- curl https://api.example.com/", ErrLaunch)
	}
	if opts.Fence == nil {
		return initPlan{}, nil, fmt.Errorf("%w: no fence given", ErrFence)
	}
	if info.CABundlePath == "" {
		return initPlan{}, nil, fmt.Errorf("%w: the session has no ca_bundle_path", ErrLaunch)
	}
	ca, err := os.ReadFile(info.CABundlePath)
	if err != nil {
		return initPlan{}, nil, fmt.Errorf("%w: reading the session's CA bundle: %v", ErrLaunch, err)
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	apiURL := opts.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	inside := info
	inside.CABundlePath = sandboxCA
	env := identityEnv(fencedEnv(environ, inside, apiURL), opts.User)
	path, err := lookPath(argv[0], envValue(env, "PATH"))
	if err != nil {
		return initPlan{}, nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return initPlan{}, nil, fmt.Errorf("%w: finding the working directory: %v", ErrLaunch, err)
		}
	}
	return initPlan{Argv: argv, Path: path, Dir: dir, CA: ca, User: opts.User}, env, nil
}
