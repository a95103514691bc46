//go:build ignore

// gen.go regenerates the committed test PKI the integration tests' fake
// upstreams use. Run `go run gen.go` inside this directory; it overwrites
// every *.pem here. The private keys are test-only and public by design.
//
//	root.pem                     ECDSA P-256 "Aileron Test Upstream Root", 2025–2045
//	server.pem/server-key.pem    leaf under root for every test upstream name
//	untrusted.pem/-key.pem       self-signed, same names, not under root
//	wrongname.pem/-key.pem       under root, only for wrong.example.net
//	expired.pem/-key.pem         under root, expired in 2020
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	serverNames := []string{
		"gmail.googleapis.com",
		"api.linear.app",
		"api.eu.example.com",
		"api.us.example.com",
		"api.ap.example.com",
		"other.example.com",
		"passthrough.example.org",
		"ws.example.com",
		"stream.example.com",
		// the model providers' hosts (agents_test.go's stand-in provider)
		"api.anthropic.com",
		"api.openai.com",
		"generativelanguage.googleapis.com",
		"llm.example.com",
	}
	serverIPs := []net.IP{net.ParseIP("127.0.0.2")}
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	to := time.Date(2045, 1, 1, 0, 0, 0, 0, time.UTC)

	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	rootTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Aileron Test Upstream Root", Organization: []string{"Aileron tests"}},
		NotBefore:             from,
		NotAfter:              to,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	if err != nil {
		return err
	}
	root, err := x509.ParseCertificate(rootDER)
	if err != nil {
		return err
	}
	if err := writePEM("root.pem", "CERTIFICATE", rootDER); err != nil {
		return err
	}

	leaves := []struct {
		file     string
		cn       string
		names    []string
		ips      []net.IP
		from, to time.Time
		self     bool
	}{
		{"server", "Aileron test upstream", serverNames, serverIPs, from, to, false},
		{"untrusted", "Aileron untrusted upstream", serverNames, serverIPs, from, to, true},
		{"wrongname", "wrong.example.net", []string{"wrong.example.net"}, nil, from, to, false},
		{"expired", "Aileron expired upstream", serverNames, serverIPs,
			time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), false},
	}
	for _, l := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: l.cn},
			NotBefore:    l.from,
			NotAfter:     l.to,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:     l.names,
			IPAddresses:  l.ips,
		}
		parent, signer := root, rootKey
		if l.self {
			parent, signer = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(l.file+".pem", "CERTIFICATE", der); err != nil {
			return err
		}
		if err := writePEM(l.file+"-key.pem", "EC PRIVATE KEY", keyDER); err != nil {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func writePEM(name, typ string, der []byte) error {
	return os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644)
}
