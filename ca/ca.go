package ca

import (
	"bytes"
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults applied by New and Load for zero Options fields.
const (
	DefaultCommonName   = "Aileron session CA"
	DefaultValidity     = 30 * 24 * time.Hour
	DefaultLeafValidity = 7 * 24 * time.Hour
	DefaultCacheSize    = 1024
)

// clockSkew is how far in the past NotBefore is placed, so that a client whose
// clock runs slightly behind still accepts a freshly minted certificate.
const clockSkew = time.Minute

// Sentinel errors. Every error returned by this package wraps one of them.
var (
	// ErrInvalidOptions is wrapped when Options hold a negative duration or size.
	ErrInvalidOptions = errors.New("ca: invalid options")
	// ErrInvalidCA is wrapped by every Load/LoadDir failure about the content of
	// the certificate or key (bad PEM, wrong type, mismatch, not a CA, expired).
	ErrInvalidCA = errors.New("ca: invalid CA")
	// ErrKeyPermissions is wrapped when LoadDir finds a key file that group or
	// others may access.
	ErrKeyPermissions = errors.New("ca: key file permissions too open")
	// ErrCAExpired is wrapped by Leaf when the CA is outside its validity
	// window (expired, or not yet valid because of a clock step), and by
	// Load/LoadDir, together with ErrInvalidCA, for an expired certificate.
	ErrCAExpired = errors.New("ca: CA certificate outside its validity window")
	// ErrInvalidHost is wrapped by Leaf when host is not a DNS name or IP literal.
	ErrInvalidHost = errors.New("ca: invalid host")
	// ErrIO is wrapped by Save/LoadDir failures to read or write files.
	ErrIO = errors.New("ca: file I/O failed")
)

// Options tune New and Load. The zero value of every field means its default:
// CommonName "Aileron session CA", Validity 30 days, LeafValidity 7 days,
// CacheSize 1024 leaves, Now time.Now. Negative values are rejected with
// ErrInvalidOptions.
type Options struct {
	// CommonName is the root's subject CN (New only).
	CommonName string
	// Validity is the root's lifetime from now (New only; a loaded CA keeps
	// the validity in its certificate).
	Validity time.Duration
	// LeafValidity is the lifetime of a minted leaf. It is always clamped to
	// the CA's own validity window.
	LeafValidity time.Duration
	// CacheSize bounds how many leaves are kept; the least recently used leaf
	// is evicted first.
	CacheSize int
	// Now is the clock used for validity windows and cache expiry.
	Now func() time.Time
}

// Authority is one session's root CA plus its bounded leaf cache. It is safe
// for concurrent use.
type Authority struct {
	cert         *x509.Certificate
	certPEM      []byte
	key          crypto.Signer
	leafValidity time.Duration
	now          func() time.Time

	mu       sync.Mutex
	cache    *lru               // guarded by mu
	inflight map[string]*flight // guarded by mu

	hits, misses, mints atomic.Uint64
}

// Stats reports cache counters for metrics. Hits counts Leaf calls answered
// from the cache; Misses counts calls that found no usable cached leaf
// (including those that waited for another caller's mint); Mints counts
// leaves successfully minted.
type Stats struct{ Hits, Misses, Mints uint64 }

// withDefaults validates opts and fills in defaults. Failures wrap
// ErrInvalidOptions.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Validity < 0:
		return o, fmt.Errorf("%w: Validity is %v; use a positive duration or 0 for the default %v",
			ErrInvalidOptions, o.Validity, DefaultValidity)
	case o.LeafValidity < 0:
		return o, fmt.Errorf("%w: LeafValidity is %v; use a positive duration or 0 for the default %v",
			ErrInvalidOptions, o.LeafValidity, DefaultLeafValidity)
	case o.CacheSize < 0:
		return o, fmt.Errorf("%w: CacheSize is %d; use a positive size or 0 for the default %d",
			ErrInvalidOptions, o.CacheSize, DefaultCacheSize)
	}
	if o.CommonName == "" {
		o.CommonName = DefaultCommonName
	}
	if o.Validity == 0 {
		o.Validity = DefaultValidity
	}
	if o.LeafValidity == 0 {
		o.LeafValidity = DefaultLeafValidity
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// New creates a fresh ECDSA P-256 root with a random 128-bit serial, valid
// from a minute ago (clock skew) for opts.Validity. Failures wrap
// ErrInvalidOptions, or are errors from the system's random source.
func New(opts Options) (*Authority, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca: generating root key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	skid, err := subjectKeyID(key.Public())
	if err != nil {
		return nil, err
	}
	now := opts.Now().UTC().Truncate(time.Second)
	cert, err := selfSign(rand.Reader, key, rootTemplate(serial, skid, opts.CommonName, now.Add(-clockSkew), now.Add(opts.Validity)))
	if err != nil {
		return nil, err
	}
	return newAuthority(cert, key, opts), nil
}

// rootTemplate is a session root's certificate template.
func rootTemplate(serial *big.Int, skid []byte, cn string, notBefore, notAfter time.Time) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Aileron"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		SubjectKeyId:          skid,
	}
}

// selfSign signs tmpl with key; a nil random source makes the ECDSA
// signature deterministic (RFC 6979).
func selfSign(random io.Reader, key *ecdsa.PrivateKey, tmpl *x509.Certificate) (*x509.Certificate, error) {
	der, err := x509.CreateCertificate(random, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("ca: creating root certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("ca: parsing the new root certificate: %w", err)
	}
	return cert, nil
}

// newAuthority assembles an Authority from a verified certificate/key pair and
// defaulted options.
func newAuthority(cert *x509.Certificate, key crypto.Signer, opts Options) *Authority {
	return &Authority{
		cert:         cert,
		certPEM:      pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		key:          key,
		leafValidity: opts.LeafValidity,
		now:          opts.Now,
		cache:        newLRU(opts.CacheSize),
		inflight:     make(map[string]*flight),
	}
}

// CertPEM returns the root certificate in PEM form (a fresh copy), suitable
// for a sandbox's CA bundle.
func (a *Authority) CertPEM() []byte { return bytes.Clone(a.certPEM) }

// Certificate returns the parsed root certificate. It is shared: callers must
// not modify it.
func (a *Authority) Certificate() *x509.Certificate { return a.cert }

// Stats returns a snapshot of the leaf cache counters.
func (a *Authority) Stats() Stats {
	return Stats{Hits: a.hits.Load(), Misses: a.misses.Load(), Mints: a.mints.Load()}
}

// randomSerial returns a positive serial number of exactly 128 bits: 127
// random bits below a fixed top bit, so it always has full length and fits the
// 20-octet limit of RFC 5280.
func randomSerial() (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("ca: generating serial number: %w", err)
	}
	b[0] |= 0x80
	return new(big.Int).SetBytes(b), nil
}

// subjectKeyID derives a key identifier from the public key: the first 20
// bytes of the SHA-256 of its SubjectPublicKeyInfo (RFC 7093 style).
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	spki, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("ca: marshalling public key: %w", err)
	}
	sum := sha256.Sum256(spki)
	return sum[:20], nil
}

// lru is a bounded least-recently-used map from host to leaf. It is not safe
// for concurrent use; Authority guards it with its mutex.
type lru struct {
	capacity int
	order    *list.List // of *lruEntry, most recent at the front
	items    map[string]*list.Element
}

type lruEntry struct {
	host string
	leaf *leaf
}

func newLRU(capacity int) *lru {
	return &lru{capacity: capacity, order: list.New(), items: make(map[string]*list.Element)}
}

// get returns the entry for host and marks it most recently used.
func (c *lru) get(host string) (*leaf, bool) {
	el, ok := c.items[host]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruEntry).leaf, true
}

// put stores l for host, evicting the least recently used entry when full.
func (c *lru) put(host string, l *leaf) {
	if el, ok := c.items[host]; ok {
		el.Value.(*lruEntry).leaf = l
		c.order.MoveToFront(el)
		return
	}
	c.items[host] = c.order.PushFront(&lruEntry{host: host, leaf: l})
	for c.order.Len() > c.capacity {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry).host)
	}
}

// len reports how many leaves are cached.
func (c *lru) len() int { return c.order.Len() }
