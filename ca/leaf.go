package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// maxRenewMargin caps how long before a leaf's NotAfter it is re-minted.
const maxRenewMargin = time.Hour

// leaf is one cached, minted certificate with the window in which the cache
// may hand it out.
type leaf struct {
	cert      *tls.Certificate
	notBefore time.Time
	renewAt   time.Time
}

// usable reports whether the cache may still hand l out at now: inside its
// validity and not yet near expiry.
func (l *leaf) usable(now time.Time) bool {
	return !now.Before(l.notBefore) && now.Before(l.renewAt)
}

// flight is one in-progress mint that concurrent callers for the same host
// wait on. cert and err are written before done is closed.
type flight struct {
	done chan struct{}
	cert *tls.Certificate
	err  error
}

// Leaf returns the TLS certificate for host: a DNS name or an IP literal, with
// no port and no brackets. DNS names are matched case-insensitively and may
// carry one trailing dot; internationalised names must already be punycode.
//
// On a cache miss it mints an ECDSA P-256 leaf with a random 128-bit serial,
// SAN host, ExtKeyUsageServerAuth, valid inside the CA's window. Concurrent
// callers for the same host share one mint. Cached leaves are re-minted when
// they come within min(1h, lifetime/4) of expiry. The returned certificate
// (chain [leaf], Leaf set) is shared between callers and must not be
// modified.
//
// Errors wrap ErrInvalidHost for a bad host, ErrCAExpired when the CA is
// outside its validity window, or come from the system's random source.
func (a *Authority) Leaf(host string) (*tls.Certificate, error) {
	name, ip, err := canonicalHost(host)
	if err != nil {
		return nil, err
	}
	now := a.now()
	a.mu.Lock()
	if l, ok := a.cache.get(name); ok && l.usable(now) {
		a.mu.Unlock()
		a.hits.Add(1)
		return l.cert, nil
	}
	a.misses.Add(1)
	if f, ok := a.inflight[name]; ok {
		a.mu.Unlock()
		<-f.done
		return f.cert, f.err
	}
	f := &flight{done: make(chan struct{})}
	a.inflight[name] = f
	a.mu.Unlock()

	a.runFlight(f, name, ip, now)
	return f.cert, f.err
}

// runFlight mints the leaf for f, caches it on success and releases every
// caller waiting on f, whatever happens.
func (a *Authority) runFlight(f *flight, name string, ip netip.Addr, now time.Time) {
	var l *leaf
	defer func() {
		a.mu.Lock()
		delete(a.inflight, name)
		if l != nil {
			a.cache.put(name, l)
		}
		a.mu.Unlock()
		close(f.done)
	}()
	l, f.err = a.mint(name, ip, now)
	if l != nil {
		f.cert = l.cert
		a.mints.Add(1)
	}
}

// mint creates and signs a leaf for name (ip is valid when name is an IP
// literal). Errors wrap ErrCAExpired or come from crypto/x509 and the random
// source.
func (a *Authority) mint(name string, ip netip.Addr, now time.Time) (*leaf, error) {
	caFrom, caUntil := a.cert.NotBefore, a.cert.NotAfter
	if !now.Before(caUntil) {
		return nil, fmt.Errorf("%w: cannot mint a leaf for %q: the CA expired at %s; create a new session CA",
			ErrCAExpired, name, caUntil.Format(time.RFC3339))
	}
	if now.Before(caFrom) {
		return nil, fmt.Errorf("%w: cannot mint a leaf for %q: the CA is not valid until %s; check the system clock",
			ErrCAExpired, name, caFrom.Format(time.RFC3339))
	}
	notBefore := now.Add(-clockSkew).UTC().Truncate(time.Second)
	if notBefore.Before(caFrom) {
		notBefore = caFrom
	}
	notAfter := now.Add(a.leafValidity).UTC().Truncate(time.Second)
	if notAfter.After(caUntil) {
		notAfter = caUntil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca: generating leaf key for %q: %w", name, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		AuthorityKeyId:        a.cert.SubjectKeyId,
	}
	if len(name) <= 64 { // RFC 5280 ub-common-name; clients use the SAN anyway
		tmpl.Subject = pkix.Name{CommonName: name}
	}
	if ip.IsValid() {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, fmt.Errorf("ca: signing leaf for %q: %w", name, err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca: parsing leaf for %q: %w", name, err)
	}
	margin := min(maxRenewMargin, notAfter.Sub(notBefore)/4)
	return &leaf{
		cert:      &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed},
		notBefore: notBefore,
		renewAt:   notAfter.Add(-margin),
	}, nil
}

// canonicalHost validates host and returns its cache key: the IP's canonical
// text for an IP literal (with ip set), otherwise the lower-case DNS name
// without a trailing dot. Failures wrap ErrInvalidHost.
func canonicalHost(host string) (string, netip.Addr, error) {
	const hint = "pass a DNS name (punycode for internationalised names) or an IP literal, without port or brackets"
	if host == "" {
		return "", netip.Addr{}, fmt.Errorf("%w: empty host; %s", ErrInvalidHost, hint)
	}
	if mayBeIP(host) {
		if ip, err := netip.ParseAddr(host); err == nil {
			if ip.Zone() != "" {
				return "", netip.Addr{}, fmt.Errorf("%w: %q has an IPv6 zone, which a certificate cannot name; %s",
					ErrInvalidHost, host, hint)
			}
			return ip.String(), ip, nil
		}
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if err := checkDNSName(name); err != nil {
		return "", netip.Addr{}, fmt.Errorf("%w: %q %s; %s", ErrInvalidHost, truncate(host), err.Error(), hint)
	}
	return name, netip.Addr{}, nil
}

// mayBeIP reports whether a non-empty host could be an IP literal: IPv6 holds
// a ':' and IPv4 ends in a digit. It spares DNS names, the hot path, the
// allocation of a failed netip.ParseAddr.
func mayBeIP(host string) bool {
	last := host[len(host)-1]
	return strings.Contains(host, ":") || ('0' <= last && last <= '9')
}

// checkDNSName reports why a lower-case name is not a valid DNS host name:
// at most 253 bytes, dot-separated labels of 1-63 bytes from [a-z0-9-_], not
// starting or ending with '-'. Underscores are accepted because they occur in
// real deployments and Go's own verifier accepts them; '*' is refused so no
// wildcard certificate is ever minted.
func checkDNSName(name string) error {
	if len(name) > 253 {
		return fmt.Errorf("is %d bytes long, more than the 253 a DNS name may have", len(name))
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return fmt.Errorf("has an empty label")
		}
		if len(label) > 63 {
			return fmt.Errorf("has a %d-byte label, more than the 63 allowed", len(label))
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("has label %q starting or ending with '-'", label)
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' {
				return fmt.Errorf("contains %q, which is not allowed in a DNS name", r)
			}
		}
	}
	return nil
}

// truncate shortens s for error messages.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
