package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// buildVersion is what the binary knows of its own build: the module
// version (a tag, a pseudo-version, or "(devel)" for a local build), the
// commit and its time, whether the tree had uncommitted changes, and the Go
// release that built it.
type buildVersion struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

// readVersion reads the build info Go embeds in every binary.
func readVersion() buildVersion {
	v := buildVersion{Version: "(devel)"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Go = info.GoVersion
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the one-line form: the version, then the commit unless the
// version (a pseudo-version) already names it ("(devel) 1a2b3c4d5e6f+dirty").
func (v buildVersion) String() string {
	s := v.Version
	if short := v.Commit[:min(12, len(v.Commit))]; short != "" && !strings.Contains(s, short) {
		s += " " + short
		if v.Modified {
			s += "+dirty"
		}
	}
	return s
}

const versionSynopsis = "version [--json]"

func cmdVersion(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("version", versionSynopsis, stderr)
	asJSON := fs.Bool("json", false, "print the build facts as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("want no arguments, got %q", strings.Join(fs.Args(), " "))
	}
	v := readVersion()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	fmt.Fprintf(stdout, "aileron %s", v)
	if v.Time != "" {
		fmt.Fprintf(stdout, " (committed %s)", v.Time)
	}
	fmt.Fprintf(stdout, ", built with %s\n", v.Go)
	return nil
}

// unknownSubcommand is the usage error for a subcommand of group that
// does not exist, with a "did you mean" when one is close.
func unknownSubcommand(group, sub string) error {
	subs := subcommands(group)
	msg := fmt.Sprintf("unknown subcommand %q", sub)
	if near, ok := policy.Closest(sub, subs); ok {
		msg += fmt.Sprintf(": did you mean \"aileron %s %s\"?", group, near)
	}
	return usagef("%s (want %s; see aileron %s --help)", msg, orList(subs), group)
}

// subcommands lists a command group's subcommands; nil for a command
// without any.
func subcommands(group string) []string {
	switch group {
	case "session":
		return []string{"create", "env", "list", "delete", "render"}
	case "connector":
		return []string{"install", "list", "verify", "remove", "approve", "lock", "statement"}
	case "trust":
		return []string{"add", "list", "remove"}
	case "credential":
		return []string{"set", "login", "list", "delete", "bind", "unbind"}
	case "provider":
		return []string{"add", "list", "remove"}
	case "approvals":
		return []string{"list", "show", "approve", "deny", "watch", "web-token", "test-webhooks"}
	case "proposals":
		return []string{"list", "show", "accept", "reject"}
	case "actions":
		return []string{"cancel"}
	case "audit":
		return []string{"tail", "verify", "key", "prove", "check-proof", "new-trail", "export"}
	case "config":
		return []string{"print", "defaults"}
	case "sandbox":
		return []string{"run", "attach", "list", "close"}
	case "fleet":
		return []string{"status"}
	}
	return nil
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
