package sandbox

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aileronhq/aileron/sessions"
)

// DefaultAPIURL is the sandbox API as seen from inside a session: a reserved
// host the proxy answers itself.
const DefaultAPIURL = "https://aileron.internal/v1"

// ErrLaunch is wrapped by every Launch error.
var ErrLaunch = errors.New("cannot launch the sandboxed command")

// ErrCommandNotFound is wrapped (with ErrLaunch) when the command to launch
// is not found.
var ErrCommandNotFound = errors.New("command not found")

// LaunchOptions tune Launch. The zero value launches with this process's
// environment and stdio.
type LaunchOptions struct {
	// APIURL becomes AILERON_API_URL; "" means DefaultAPIURL.
	APIURL string
	// Environ is the environment the session's variables are put on top of;
	// nil means os.Environ().
	Environ []string
	// PathPrefix are directories put in front of PATH, e.g. the bin
	// directory of a rendered tools directory (see WriteDir).
	PathPrefix []string
	// Dir is the command's working directory; "" means the current one.
	Dir string
	// Stdin, Stdout and Stderr default to this process's.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TempDir holds the CA bundle file while the command runs; "" means
	// os.TempDir().
	TempDir string
	// Signals, when not nil, replaces the signals this process receives:
	// each one read from it is sent to the command. When nil, Launch relays
	// SIGINT, SIGTERM, SIGHUP and SIGQUIT; SIGINT and SIGQUIT are not relayed
	// while this process is in its terminal's foreground process group, since
	// the terminal sent them to the command too (Ctrl-C must not arrive
	// twice).
	Signals <-chan os.Signal
	// GracePeriod is how long the command has to exit after ctx is done and
	// it got SIGTERM, before it is killed; 0 means 10s.
	GracePeriod time.Duration
}

// Launch runs argv with the session's environment (Env on top of the
// caller's environment, see MergeEnv) and stdio attached, and returns its
// exit status (128+N when signal N ended it). caPEM, the session CA bundle
// (the session CA followed by the system roots), is written to a 0600
// temporary file that SSL_CERT_FILE and its kin name and that is removed
// when the command ends; when caPEM is empty, info.CABundlePath is used as it
// is. Signals are relayed (see LaunchOptions.Signals); when ctx is done the
// command gets SIGTERM, then SIGKILL after the grace period, and Launch
// returns ctx's error. Every error wraps ErrLaunch; an empty argv or a
// command not found in PATH are reported before anything runs (the latter
// also wraps ErrCommandNotFound). The exit status is -1 when the command did
// not run.
func Launch(ctx context.Context, info sessions.Info, caPEM []byte, argv []string, opts LaunchOptions) (int, error) {
	if len(argv) == 0 || argv[0] == "" {
		return -1, fmt.Errorf("%w: no command given; name one after --, e.g. aileron launch -- claude", ErrLaunch)
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	if len(caPEM) > 0 {
		path, err := writeCABundle(opts.TempDir, caPEM)
		if err != nil {
			return -1, err
		}
		defer os.Remove(path)
		info.CABundlePath = path
	} else if info.CABundlePath == "" {
		return -1, fmt.Errorf("%w: no CA bundle: the session has no ca_bundle_path and none was given", ErrLaunch)
	}
	apiURL := opts.APIURL
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	env := MergeEnv(environ, Env(info, apiURL))
	if len(opts.PathPrefix) > 0 {
		env = prependPath(env, opts.PathPrefix)
	}
	path, err := lookPath(argv[0], envValue(env, "PATH"))
	if err != nil {
		return -1, err
	}
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env, cmd.Dir = env, opts.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = orStdin(opts.Stdin), orWriter(opts.Stdout, os.Stdout), orWriter(opts.Stderr, os.Stderr)
	cmd.Cancel = func() error { return cmd.Process.Signal(terminateSignal()) }
	cmd.WaitDelay = opts.GracePeriod
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 10 * time.Second
	}
	return run(ctx, cmd, opts.Signals)
}

// run starts cmd, relays signals to it until it exits and returns its exit
// status.
func run(ctx context.Context, cmd *exec.Cmd, signals <-chan os.Signal) (int, error) {
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("%w: starting %s: %w", ErrLaunch, cmd.Path, err)
	}
	return wait(ctx, cmd, signals, nil)
}

// wait relays signals to the started cmd until it exits and returns its
// exit status. relay sends a signal on; nil means to cmd's process, unless
// the terminal sent it to the command as well.
func wait(ctx context.Context, cmd *exec.Cmd, signals <-chan os.Signal, relay func(os.Signal)) (int, error) {
	fromOS := signals == nil
	if fromOS {
		ch, stop := notifySignals()
		defer stop()
		signals = ch
	}
	if relay == nil {
		relay = func(sig os.Signal) {
			if !fromOS || !terminalSent(sig) { // the command shares the terminal: it has those already
				_ = cmd.Process.Signal(sig) // the command may have exited already
			}
		}
	}
	done := make(chan struct{})
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		for {
			select {
			case sig := <-signals:
				relay(sig)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	<-relayed
	code := exitCode(cmd.ProcessState)
	if ctx.Err() != nil {
		return code, fmt.Errorf("%w: %s stopped: %w", ErrLaunch, cmd.Args[0], ctx.Err())
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return code, fmt.Errorf("%w: %s: %w", ErrLaunch, cmd.Args[0], err)
	}
	return code, nil
}

// writeCABundle writes caPEM to a new 0600 file in dir and returns its path.
func writeCABundle(dir string, caPEM []byte) (string, error) {
	if block, _ := pem.Decode(caPEM); block == nil || block.Type != "CERTIFICATE" {
		return "", fmt.Errorf("%w: the CA bundle is not PEM starting with a CERTIFICATE block", ErrLaunch)
	}
	f, err := os.CreateTemp(dir, "aileron-ca-*.pem") // mode 0600
	if err != nil {
		return "", fmt.Errorf("%w: writing the CA bundle: %w", ErrLaunch, err)
	}
	_, err = f.Write(caPEM)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("%w: writing the CA bundle %s: %w", ErrLaunch, f.Name(), err)
	}
	return f.Name(), nil
}

// sessionOwned are variables the session decides even when Env does not set
// them: an inherited value would send traffic around the proxy or point at
// another session.
func sessionOwned() []string {
	return []string{"ALL_PROXY", "all_proxy", "AILERON_API_URL", "AILERON_SESSION_ID"}
}

// MergeEnv returns base ("NAME=value" entries, as os.Environ gives) with
// vars on top: every base entry whose name vars sets, or that the session
// owns (ALL_PROXY, all_proxy, AILERON_API_URL, AILERON_SESSION_ID), is
// dropped, then vars are appended in order. Names compare exactly (the
// upper- and lower-case proxy variables are distinct, and Env sets both).
func MergeEnv(base []string, vars []EnvVar) []string {
	drop := make(map[string]bool, len(vars)+4)
	for _, name := range sessionOwned() {
		drop[name] = true
	}
	for _, v := range vars {
		drop[v.Name] = true
	}
	out := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			out = append(out, kv)
		}
	}
	for _, v := range vars {
		out = append(out, v.Name+"="+v.Value)
	}
	return out
}

// prependPath puts dirs in front of env's PATH (the last PATH entry wins).
func prependPath(env []string, dirs []string) []string {
	path := strings.Join(dirs, string(os.PathListSeparator))
	if old := envValue(env, "PATH"); old != "" {
		path += string(os.PathListSeparator) + old
	}
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+path)
}

// envValue is the value of the last name= entry in env.
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds name in the PATH list path, as a shell would, skipping
// relative PATH entries (a command is never taken from the working directory
// by accident). A name with a slash is used as given.
func lookPath(name, path string) (string, error) {
	if strings.ContainsRune(name, '/') {
		if err := executable(name); err != nil {
			return "", fmt.Errorf("%w: %w: %s: %w", ErrLaunch, ErrCommandNotFound, name, err)
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		if p := filepath.Join(dir, name); executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %w: %q is not in PATH (%s); install it or give its full path", ErrLaunch, ErrCommandNotFound, name, path)
}

// executable reports why path is not an executable regular file, or nil.
func executable(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case st.IsDir():
		return errors.New("is a directory")
	case st.Mode().Perm()&0o111 == 0:
		return errors.New("is not executable")
	}
	return nil
}

func orStdin(r io.Reader) io.Reader {
	if r == nil {
		return os.Stdin
	}
	return r
}

func orWriter(w, def io.Writer) io.Writer {
	if w == nil {
		return def
	}
	return w
}
