package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Checkpoint is a signed statement of the trail's tree: after Size lines
// its RFC 6962 root is Root. It is rendered in the C2SP tlog-checkpoint
// format ("<origin>\n<size>\n<base64 root>\n") and signed as a C2SP signed
// note, so any checkpoint consumer (a witness, a monitor) can read it.
type Checkpoint struct {
	// Origin names the trail: the signing key's name, unique per trail.
	Origin string
	Size   uint64
	Root   tlog.Hash
}

// Body is the checkpoint's note text.
func (c Checkpoint) Body() string {
	return fmt.Sprintf("%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// ParseCheckpoint parses a checkpoint note's text (without signatures).
// Extension lines after the root are allowed and ignored.
func ParseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return Checkpoint{}, errors.New("a checkpoint is three lines: origin, tree size, base64 root hash")
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != lines[1] || size > math.MaxInt64 {
		return Checkpoint{}, fmt.Errorf("checkpoint tree size %q is not a decimal number", lines[1])
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(raw) != tlog.HashSize {
		return Checkpoint{}, fmt.Errorf("checkpoint root %q is not a base64 SHA-256 hash", lines[2])
	}
	c := Checkpoint{Origin: lines[0], Size: size}
	copy(c.Root[:], raw)
	return c, nil
}

// Key is the trail's Ed25519 signing key. The same key signs every trail
// of a daemon; each trail signs under its own name (its origin).
type Key struct {
	priv ed25519.PrivateKey
}

// keyFileHeader starts a key file, so a file of another kind is refused.
const keyFileHeader = "aileron audit signing key v1\n"

// LoadOrCreateKey reads the signing key at path, or creates it (mode
// 0600, in a directory that exists) when there is none. A key file that
// others can read, or that is not a key, is an error naming the fix.
func LoadOrCreateKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: read signing key: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("audit: signing key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("audit: signing key %s is readable by others (mode %v); run `chmod 600 %s`", path, st.Mode().Perm(), path)
	}
	return parseKey(path, b)
}

// LoadPublicKey reads the key at path for its public half only (verify
// and prove need no write access to it).
func LoadPublicKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("audit: read signing key: %w (pass the trail's public key with --key instead)", err)
	}
	return parseKey(path, b)
}

func parseKey(path string, b []byte) (*Key, error) {
	rest, ok := bytes.CutPrefix(b, []byte(keyFileHeader))
	seed, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(string(rest)))
	if !ok || err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("audit: %s is not an audit signing key (it starts with %q and holds a base64 Ed25519 seed)", path, strings.TrimSpace(keyFileHeader))
	}
	return &Key{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

func createKey(path string) (*Key, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("audit: new signing key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: create signing key: %w", err)
	}
	_, err = f.WriteString(keyFileHeader + base64.StdEncoding.EncodeToString(seed) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("audit: write signing key %s: %w", path, err)
	}
	return &Key{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// NewKey is a key from a 32-byte Ed25519 seed (for tests and tools).
func NewKey(seed []byte) (*Key, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("audit: a key seed is %d bytes", ed25519.SeedSize)
	}
	return &Key{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// VerifierKey is the public key under the trail name origin, in the
// signed-note verifier key form ("<origin>+<hash>+<base64>") that
// witnesses, `aileron audit verify --key` and note.NewVerifier take.
func (k *Key) VerifierKey(origin string) (string, error) {
	return note.NewEd25519VerifierKey(origin, k.priv.Public().(ed25519.PublicKey))
}

// signer signs notes as origin with k (note.Signer).
func (k *Key) signer(origin string) note.Signer {
	return &keySigner{name: origin, hash: noteKeyHash(origin, k.priv.Public().(ed25519.PublicKey)), priv: k.priv}
}

type keySigner struct {
	name string
	hash uint32
	priv ed25519.PrivateKey
}

func (s *keySigner) Name() string                    { return s.name }
func (s *keySigner) KeyHash() uint32                 { return s.hash }
func (s *keySigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }

// noteKeyHash is the signed-note key hash of an Ed25519 key (algorithm
// byte 1): the first four bytes of SHA-256(name "\n" 0x01 key).
func noteKeyHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', 1})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// Sign renders c as a signed note.
func (k *Key) Sign(c Checkpoint) ([]byte, error) {
	return note.Sign(&note.Note{Text: c.Body()}, k.signer(c.Origin))
}

// verifier checks notes signed as origin by k.
func (k *Key) verifier(origin string) (note.Verifier, error) {
	vkey, err := k.VerifierKey(origin)
	if err != nil {
		return nil, err
	}
	return note.NewVerifier(vkey)
}

// OpenCheckpoint checks a signed checkpoint note against the verifier key
// vkey (whose name must be the checkpoint's origin) and parses it.
func OpenCheckpoint(signed []byte, v note.Verifier) (Checkpoint, error) {
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return Checkpoint{}, err
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != v.Name() {
		return Checkpoint{}, fmt.Errorf("checkpoint origin %q is not the key's name %q", c.Origin, v.Name())
	}
	return c, nil
}

// NewOrigin is a fresh trail name: "<host>/aileron-audit/<8 hex digits>".
// A trail keeps its origin for life; a new trail (after a recorded break)
// gets a new one, so no witness mistakes it for the old trail.
func NewOrigin(host string) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("audit: new origin: %w", err)
	}
	host = strings.Map(func(r rune) rune {
		if r <= ' ' || r == '+' || r == '/' || r > '~' {
			return '-'
		}
		return r
	}, host)
	if host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s/aileron-audit/%x", host, b), nil
}
