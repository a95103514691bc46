package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// splitPath is one way a split client reaches the upstream: direct (no
// proxy), through the daemon, or through a peer.
type splitPath struct {
	name  string
	proxy string // proxy URL; empty: direct
	roots string // PEM file of the roots the client trusts
	pid   int    // the proxy process whose CPU is read; 0 direct
}

// peer is another MITM proxy measured beside aileron in the split table,
// doing the same job on the wire: terminate TLS with a CA the client
// trusts, set the bench key as X-Api-Key, verify the upstream.
type peer struct {
	splitPath
	absent string // why it is not measured ("not installed"); empty when it runs
	// optional: a failure of this peer is a note, not a failed run (a
	// program not built here; the bare goproxy MITM is the bench's own).
	optional bool
	// unable names the rows the peer cannot do, with the cell's text.
	unable func(splitRow) string
	stop   func()
	err    string            // why it did not start, for the notes
	failed map[string]string // row name → its first failed sample, for the notes
}

// cell is the peer's text for row when it is not measured, or "".
func (p *peer) cell(row splitRow) string {
	switch {
	case p.absent != "":
		return p.absent
	case p.failed[row.name] != "":
		return "ERR"
	case p.unable != nil:
		return p.unable(row)
	}
	return ""
}

// peerNamed is the peer called name, or nil.
func peerNamed(peers []*peer, name string) *peer {
	for _, p := range peers {
		if p.name == name {
			return p
		}
	}
	return nil
}

// peerNames lists the running peers for the table's title.
func peerNames(peers []*peer) string {
	var s string
	for _, p := range peers {
		if p.absent == "" {
			s += ", " + p.name
		}
	}
	return s
}

// printPeerNotes says why a peer did not start or failed a row.
func printPeerNotes(w io.Writer, peers []*peer) {
	for _, p := range peers {
		if p.err != "" {
			fmt.Fprintf(w, "%s: %s\n", p.name, p.err)
		}
		for _, row := range slices.Sorted(maps.Keys(p.failed)) {
			fmt.Fprintf(w, "%s failed on %s (ERR): %s\n", p.name, row, p.failed[row])
		}
	}
}

// startPeers starts every peer the split table compares: the bare goproxy
// MITM always, Squid and mitmdump when installed. Peers that are missing
// or fail to start stay in the list with absent set; only the bare MITM
// failing to start is an error.
func (e *splitEnv) startPeers(ctx context.Context, o options, stderr io.Writer) ([]*peer, error) {
	bare, err := e.startBareMITM(stderr)
	if err != nil {
		return nil, fmt.Errorf("bare goproxy MITM: %w", err)
	}
	peers := []*peer{bare}
	for _, start := range []func(context.Context, options, io.Writer) *peer{e.startSquid, e.startMitmdump} {
		peers = append(peers, start(ctx, o, stderr))
	}
	for _, p := range peers {
		p.failed = map[string]string{}
	}
	return peers, nil
}

// stopPeers stops every running peer.
func stopPeers(peers []*peer) {
	for _, p := range peers {
		if p.stop != nil {
			p.stop()
		}
	}
}

// startBareMITM mints the peer's CA and starts this program as the
// _baremitm role.
func (e *splitEnv) startBareMITM(stderr io.Writer) (*peer, error) {
	caPEM, certPEM, err := newPeerCA()
	if err != nil {
		return nil, err
	}
	caFile, rootsFile := filepath.Join(e.dir, "baremitm-ca.pem"), filepath.Join(e.dir, "baremitm-root.pem")
	if err := errors.Join(os.WriteFile(caFile, caPEM, 0o600), os.WriteFile(rootsFile, certPEM, 0o600)); err != nil {
		return nil, err
	}
	cmd := exec.Command(e.self, roleBareMITM, caFile, e.roots, e.apiKey)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() { _ = in.Close(); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("no address from the process: %w", err)
	}
	return &peer{
		splitPath: splitPath{name: "bare goproxy", proxy: "http://" + strings.TrimSpace(line), roots: rootsFile, pid: cmd.Process.Pid},
		stop:      stop,
	}, nil
}

// newPeerCA mints an ECDSA P-256 CA valid for a day, the key type of the
// session CA and its leaves. caPEM is the certificate then the PKCS#8 key;
// certPEM the certificate alone, for the client to trust.
func newPeerCA() (caPEM, certPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "aileron bench peer CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(slices.Clone(certPEM), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})...), certPEM, nil
}
