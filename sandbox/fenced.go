package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aileronhq/aileron/sessions"
)

// InitArg0 is the name the fenced launcher gives the helper process it
// starts (this same binary) in the new namespaces; main hands control to
// FencedInit when it sees it.
const InitArg0 = "aileron-sandbox-init"

// ErrFence wraps every failure to set up a fenced sandbox.
var ErrFence = errors.New("fenced sandbox")

// Fence is a process's fenced network namespace, as FenceFunc set it up.
type Fence struct {
	// DNS is the resolver address the sandbox must use.
	DNS string
	// Hide lists the paths the command must not see, as the daemon that
	// fenced it names them (its home, admin socket, audit directory, key
	// files): a directory is covered by an empty, read-only tmpfs, a file
	// by /dev/null. RunFenced refuses a fence that names none, or a path
	// that is not absolute.
	Hide []string
	// Remove removes the fence; nil when there is nothing to remove.
	Remove func()
}

// FenceFunc fences the network namespace of process pid.
type FenceFunc func(ctx context.Context, pid int) (Fence, error)

// FencedOptions configure RunFenced. Fence and User are required.
type FencedOptions struct {
	Fence FenceFunc
	// User is who the command runs as (ResolveUser gives the default).
	User           Identity
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Environ        []string // nil: os.Environ()
	APIURL         string   // "": DefaultAPIURL
	Signals        <-chan os.Signal
	Dir            string // "": this process's working directory
}

// Inside the sandbox a private tmpfs covers /run (hiding the host's
// sockets: D-Bus, systemd, container engines); the session's CA is copied
// into it, readable by any user, at sandboxCA.
const (
	sandboxRun = "/run/aileron"
	sandboxCA  = sandboxRun + "/ca-bundle.pem"
)

// checkHide refuses a fence that names nothing to hide, or a path that is
// not absolute: the launcher never guesses what the daemon keeps where.
func checkHide(hide []string) error {
	if len(hide) == 0 {
		return errors.New("the daemon did not say which of its paths (home, audit directory, keys) the command must not see; run a daemon of this version (aileron version shows it)")
	}
	for _, p := range hide {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("the daemon named %q to hide from the command, which is not an absolute path", p)
		}
	}
	return nil
}

// fencedEnv is env for a fenced command: the session's variables without
// any proxy variable (there is no proxy to name: every connection is taken
// transparently), and no inherited one either.
func fencedEnv(environ []string, info sessions.Info, apiURL string) []string {
	proxyVars := map[string]bool{"HTTPS_PROXY": true, "HTTP_PROXY": true, "https_proxy": true, "http_proxy": true,
		"NO_PROXY": true, "no_proxy": true, "ALL_PROXY": true, "all_proxy": true, "NODE_USE_ENV_PROXY": true}
	var vars []EnvVar
	for _, v := range Env(info, apiURL) {
		if !proxyVars[v.Name] {
			vars = append(vars, v)
		}
	}
	var base []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !proxyVars[name] {
			base = append(base, kv)
		}
	}
	return MergeEnv(base, vars)
}
