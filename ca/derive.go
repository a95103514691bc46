package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/sha256"
	"fmt"
	"math/big"
	"strconv"
	"time"
)

// DeriveOptions describe a root that Derive builds from a seed: the same
// options give the same key and a byte-identical certificate on every
// machine.
type DeriveOptions struct {
	// Seed is at least 32 secret bytes unique to the root (a fleet key
	// expanded with the session id). Required.
	Seed []byte
	// CommonName is the subject CN; "" means DefaultCommonName.
	CommonName string
	// NotBefore and NotAfter bound the root's validity. Required, and
	// NotBefore before NotAfter.
	NotBefore, NotAfter time.Time
	// LeafValidity, CacheSize and Now are as in Options.
	LeafValidity time.Duration
	CacheSize    int
	Now          func() time.Time
}

// Derive builds a root deterministically from opts.Seed: its ECDSA P-256
// private key is a scalar drawn from HKDF-SHA256(seed) (drawing again in
// the rare case a draw is not below the group order), its serial number
// too, and its certificate is signed with RFC 6979 deterministic ECDSA, so
// every node holding the seed presents the very same certificate, and a
// client that trusted it on one node trusts it on any. Failures wrap
// ErrInvalidOptions.
func Derive(opts DeriveOptions) (*Authority, error) {
	if len(opts.Seed) < 32 {
		return nil, fmt.Errorf("%w: a derived root needs a seed of at least 32 bytes, got %d", ErrInvalidOptions, len(opts.Seed))
	}
	if !opts.NotBefore.Before(opts.NotAfter) {
		return nil, fmt.Errorf("%w: a derived root needs NotBefore (%s) before NotAfter (%s)", ErrInvalidOptions, opts.NotBefore, opts.NotAfter)
	}
	o, err := Options{CommonName: opts.CommonName, LeafValidity: opts.LeafValidity, CacheSize: opts.CacheSize, Now: opts.Now}.withDefaults()
	if err != nil {
		return nil, err
	}
	key, err := deriveKey(opts.Seed)
	if err != nil {
		return nil, err
	}
	sn, err := hkdf.Key(sha256.New, opts.Seed, nil, "aileron ca serial", 16)
	if err != nil {
		return nil, fmt.Errorf("%w: deriving the serial: %v", ErrInvalidOptions, err)
	}
	sn[0] |= 0x80
	sn[0] &^= 0x40 // 127 bits below a fixed top bit, like randomSerial
	skid, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := rootTemplate(new(big.Int).SetBytes(sn), skid, o.CommonName,
		opts.NotBefore.UTC().Truncate(time.Second), opts.NotAfter.UTC().Truncate(time.Second))
	cert, err := selfSign(nil, key, tmpl)
	if err != nil {
		return nil, err
	}
	return newAuthority(cert, key, o), nil
}

// deriveKey draws a P-256 private scalar from seed: the first of
// HKDF(seed, "aileron ca key <i>"), i = 0, 1, …, that is a valid scalar
// (nonzero, below the order; a draw fails with probability about 2^-32).
func deriveKey(seed []byte) (*ecdsa.PrivateKey, error) {
	for i := range 64 {
		b, err := hkdf.Key(sha256.New, seed, nil, "aileron ca key "+strconv.Itoa(i), 32)
		if err != nil {
			return nil, fmt.Errorf("%w: deriving the key: %v", ErrInvalidOptions, err)
		}
		if key, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), b); err == nil {
			return key, nil
		}
	}
	return nil, fmt.Errorf("%w: no valid P-256 scalar in 64 draws from the seed", ErrInvalidOptions)
}
