package witness

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// algCosignature is the signature-type byte of Ed25519 cosignatures
// (c2sp.org/tlog-cosignature): it goes into the key ID and the vkey.
const algCosignature = 0x04

// maxSize is the largest tree size accepted: tlog counts in int64.
const maxSize = math.MaxInt64

// emptyRoot is the RFC 6962 hash of the empty tree, SHA-256("").
var emptyRoot = tlog.Hash(sha256.Sum256(nil))

// ParseCheckpoint parses a checkpoint note body (c2sp.org/tlog-checkpoint,
// without the signatures): "<origin>\n<size>\n<base64 root hash>\n" and
// then zero or more non-empty extension lines, each ending in "\n". It is
// strict: the origin is non-empty, the size is decimal without leading
// zeroes (and at most 2^63-1), the root is the canonical base64 of 32
// bytes, and the body is UTF-8 without control characters other than
// newline (as in a signed note). Errors wrap ErrBadRequest.
func ParseCheckpoint(body string) (origin string, size uint64, root tlog.Hash, err error) {
	bad := func(why string) (string, uint64, tlog.Hash, error) {
		return "", 0, tlog.Hash{}, fmt.Errorf("%w: checkpoint: %s", ErrBadRequest, why)
	}
	if !utf8.ValidString(body) || strings.ContainsFunc(body, func(r rune) bool { return r < 0x20 && r != '\n' }) {
		return bad("not UTF-8 text, or a control character")
	}
	text, ok := strings.CutSuffix(body, "\n")
	if !ok {
		return bad("does not end in a newline")
	}
	lines := strings.Split(text, "\n")
	if len(lines) < 3 {
		return bad("fewer than three lines")
	}
	if lines[0] == "" {
		return bad("empty origin line")
	}
	size, ok = parseSize(lines[1])
	if !ok {
		return bad(fmt.Sprintf("size line %q is not a decimal without leading zeroes", lines[1]))
	}
	root, ok = parseHash(lines[2])
	if !ok {
		return bad(fmt.Sprintf("root line %q is not the base64 of a 32-byte hash", lines[2]))
	}
	for _, ext := range lines[3:] {
		if ext == "" {
			return bad("empty extension line")
		}
	}
	return lines[0], size, root, nil
}

// parseSize parses a decimal with no leading zeroes ("0" for zero), at
// most 2^63-1.
func parseSize(s string) (uint64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > maxSize {
		return 0, false
	}
	return n, true
}

// parseHash parses the canonical standard base64 of a 32-byte hash (the
// decoder alone would let through newlines and non-zero padding bits).
func parseHash(s string) (tlog.Hash, bool) {
	var h tlog.Hash
	if len(s) != base64.StdEncoding.EncodedLen(tlog.HashSize) {
		return h, false
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != tlog.HashSize || base64.StdEncoding.EncodeToString(raw) != s {
		return h, false
	}
	copy(h[:], raw)
	return h, true
}

// parseAddRequest parses an add-checkpoint request body
// (c2sp.org/tlog-witness): "old <size>\n", at most 63 lines of one base64
// hash each, an empty line, then the checkpoint note (not parsed here).
func parseAddRequest(body []byte) (old uint64, proof []tlog.Hash, checkpoint []byte, err error) {
	bad := func(why string) (uint64, []tlog.Hash, []byte, error) {
		return 0, nil, nil, fmt.Errorf("%w: %s", ErrBadRequest, why)
	}
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return bad("no old size line")
	}
	num, ok := bytes.CutPrefix(line, []byte("old "))
	if !ok {
		return bad("the first line is not \"old <size>\"")
	}
	if old, ok = parseSize(string(num)); !ok {
		return bad(fmt.Sprintf("old size %q is not a decimal without leading zeroes", num))
	}
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return bad("no empty line before the checkpoint")
		}
		if len(line) == 0 {
			break
		}
		if len(proof) == MaxProofLines {
			return bad(fmt.Sprintf("more than %d proof lines", MaxProofLines))
		}
		h, ok := parseHash(string(line))
		if !ok {
			return bad(fmt.Sprintf("proof line %d is not the base64 of a 32-byte hash", len(proof)+1))
		}
		proof = append(proof, h)
	}
	if len(rest) == 0 {
		return bad("no checkpoint")
	}
	return old, proof, rest, nil
}

// formatAddRequest is the inverse of parseAddRequest.
func formatAddRequest(old uint64, proof []tlog.Hash, checkpoint []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", old)
	for _, h := range proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(checkpoint)
	return b.Bytes()
}

// validName is the signed-note rule for key names: non-empty UTF-8 with
// no Unicode space and no '+'.
func validName(name string) bool {
	return name != "" && utf8.ValidString(name) &&
		strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

// keyID is SHA-256(name || "\n" || 0x04 || public key)[:4], big endian.
func keyID(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', algCosignature})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

func formatVKey(name string, pub ed25519.PublicKey) string {
	return fmt.Sprintf("%s+%08x+%s", name, keyID(name, pub),
		base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, pub...)))
}

// cosignedMessage is the cosignature/v1 signed message.
func cosignedMessage(timestamp uint64, body string) []byte {
	return fmt.Appendf(nil, "cosignature/v1\ntime %d\n%s", timestamp, body)
}

// timestamp is the time for a new cosignature: now in Unix seconds, but
// never before floor (the log's previous cosignature).
func (st *state) timestamp(floor uint64) (uint64, error) {
	now := st.now().Unix()
	if now < 0 {
		return 0, fmt.Errorf("witness: the clock reads %d, before 1970", now)
	}
	return max(uint64(now), floor), nil
}

// cosign returns the witness's cosignature line over a checkpoint body.
func (st *state) cosign(t uint64, body string) []byte {
	sig := make([]byte, 0, 4+8+ed25519.SignatureSize)
	sig = binary.BigEndian.AppendUint32(sig, st.keyID)
	sig = binary.BigEndian.AppendUint64(sig, t)
	sig = append(sig, ed25519.Sign(st.priv, cosignedMessage(t, body))...)
	return fmt.Appendf(nil, "— %s %s\n", st.name, base64.StdEncoding.EncodeToString(sig))
}

// cosigVerifier is a note.Verifier for one witness's cosignature/v1
// signatures; it records the timestamp of the one it accepts.
type cosigVerifier struct {
	name      string
	id        uint32
	pub       ed25519.PublicKey
	timestamp uint64
}

func (v *cosigVerifier) Name() string    { return v.name }
func (v *cosigVerifier) KeyHash() uint32 { return v.id }

func (v *cosigVerifier) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > math.MaxInt64 {
		return false
	}
	if _, _, _, err := ParseCheckpoint(string(msg)); err != nil {
		return false
	}
	if !ed25519.Verify(v.pub, cosignedMessage(t, string(msg)), sig[8:]) {
		return false
	}
	v.timestamp = t
	return true
}

// parseVKey parses an Ed25519 cosignature verifier key,
// "<name>+<8 hex key ID>+<base64(0x04 || 32-byte public key)>".
func parseVKey(vkey string) (*cosigVerifier, error) {
	name, rest, _ := strings.Cut(vkey, "+")
	hash16, b64, _ := strings.Cut(rest, "+")
	id, err1 := strconv.ParseUint(hash16, 16, 32)
	raw, err2 := base64.StdEncoding.DecodeString(b64)
	if !validName(name) || len(hash16) != 8 || err1 != nil || err2 != nil ||
		len(raw) != 1+ed25519.PublicKeySize || raw[0] != algCosignature {
		return nil, fmt.Errorf("witness: malformed cosignature verifier key %q", vkey)
	}
	pub := ed25519.PublicKey(raw[1:])
	if uint32(id) != keyID(name, pub) {
		return nil, fmt.Errorf("witness: verifier key %q: the key ID does not match the key", vkey)
	}
	return &cosigVerifier{name: name, id: uint32(id), pub: pub}, nil
}

// CheckVerifierKey says whether vkey is a witness's cosignature verifier
// key, as Witness.VerifierKey prints it.
func CheckVerifierKey(vkey string) error {
	_, err := parseVKey(vkey)
	return err
}

// VerifyCosignature checks that checkpoint, a checkpoint note with
// cosignature lines appended (what Latest returns, or a checkpoint with the
// lines Push returned appended), carries a valid cosignature/v1 from the
// witness whose verifier key is witnessVKey (see Witness.VerifierKey), and
// returns that cosignature's timestamp. Signatures from other keys are
// ignored; the log's own signature is not checked here, nor is the
// timestamp: how old, or how far ahead, is acceptable is the caller's call.
func VerifyCosignature(witnessVKey string, checkpoint []byte) (time.Time, error) {
	v, err := parseVKey(witnessVKey)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := note.Open(checkpoint, note.VerifierList(v)); err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return time.Time{}, fmt.Errorf("witness: no cosignature from %s", v.name)
		case errors.As(err, &invalid):
			return time.Time{}, fmt.Errorf("witness: invalid cosignature from %s", v.name)
		}
		return time.Time{}, fmt.Errorf("witness: %v", err)
	}
	return time.Unix(int64(v.timestamp), 0), nil
}
