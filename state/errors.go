package state

import "errors"

// Sentinel errors shared by every control-plane store. Errors the stores
// return about content, arguments or state wrap one of them, so callers (the
// admin and sandbox APIs) classify failures with errors.Is; failures of the
// file system are returned wrapping their *fs.PathError.
var (
	// ErrNotFound is wrapped when a session, connector version, approval,
	// credential or other named object does not exist (or no longer does).
	ErrNotFound = errors.New("not found")
	// ErrInvalidArgument is wrapped when a caller-supplied value is
	// malformed: a reference, a session name or TTL, a request body.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrConflict is wrapped when a change would contradict existing state:
	// a spec that clashes with another connector's, a version already
	// installed with other content, an approval no longer pending.
	ErrConflict = errors.New("conflict")
	// ErrCorruptState is wrapped when the daemon's own state (a database
	// row, a key file, the vault) cannot be read back as written.
	ErrCorruptState = errors.New("corrupt control-plane state")
	// ErrInsecureFile is wrapped when a secret file (a key, the database) is
	// not a regular file or group or others may access it.
	ErrInsecureFile = errors.New("secret file not private")
	// ErrNotOpen is wrapped when a store is used before its Open.
	ErrNotOpen = errors.New("not opened")
	// ErrSchemaTooNew is wrapped by Open when the database was migrated by a
	// newer aileron than this binary: opening it could corrupt data the
	// newer schema relies on.
	ErrSchemaTooNew = errors.New("database schema is newer than this aileron binary")
	// ErrUnavailable is wrapped when the shared state (a Postgres server)
	// cannot be reached: what needed it is refused, and the node recovers
	// on its own when the server answers again.
	ErrUnavailable = errors.New("shared state unavailable")
)
