package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// upstreamPKI is the bench upstream's private PKI: an ECDSA P-256 root and a
// leaf for one IP address, both held in memory. Only the root certificate is
// ever written to disk (for the daemon's upstream.ca_files and mitmdump).
type upstreamPKI struct {
	rootPEM  []byte
	rootPool *x509.CertPool
	leaf     tls.Certificate
}

// newUpstreamPKI mints a root valid for a day and a leaf for ip signed by it.
func newUpstreamPKI(ip net.IP) (*upstreamPKI, error) {
	now := time.Now()
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("upstream pki: root key: %w", err)
	}
	rootTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "aileron bench upstream root"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	if err != nil {
		return nil, fmt.Errorf("upstream pki: root certificate: %w", err)
	}
	root, err := x509.ParseCertificate(rootDER)
	if err != nil {
		return nil, fmt.Errorf("upstream pki: parse root: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("upstream pki: leaf key: %w", err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: ip.String()},
		IPAddresses:  []net.IP{ip},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, root, &leafKey.PublicKey, rootKey)
	if err != nil {
		return nil, fmt.Errorf("upstream pki: leaf certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(root)
	return &upstreamPKI{
		rootPEM:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER}),
		rootPool: pool,
		leaf:     tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey},
	}, nil
}

// randomSerial returns a random positive 127-bit serial number.
func randomSerial() *big.Int {
	limit := new(big.Int).Lsh(big.NewInt(1), 127)
	n, err := rand.Int(rand.Reader, limit)
	if err != nil || n.Sign() == 0 {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// loadPool reads a PEM file into a fresh certificate pool; it fails when the
// file holds no certificate.
func loadPool(pemBytes []byte, name string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("%s: no PEM certificate found", name)
	}
	return pool, nil
}
