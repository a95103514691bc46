// Package witness is a transparency-log witness per C2SP tlog-witness
// (https://c2sp.org/tlog-witness): for each log it is configured with, it
// keeps the largest checkpoint (https://c2sp.org/tlog-checkpoint) it has
// cosigned, and it cosigns a new one only when the new one carries a valid
// signature from the log's key and an RFC 6962 consistency proof from the
// stored one. The check and the store are one atomic step per log, and the
// store is durable (temp file, fsync, rename, fsync of the directory) before
// the cosignature leaves, so the witness never cosigns two inconsistent
// views of one log, nor a smaller tree after a larger one, across restarts.
//
// It owns the witness key (Dir/witness.key), the per-log state (one file per
// log under Dir), the add-checkpoint protocol (Witness.Add), its HTTP face
// (Witness.Handler) and the client side used by the audit daemon and by the
// verifier (Push, Latest, VerifyCosignature, ParseCheckpoint). It imports
// the standard library and golang.org/x/mod/sumdb/note and tlog, nothing of
// Aileron.
//
// Wire formats, all from C2SP:
//
//   - add-checkpoint request body (tlog-witness): "old <size>\n", zero to 63
//     lines each one base64 RFC 6962 consistency-proof hash, "\n", then the
//     signed checkpoint note.
//   - checkpoint note (tlog-checkpoint, signed-note): body
//     "<origin>\n<size>\n<base64 root>\n" plus optional non-empty extension
//     lines, "\n", then signature lines "— <name> <base64(keyID || sig)>\n".
//   - cosignature (tlog-cosignature, Ed25519 "cosignature/v1"): the line
//     "— <witness name> <base64(keyID(4) || timestamp(8, big endian) ||
//     Ed25519 signature(64))>\n", the signature over
//     "cosignature/v1\ntime <timestamp>\n<checkpoint body>", and keyID =
//     SHA-256(<name> || "\n" || 0x04 || public key)[:4].
//
// Sizes above 2^63-1 are refused as malformed: the Merkle tree code
// (golang.org/x/mod/sumdb/tlog) counts leaves in an int64.
package witness

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// MaxProofLines is the largest number of consistency-proof hashes an
// add-checkpoint request may carry (c2sp.org/tlog-witness: at most 63).
const MaxProofLines = 63

// maxCheckpointSize bounds a checkpoint note, signatures included.
const maxCheckpointSize = 1 << 20

// The errors Add returns, each wrapped with the detail; the handler maps
// them to HTTP statuses in one place (see statusOf), and Push maps the
// statuses back. A *ConflictError is the fifth outcome (409).
var (
	ErrBadRequest   = errors.New("witness: malformed request")                     // 400
	ErrBadSignature = errors.New("witness: no valid signature from the log's key") // 403
	ErrUnknownLog   = errors.New("witness: unknown log")                           // 404
	ErrBadProof     = errors.New("witness: consistency proof does not verify")     // 422
	// ErrNoCheckpoint is the 404 of the read endpoint (GET /checkpoint):
	// the witness has cosigned no checkpoint for that origin, or does not
	// know it.
	ErrNoCheckpoint = errors.New("witness: no checkpoint stored for this log")
)

var errNotOpen = errors.New("witness: not opened (call Open first)")

// ConflictError is the answer to an add-checkpoint whose old size is not
// the size of the latest checkpoint the witness cosigned for the log, or
// whose checkpoint has that size but another root hash (HTTP 409).
type ConflictError struct {
	Size uint64 // the size of the latest checkpoint the witness cosigned
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("witness: conflict: the latest checkpoint the witness cosigned for this log has size %d", e.Size)
}

// Witness is one witness identity (Name and its key) over one state
// directory. Set the fields, call Open once, then use Add or Handler from
// any number of goroutines. A Witness must not be copied after Open, and
// one Dir must be served by one Witness (one process) at a time: the
// per-log atomicity is a mutex in memory.
type Witness struct {
	// Dir holds witness.key and the per-log state; Open creates it 0700
	// and refuses it when group or others may write to it.
	Dir string
	// Name is the witness's key name, e.g. "witness.example.com/w1". It is
	// bound to the key when the key is created: Open refuses a key file
	// made for another name.
	Name string
	// Logs are the verifier keys of the logs this witness accepts, in the
	// note vkey format "<name>+<hash>+<base64 key>"; the key name is the
	// log's origin. Several keys may share an origin (key rotation).
	Logs []string
	// Now is the clock for cosignature timestamps; nil means time.Now.
	Now func() time.Time
	// ErrorLog receives the errors the handler answers with a bare 500
	// (state or key I/O); nil means the standard logger.
	ErrorLog *log.Logger
	// AddLog, if set, hears of each add-checkpoint the handler answers:
	// the checkpoint's first line (the origin) and size, and nil or why
	// it was refused, so a witness's operator sees rollbacks as they come.
	AddLog func(origin string, size uint64, err error)

	openMu sync.Mutex
	st     atomic.Pointer[state]
}

// state is what Open builds; it never changes afterwards except for the
// per-log fields guarded by each logState's mutex.
type state struct {
	dir     string
	name    string
	priv    ed25519.PrivateKey
	keyID   uint32
	vkey    string
	now     func() time.Time
	origins map[string]*logState
}

// logState is one log: its keys, its state file, and under mu the latest
// checkpoint the witness cosigned for it.
type logState struct {
	verifiers note.Verifiers
	file      string

	mu   sync.Mutex
	size uint64
	root tlog.Hash
	note []byte // the stored note (log signatures + cosignature); nil when none
	// lastTime is the timestamp of the last cosignature issued for the
	// log: a clock stepped back never yields an older one.
	lastTime uint64
}

// Open creates Dir (0700) if needed, loads the witness key from
// Dir/witness.key or creates it (0600; a key file readable or writable by
// group or others is refused), parses Logs, and loads each log's state.
func (w *Witness) Open() error {
	w.openMu.Lock()
	defer w.openMu.Unlock()
	if w.st.Load() != nil {
		return errors.New("witness: already open")
	}
	if !validName(w.Name) {
		return fmt.Errorf("witness: invalid witness name %q: it must be non-empty, valid UTF-8, without spaces or '+'", w.Name)
	}
	origins, err := parseLogs(w.Logs)
	if err != nil {
		return err
	}
	if err := prepareDir(w.Dir); err != nil {
		return err
	}
	priv, err := loadOrCreateKey(w.Dir, w.Name)
	if err != nil {
		return err
	}
	st := &state{dir: w.Dir, name: w.Name, priv: priv, now: w.Now, origins: origins}
	if st.now == nil {
		st.now = time.Now
	}
	pub := priv.Public().(ed25519.PublicKey)
	st.keyID = keyID(w.Name, pub)
	st.vkey = formatVKey(w.Name, pub)
	for origin, ls := range origins {
		if err := ls.load(w.Dir, origin); err != nil {
			return err
		}
	}
	w.st.Store(st)
	return nil
}

// parseLogs groups the log verifier keys by origin (the key name).
func parseLogs(vkeys []string) (map[string]*logState, error) {
	type nameHash struct {
		name string
		hash uint32
	}
	seen := map[nameHash]string{}
	byOrigin := map[string][]note.Verifier{}
	for i, k := range vkeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("witness: log key %d (%q): %v", i, k, err)
		}
		nh := nameHash{v.Name(), v.KeyHash()}
		if prev, ok := seen[nh]; ok {
			if prev != k {
				return nil, fmt.Errorf("witness: log keys %q and %q share a name and key hash", prev, k)
			}
			continue
		}
		seen[nh] = k
		byOrigin[v.Name()] = append(byOrigin[v.Name()], v)
	}
	origins := make(map[string]*logState, len(byOrigin))
	for origin, vs := range byOrigin {
		origins[origin] = &logState{verifiers: note.VerifierList(vs...)}
	}
	return origins, nil
}

// VerifierKey returns the witness's cosignature verifier key in vkey form,
// "<name>+<8 hex key ID>+<base64(0x04 || Ed25519 public key)>", for the
// clients that check its cosignatures (VerifyCosignature). It is "" before
// Open.
func (w *Witness) VerifierKey() string {
	st := w.st.Load()
	if st == nil {
		return ""
	}
	return st.vkey
}

// Add runs one add-checkpoint: old is the size of the checkpoint the
// client believes the witness last cosigned for the log, proof the RFC 6962
// consistency proof from it to checkpoint, a signed checkpoint note. On
// success it returns the cosignature line(s), each "— <name> <base64>\n",
// after storing the checkpoint durably. Errors wrap ErrBadRequest,
// ErrUnknownLog, ErrBadSignature or ErrBadProof, or are a *ConflictError;
// any other error is the witness's own failure (I/O).
func (w *Witness) Add(old uint64, proof []tlog.Hash, checkpoint []byte) ([]byte, error) {
	st := w.st.Load()
	if st == nil {
		return nil, errNotOpen
	}
	ls, n, err := st.open(checkpoint)
	if err != nil {
		return nil, err
	}
	_, size, root, err := ParseCheckpoint(n.Text)
	if err != nil {
		return nil, err
	}
	if err := checkRequest(old, size, root, proof); err != nil {
		return nil, err
	}

	ls.mu.Lock()
	defer ls.mu.Unlock()
	if err := ls.check(old, size, root, proof); err != nil {
		return nil, err
	}
	t, err := st.timestamp(ls.lastTime)
	if err != nil {
		return nil, err
	}
	cosig := st.cosign(t, n.Text)
	stored := storedNote(n, cosig)
	if err := writeFileAtomic(st.dir, ls.file, stored); err != nil {
		return nil, fmt.Errorf("witness: storing the checkpoint: %w", err)
	}
	ls.size, ls.root, ls.note, ls.lastTime = size, root, stored, t
	return cosig, nil
}

// open finds the checkpoint's log by its origin line and verifies the
// log's signature on it.
func (st *state) open(checkpoint []byte) (*logState, *note.Note, error) {
	if len(checkpoint) > maxCheckpointSize {
		return nil, nil, fmt.Errorf("%w: checkpoint larger than %d bytes", ErrBadRequest, maxCheckpointSize)
	}
	origin, _, ok := bytes.Cut(checkpoint, []byte("\n"))
	if !ok || len(origin) == 0 {
		return nil, nil, fmt.Errorf("%w: checkpoint has no origin line", ErrBadRequest)
	}
	ls := st.origins[string(origin)]
	if ls == nil {
		return nil, nil, fmt.Errorf("%w: origin %q", ErrUnknownLog, origin)
	}
	n, err := note.Open(checkpoint, ls.verifiers)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return nil, nil, fmt.Errorf("%w: origin %q: %v", ErrBadSignature, origin, err)
		}
		return nil, nil, fmt.Errorf("%w: checkpoint note: %v", ErrBadRequest, err)
	}
	return ls, n, nil
}

// checkRequest holds the checks that need no stored state.
func checkRequest(old, size uint64, root tlog.Hash, proof []tlog.Hash) error {
	switch {
	case len(proof) > MaxProofLines:
		return fmt.Errorf("%w: %d proof hashes, at most %d", ErrBadRequest, len(proof), MaxProofLines)
	case old > maxSize:
		return fmt.Errorf("%w: old size %d above 2^63-1", ErrBadRequest, old)
	case old > size:
		return fmt.Errorf("%w: old size %d above the checkpoint size %d", ErrBadRequest, old, size)
	case size == 0 && root != emptyRoot:
		return fmt.Errorf("%w: a size-0 checkpoint must carry the empty-tree hash", ErrBadProof)
	}
	return nil
}

// check compares the request with the stored checkpoint; ls.mu is held.
func (ls *logState) check(old, size uint64, root tlog.Hash, proof []tlog.Hash) error {
	if old != ls.size {
		return &ConflictError{Size: ls.size}
	}
	switch {
	case old == size:
		// c2sp.org/tlog-witness: same size, other root hash is a 409.
		if ls.note != nil && root != ls.root {
			return &ConflictError{Size: ls.size}
		}
		if len(proof) != 0 {
			return fmt.Errorf("%w: old size equals the checkpoint size, the proof must be empty", ErrBadProof)
		}
	case old == 0:
		// No previous checkpoint: nothing to be consistent with.
		if len(proof) != 0 {
			return fmt.Errorf("%w: old size 0 takes an empty proof, got %d hashes", ErrBadProof, len(proof))
		}
	default:
		if err := tlog.CheckTree(proof, int64(size), root, int64(old), ls.root); err != nil {
			return fmt.Errorf("%w: from size %d to %d: %v", ErrBadProof, old, size, err)
		}
	}
	return nil
}

// storedNote is what the read endpoint serves: the checkpoint body, the
// signatures of the log's keys that verified, and the cosignature.
func storedNote(n *note.Note, cosig []byte) []byte {
	var b bytes.Buffer
	b.WriteString(n.Text)
	b.WriteString("\n")
	for _, s := range n.Sigs {
		fmt.Fprintf(&b, "— %s %s\n", s.Name, s.Base64)
	}
	b.Write(cosig)
	return b.Bytes()
}

// latest returns the stored note of origin.
func (w *Witness) latest(origin string) ([]byte, error) {
	st := w.st.Load()
	if st == nil {
		return nil, errNotOpen
	}
	ls := st.origins[origin]
	if ls == nil {
		return nil, fmt.Errorf("%w: origin %q", ErrUnknownLog, origin)
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.note == nil {
		return nil, fmt.Errorf("%w: origin %q", ErrNoCheckpoint, origin)
	}
	return bytes.Clone(ls.note), nil
}
