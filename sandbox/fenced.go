package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/aileronhq/aileron/sessions"
)

// InitArg0 is the name the fenced launcher gives the helper process it
// starts (this same binary) in the new namespaces; main hands control to
// FencedInit when it sees it.
const InitArg0 = "aileron-sandbox-init"

// ErrFence wraps every failure to set up a fenced sandbox.
var ErrFence = errors.New("fenced sandbox")

// FenceFunc fences the network namespace of process pid and returns the
// resolver address the sandbox must use, and a function that removes the
// fence.
type FenceFunc func(ctx context.Context, pid int) (dns string, remove func(), err error)

// FencedOptions configure RunFenced. Fence and User are required.
type FencedOptions struct {
	Fence FenceFunc
	// User is who the command runs as (ResolveUser gives the default).
	User Identity
	// Hide lists paths the command must not see (the daemon's home and
	// admin socket): a directory is covered by an empty, read-only tmpfs,
	// a file by /dev/null.
	Hide           []string
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
