package store

import (
	"errors"

	"github.com/aileronhq/aileron/state"
)

// Errors of the store, beside the state sentinels it also wraps
// (state.ErrInvalidArgument, ErrNotFound, ErrConflict, ErrCorruptState).
var (
	// ErrInvalidSpec is wrapped when a connector spec does not parse or
	// validate. The message is the spec parser's own, naming the file, the
	// JSON path and the rule broken.
	ErrInvalidSpec = errors.New("invalid connector spec")
	// ErrInvalidPackage is wrapped when a connector package cannot be
	// installed as it stands: no spec file, a symlink or device inside, a
	// file or the whole package over the size limits, actions that do not
	// load.
	ErrInvalidPackage = errors.New("invalid connector package")
	// ErrInvalidManifest is wrapped when a package's manifest.toml does not
	// parse or validate; the manifest parser's errors (file, key path,
	// rule) follow it. It also wraps ErrInvalidPackage.
	ErrInvalidManifest = errors.New("invalid connector manifest")
	// ErrExceedsManifest is wrapped when a package's spec reaches beyond its
	// manifest (a host:port or credential kind it does not grant) or names
	// another connector or version; each excess is a manifest.ExcessError.
	// It also wraps ErrInvalidPackage.
	ErrExceedsManifest = errors.New("connector package reaches beyond its manifest")
	// ErrTampered is wrapped when an installed package no longer matches
	// its content hash (a file edited, added or removed, or the directory
	// gone).
	ErrTampered = errors.New("connector package failed its integrity check")
	// ErrConsentMismatch is wrapped when an install's consent does not
	// name the package: no hash, another hash (the package changed after
	// it was shown), or a lock entry that records another hash or less
	// than the package asks. It also wraps state.ErrConflict.
	ErrConsentMismatch = consentError{}
	// ErrInvalidLock is wrapped when a lock file does not parse or
	// validate; the file and the key or entry follow it.
	ErrInvalidLock = errors.New("invalid connector lock file")
)

// consentError is ErrConsentMismatch: its own sentinel that also wraps
// state.ErrConflict, so the admin API answers 409.
type consentError struct{}

func (consentError) Error() string { return "install consent does not match the package" }
func (consentError) Unwrap() error { return state.ErrConflict }
