package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/pkgsource"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/store"
)

// connectorInstallFrom installs what arg names: a spec file or a package
// directory as it is, or a package archive (.tar.gz: a file, stdin when arg
// is "-", or an https URL of one), or FQN@VERSION found in store.sources,
// each unpacked into a private directory under the home first (so the
// offline path reads it too). Stdin that is not an archive is a spec's
// JSON, as before. With expect ("sha256:HEX"), the package's hash must be
// that, or nothing is installed.
func connectorInstallFrom(cfg *config.Config, c *admin.Client, arg, expect string, cf consentFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	var err error
	if cf.expect, err = parseExpect(expect); err != nil {
		return err
	}
	kind, in, err := installKind(arg, stdin)
	if err != nil {
		return err
	}
	cf.from = arg
	switch kind {
	case kindStdinSpec:
		cf.from = "stdin"
		return connectorInstallStdin(cfg, c, cf, in, stdout, stderr)
	case kindLocal:
		return connectorInstall(cfg, c, arg, cf, stdin, stdout, stderr)
	}
	work, err := privateWorkDir(cfg.Home, "fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	root, from, err := materialize(cfg, kind, arg, in, filepath.Join(work, "pkg"))
	if err != nil {
		return err
	}
	if kind == kindRef {
		if err := checkRef(root, arg); err != nil {
			return err
		}
	}
	cf.from = from
	if kind == kindURL {
		cf.opts.FetchedFrom = from // not this machine's: local:// exempts it from nothing
	}
	if err := connectorInstall(cfg, c, root, cf, stdin, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "from %s\n", printable.Line(from))
	return nil
}

// What connector install was given.
const (
	kindLocal        = iota // a spec file or a package directory
	kindArchive             // a .tar.gz file
	kindStdinArchive        // a .tar.gz on stdin
	kindStdinSpec           // a spec's JSON on stdin
	kindURL                 // an https URL of a .tar.gz
	kindRef                 // FQN@VERSION
)

// gzipMagic starts every gzip stream; a spec file is JSON.
var gzipMagic = []byte{0x1f, 0x8b}

// installKind tells what arg names, and returns stdin to read from when
// arg is "-" (its first bytes looked at, not consumed).
func installKind(arg string, stdin io.Reader) (int, io.Reader, error) {
	switch {
	case arg == "-":
		br := bufio.NewReader(stdin)
		if magic, _ := br.Peek(2); bytes.Equal(magic, gzipMagic) {
			return kindStdinArchive, br, nil
		}
		return kindStdinSpec, br, nil
	case strings.HasPrefix(arg, "http://"):
		return 0, nil, pkgsource.CheckURL(arg)
	case strings.HasPrefix(arg, "https://"):
		return kindURL, nil, nil
	case strings.Contains(arg, "://"):
		if _, _, err := policy.ParseRef(arg); err != nil {
			return 0, nil, usagef("%v", err)
		}
		return kindRef, nil, nil
	}
	if isArchiveFile(arg) {
		return kindArchive, nil, nil
	}
	return kindLocal, nil, nil // a directory or a spec; or the store names the problem as it always has
}

// isArchiveFile tells whether p is a regular file that starts as gzip does.
func isArchiveFile(p string) bool {
	if info, err := os.Stat(p); err != nil || !info.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 2)
	_, err = io.ReadFull(f, magic)
	return err == nil && bytes.Equal(magic, gzipMagic)
}

// parseExpect reads --expect: "" or "sha256:" and 64 hex digits.
func parseExpect(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	h, ok := strings.CutPrefix(s, "sha256:")
	if b, err := hex.DecodeString(h); !ok || err != nil || len(b) != 32 || strings.ToLower(h) != h {
		return "", usagef("--expect %q is not sha256: and 64 lower-case hex digits, as `connector install` and `connector list` print a package's hash", s)
	}
	return h, nil
}

// materialize puts the package arg names (or stdin holds) into dir and
// returns its root and where it came from.
func materialize(cfg *config.Config, kind int, arg string, stdin io.Reader, dir string) (root, from string, err error) {
	ctx := context.Background()
	switch kind {
	case kindStdinArchive:
		root, err = pkgsource.Unpack(stdin, dir)
		return root, "stdin", err
	case kindArchive:
		root, err = pkgsource.UnpackFile(arg, dir)
		return root, arg, err
	}
	roots, err := upstreamRoots(cfg.Upstream.CAFiles)
	if err != nil {
		return "", "", err
	}
	f := &pkgsource.Fetcher{Guard: newGuard(cfg), RootCAs: roots}
	if kind == kindURL {
		root, err = f.Unpack(ctx, arg, dir)
		return root, arg, err
	}
	if len(cfg.Store.Sources) == 0 {
		return "", "", fmt.Errorf("%s: no store.sources are configured: connector install reads them (and upstream.*, egress.*) "+
			"from the config file --config names, not from the running daemon; give --config FILE, or install an archive, URL or directory", arg)
	}
	sources := make([]pkgsource.Source, len(cfg.Store.Sources))
	for i, s := range cfg.Store.Sources {
		sources[i] = pkgsource.Source{Authority: s.Authority, BaseURL: s.BaseURL, Mirror: s.Mirror}
	}
	return (&pkgsource.Resolver{Sources: sources, Fetcher: f}).Resolve(ctx, arg, dir)
}

// checkRef refuses a package whose spec is not the connector and version
// ref asked for: a source may not answer one name with another.
func checkRef(root, ref string) error {
	fqn, version, _ := policy.ParseRef(ref) // checked by installKind
	p := filepath.Join(root, store.SpecFileName)
	data, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("the package fetched for %s has no %s at its root: %w", ref, store.SpecFileName, err)
	}
	spec, err := policy.ParseSpec(p, data)
	if err != nil {
		return err
	}
	if got := spec.Connector.FQN + "@" + spec.Connector.Version; got != fqn+"@"+version {
		return fmt.Errorf("the package fetched for %s is %s; refused (a source must serve exactly the connector and version asked for)", ref, printable.Line(got))
	}
	return nil
}

// privateWorkDir makes a directory only this user reads, under home.
func privateWorkDir(home, prefix string) (string, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(home, prefix)
}
