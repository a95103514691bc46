package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/state"
)

// A package may carry its publisher's signature over its statement
// (signing.Statement: FQN, version, package hash) as SignatureFileName at
// its root, outside the hash. Install verifies it, and records it in the
// store_signatures table by package hash (the package directory in the
// store holds exactly what is hashed); List judges the recorded signature
// against the trust store as it stands then. No network is used.

// Errors of signature checks. Both also wrap ErrInvalidPackage, so the
// admin API answers 400 invalid_package.
var (
	// ErrBadSignature is wrapped when a package's signature does not
	// verify: it does not read, was made in another namespace than
	// signing.Namespace, or is not a signature over this package's
	// statement (signed for another package or version, or altered).
	ErrBadSignature = errors.New("connector package signature does not verify")
	// ErrSignatureRequired is wrapped when Store.RequireSignature refuses
	// a package that is unsigned or signed by a key not trusted for its
	// authority.
	ErrSignatureRequired = errors.New("connector package is not signed by a trusted publisher")
)

// PackageStatement returns the statement a publisher signs for the package
// directory dir (signing.Statement of its spec's FQN and version and its
// HashPackage hash): what `aileron connector statement` prints. Errors are
// those of HashPackage, of parsing the spec (ErrInvalidSpec), and of the
// manifest check install makes (ErrInvalidManifest, ErrExceedsManifest), so
// a publisher is not handed a statement for a package install refuses.
func PackageStatement(dir string) ([]byte, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: connector package %s: %v", state.ErrInvalidArgument, dir, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a package directory: a signature travels as %s at a package directory's root, "+
			"so put the spec in a directory as %s", state.ErrInvalidArgument, dir, SignatureFileName, SpecFileName)
	}
	hash, data, err := hashPackageSpec(dir)
	if err != nil {
		return nil, err
	}
	origin := filepath.Join(dir, SpecFileName)
	if data == nil {
		return nil, fmt.Errorf("%w: %s not found; a package directory needs %s at its root", ErrInvalidPackage, origin, SpecFileName)
	}
	spec, err := parseSpec(origin, data)
	if err != nil {
		return nil, err
	}
	if _, err := checkManifest(dir, dir, spec); err != nil {
		return nil, err
	}
	return signing.Statement(spec.Connector.FQN, spec.Connector.Version, hash), nil
}

// takeSignature reads the staged package's signature file, if it has one,
// and removes it from the staged copy. It returns nil when there is none.
func takeSignature(pkg string) ([]byte, error) {
	p := filepath.Join(pkg, SignatureFileName)
	info, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, packageError{ErrBadSignature, fmt.Errorf("%s is not a file; it must be the armored signature ssh-keygen -Y sign writes",
			SignatureFileName)}
	}
	if info.Size() > signing.MaxSignatureSize {
		return nil, packageError{ErrBadSignature, fmt.Errorf("%s is %d bytes; an SSH signature is at most %d",
			SignatureFileName, info.Size(), signing.MaxSignatureSize)}
	}
	sig, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return sig, os.Remove(p)
}

// judgeSignature returns the verdict on the signature of the package src:
// sig, the one it came with, or else the one recorded for its hash by an
// earlier install. A signature that does not verify wraps ErrBadSignature;
// with RequireSignature, a verdict other than Trusted wraps
// ErrSignatureRequired, unless the authority is local:// and the package
// was not fetched (fetchedFrom, its URL, is "").
func (s *Store) judgeSignature(ctx context.Context, sig []byte, src policy.Source, fetchedFrom string) (signing.Signature, error) {
	fqn, version := src.Spec.Connector.FQN, src.Spec.Connector.Version
	if sig == nil {
		var err error
		if sig, err = s.recordedSignature(ctx, src.Hash); err != nil {
			return signing.Signature{}, err
		}
	}
	v := signing.Signature{Status: signing.Unsigned}
	var signers []signing.Signer
	if sig != nil {
		authority, err := policy.FQNAuthority(fqn)
		if err != nil {
			return signing.Signature{}, fmt.Errorf("%w: %v", ErrInvalidPackage, err)
		}
		signers, err = s.trustedSigners(ctx, authority)
		if err != nil {
			return signing.Signature{}, err
		}
		v, err = signing.Verify(signing.Statement(fqn, version, src.Hash), sig, signers, s.now())
		if err != nil {
			return signing.Signature{}, packageError{ErrBadSignature, fmt.Errorf("%s@%s: %s: %w", fqn, version, SignatureFileName, err)}
		}
	}
	local := strings.HasPrefix(fqn, "local://")
	if s.RequireSignature && v.Status != signing.Trusted && (!local || fetchedFrom != "") {
		hint := requireHint(v, signers)
		if local {
			hint = fmt.Sprintf("it was fetched from %s, so its local:// name exempts it from nothing (local:// is for your own connectors, "+
				"installed from a directory or file on this machine); ask its publisher for a package signed under their authority", fetchedFrom)
		}
		return signing.Signature{}, packageError{ErrSignatureRequired, fmt.Errorf("%s@%s is %s and store.require_signature is on: %s",
			fqn, version, DescribeSignature(v), hint)}
	}
	return v, nil
}

// requireHint says how to satisfy RequireSignature for a verdict, given
// the signers the trust store lists for its authority: a key listed there
// but not valid now needs a new signature, not a new trust entry.
func requireHint(v signing.Signature, signers []signing.Signer) string {
	if v.Status == signing.Unsigned {
		return "ask the publisher for a signed package (docs/connectors.md, \"Signing a package\")"
	}
	for _, sg := range signers {
		if sg.Fingerprint == v.Fingerprint {
			return fmt.Sprintf("the key is listed for %s (line %d of its signers) but may not sign packages now (its validity period, or "+
				"its namespaces); ask the publisher for this release signed with a current key (docs/connectors.md, \"Signing a package\": rotating a key)",
				v.Authority, sg.Line)
		}
	}
	return fmt.Sprintf("if you trust this key for %s, add it with `aileron trust add %s --signers FILE`", v.Authority, v.Authority)
}

// DescribeSignature renders a verdict as connector install prints it:
// "signed by github://acme (SHA256:…)", "unsigned", or "signed by a key not
// trusted for github://acme (SHA256:…)".
func DescribeSignature(v signing.Signature) string {
	switch v.Status {
	case signing.Trusted:
		return fmt.Sprintf("signed by %s (%s)", v.Authority, v.Fingerprint)
	case signing.Untrusted:
		return fmt.Sprintf("signed by a key not trusted for %s (%s)", v.Authority, v.Fingerprint)
	}
	return "unsigned"
}

// recordedSignature returns the signature recorded for hash, or nil.
func (s *Store) recordedSignature(ctx context.Context, hash string) ([]byte, error) {
	db, err := s.database()
	if err != nil {
		return nil, err
	}
	var sig string
	err = db.QueryRowContext(ctx, `SELECT signature FROM store_signatures WHERE hash = ?`, hash).Scan(&sig)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, db.Unavailable(fmt.Errorf("reading the signature of package %s from %s: %w", hash, db.Path(), err))
	}
	return []byte(sig), nil
}

// recordSignature records sig as the signature of the package hash, in
// tx, replacing any other; a nil sig records nothing.
func (s *Store) recordSignature(ctx context.Context, tx *state.Tx, hash string, sig []byte) error {
	if sig == nil {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO store_signatures (hash, signature, recorded_at) VALUES (?, ?, ?)
		ON CONFLICT (hash) DO UPDATE SET signature = excluded.signature, recorded_at = excluded.recorded_at`,
		hash, string(sig), state.FormatTime(s.now()))
	if err != nil {
		return fmt.Errorf("recording the signature of package %s: %w", hash, err)
	}
	return nil
}

// forgetSignature removes the signature of the package hash, in tx, once
// no version uses the package.
func forgetSignature(ctx context.Context, tx *state.Tx, hash string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM store_signatures WHERE hash = ?`, hash); err != nil {
		return fmt.Errorf("removing the signature of package %s: %w", hash, err)
	}
	return nil
}

// signatureJudge reads the recorded signatures and returns a function that
// judges the signature of fqn@version (package hash) against the trust
// store as it stands now, reading each authority's signers once. A
// recorded signature that no longer verifies, or an authority whose
// signers no longer parse, is logged and judged Untrusted.
func (s *Store) signatureJudge(ctx context.Context) (func(fqn, version, hash string) signing.Signature, error) {
	db, err := s.database()
	if err != nil {
		return nil, err
	}
	sigs, err := readSignatures(ctx, db)
	if err != nil {
		return nil, err
	}
	signers := map[string][]signing.Signer{}
	return func(fqn, version, hash string) signing.Signature {
		sig, ok := sigs[hash]
		if !ok {
			return signing.Signature{Status: signing.Unsigned}
		}
		authority, _ := policy.FQNAuthority(fqn)
		list, seen := signers[authority]
		if !seen {
			var err error
			if list, err = s.trustedSigners(ctx, authority); err != nil {
				s.log().Error().Str("event", "store.trust_unreadable").Str("authority", authority).Err(err).
					Msg("cannot read the authority's signers; its packages are shown as signed by a key not trusted")
			}
			signers[authority] = list
		}
		v, err := signing.Verify(signing.Statement(fqn, version, hash), sig, list, s.now())
		if err != nil {
			s.log().Error().Str("event", "store.signature_invalid").Str("connector", fqn+"@"+version).Err(err).
				Msg("the recorded signature no longer verifies; shown as signed by a key not trusted")
			return signing.Signature{Status: signing.Untrusted, Authority: authority}
		}
		return v
	}, nil
}

// readSignatures reads every recorded signature, by package hash.
func readSignatures(ctx context.Context, db *state.DB) (map[string][]byte, error) {
	rows, err := db.QueryContext(ctx, `SELECT hash, signature FROM store_signatures`)
	if err != nil {
		return nil, fmt.Errorf("reading package signatures from %s: %w", db.Path(), err)
	}
	defer rows.Close()
	sigs := map[string][]byte{}
	for rows.Next() {
		var hash, sig string
		if err := rows.Scan(&hash, &sig); err != nil {
			return nil, fmt.Errorf("reading package signatures from %s: %w", db.Path(), err)
		}
		sigs[hash] = []byte(sig)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading package signatures from %s: %w", db.Path(), err)
	}
	return sigs, nil
}
