package signing

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aileronhq/aileron/policy"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// MaxSignatureSize bounds an armored signature file. ssh-keygen's largest
// (RSA 16384) is under 6 KiB.
const MaxSignatureSize = 64 << 10

// ErrNotVerified is wrapped by every failure of a signature to verify: it
// does not read, was made in another namespace or with another hash, or is
// not a signature over the statement (another package's, or altered).
var ErrNotVerified = errors.New("publisher signature does not verify")

// ReadSignature reads an armored SSH signature (-----BEGIN SSH
// SIGNATURE-----, as ssh-keygen -Y sign writes it). Whitespace may surround
// the block; anything else is an error wrapping ErrNotVerified.
func ReadSignature(armored []byte) (*sshsig.Signature, error) {
	if len(armored) > MaxSignatureSize {
		return nil, fmt.Errorf("%w: the signature is %d bytes; an SSH signature is at most %d", ErrNotVerified, len(armored), MaxSignatureSize)
	}
	trimmed := bytes.TrimSpace(armored)
	block, rest := pem.Decode(trimmed)
	if block == nil || !bytes.HasPrefix(trimmed, []byte("-----BEGIN ")) {
		return nil, fmt.Errorf("%w: not an armored SSH signature (want the -----BEGIN SSH SIGNATURE----- block ssh-keygen -Y sign writes)", ErrNotVerified)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, fmt.Errorf("%w: text follows the signature block", ErrNotVerified)
	}
	if block.Type != sshsig.PEMType || len(block.Headers) > 0 {
		return nil, fmt.Errorf("%w: a %q block, not an SSH SIGNATURE", ErrNotVerified, block.Type)
	}
	sig, err := sshsig.ParseSignature(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: the signature does not parse: %v", ErrNotVerified, err)
	}
	return sig, nil
}

// Verify checks the armored SSH signature sig over statement (made by
// Statement) and judges its key against signers, the allowed signers of the
// statement's authority (scheme://owner of its FQN), at now.
//
// A signature that does not verify is an error wrapping ErrNotVerified: it
// does not read; its namespace is not Namespace; its hash is not sha256 or
// sha512; its key is a certificate; or it is not a signature over this
// statement by the key it names. Otherwise the verdict is Trusted, with the
// matching signer's principals, when the key is one of signers valid at now
// (ValidAt), and Untrusted when it is not (unknown, expired, not yet valid,
// or limited to other namespaces). No network is used.
func Verify(statement, sig []byte, signers []Signer, now time.Time) (Signature, error) {
	fqn, _, _, err := ParseStatement(statement)
	if err != nil {
		return Signature{}, fmt.Errorf("%w: %v", ErrNotVerified, err)
	}
	authority, err := policy.FQNAuthority(fqn)
	if err != nil {
		return Signature{}, fmt.Errorf("%w: %v", ErrNotVerified, err)
	}
	s, err := ReadSignature(sig)
	if err != nil {
		return Signature{}, err
	}
	if err := checkSignature(s, statement); err != nil {
		return Signature{}, err
	}
	v := Signature{Status: Untrusted, Authority: authority, Fingerprint: ssh.FingerprintSHA256(s.PublicKey)}
	for _, signer := range signers {
		if sameKey(signer.Key, s.PublicKey) && signer.ValidAt(now) {
			v.Status, v.Principal = Trusted, signer.Principals
			return v, nil
		}
	}
	return v, nil
}

// checkSignature verifies s over statement with the key s names.
func checkSignature(s *sshsig.Signature, statement []byte) error {
	if s.Namespace != Namespace {
		return fmt.Errorf("%w: it was made in namespace %q, not %q; sign with ssh-keygen -Y sign -n %s",
			ErrNotVerified, s.Namespace, Namespace, Namespace)
	}
	if s.HashAlgorithm != sshsig.HashSHA256 && s.HashAlgorithm != sshsig.HashSHA512 {
		return fmt.Errorf("%w: hash algorithm %q; want sha256 or sha512", ErrNotVerified, s.HashAlgorithm)
	}
	if _, isCert := s.PublicKey.(*ssh.Certificate); isCert || strings.Contains(s.PublicKey.Type(), "-cert-") {
		return fmt.Errorf("%w: it was made with a certificate; sign with the key itself", ErrNotVerified)
	}
	if err := sshsig.Verify(bytes.NewReader(statement), s, s.PublicKey, s.HashAlgorithm, Namespace); err != nil {
		return fmt.Errorf("%w: it is not a signature over this package's statement by key %s (signed for another package or version, "+
			"or the package or signature changed): %v", ErrNotVerified, ssh.FingerprintSHA256(s.PublicKey), err)
	}
	return nil
}
