package signing

// Status is a package's signature verdict.
type Status string

const (
	// Unsigned: the package carries no signature.
	Unsigned Status = "unsigned"
	// Trusted: the signature verifies and its key is an allowed signer of
	// the package's authority, valid at verification time.
	Trusted Status = "trusted"
	// Untrusted: the signature verifies, but its key is not an allowed
	// signer of the package's authority (unknown, or outside its validity).
	Untrusted Status = "untrusted"
)

// Signature is the verdict on one package's signature. A signature that does
// not verify at all is never a Signature: the install is refused.
type Signature struct {
	Status Status `json:"status"`
	// Authority is the package's authority (github://acme), whose allowed
	// signers were consulted; empty when Unsigned.
	Authority string `json:"authority,omitempty"`
	// Fingerprint is the signing key's SHA256:… fingerprint; empty when
	// Unsigned.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Principal is the allowed_signers principal that matched; empty unless
	// Trusted.
	Principal string `json:"principal,omitempty"`
}
