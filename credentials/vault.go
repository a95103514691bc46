package credentials

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"filippo.io/age"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/state"
)

// Vault files and limits.
const (
	// VaultFile is the encrypted vault's name inside Vault.Dir.
	VaultFile = "vault.age"
	// vaultFormat is the version of the vault's plaintext JSON.
	vaultFormat = 1
	// maxVaultSize bounds how much of the vault file is read.
	maxVaultSize = 16 << 20
	// maxKeyFileSize bounds how much of the key file is read.
	maxKeyFileSize = 64 << 10
	// maxCredentialName bounds a credential name, in bytes.
	maxCredentialName = 64
)

// OAuthMaterial is what an oauth2 credential holds: the client registration
// and the current tokens. Every field except TokenURL, ClientID and Scopes
// is secret.
type OAuthMaterial struct {
	// TokenURL is the token endpoint: https, or http to a loopback address
	// (local token servers and tests).
	TokenURL string `json:"token_url"`
	// ClientID identifies the client at the token endpoint. Required.
	ClientID string `json:"client_id"`
	// ClientSecret authenticates the client; empty for public clients.
	ClientSecret string `json:"client_secret,omitempty"`
	// Scopes are requested on refresh; empty means the grant's scopes.
	Scopes []string `json:"scopes,omitempty"`
	// AuthMethod is how the client authenticates at the token endpoint
	// (inject.AuthMethod*); empty, as in entries stored before it existed,
	// means HTTP Basic with a client secret and client_id in the body
	// without one, the choice the login makes.
	AuthMethod string `json:"token_endpoint_auth_method,omitempty"`
	// AccessToken is the current access token; empty forces a refresh.
	AccessToken string `json:"access_token,omitempty"`
	// RefreshToken obtains new access tokens. Required.
	RefreshToken string `json:"refresh_token"`
	// Expiry is when AccessToken expires; zero means unknown (treated as
	// valid until the upstream refuses it).
	Expiry time.Time `json:"expiry,omitzero"`
}

// String names the material without its secrets, so that printing it with
// %v never leaks them.
func (m OAuthMaterial) String() string {
	return fmt.Sprintf("OAuthMaterial{TokenURL: %s, ClientID: %s, secrets redacted}", m.TokenURL, m.ClientID)
}

// GoString is String, for %#v.
func (m OAuthMaterial) GoString() string { return m.String() }

// Credential is one vault entry. Secret holds the material of the api_key,
// bearer, basic and aws_sigv4 kinds; OAuth that of oauth2 (whose Secret has
// only its Kind set).
type Credential struct {
	// Name identifies the entry: 1 to 64 of A-Z a-z 0-9 . _ -.
	Name string
	// Kind is one of inject.KindAPIKey, KindBearer, KindBasic, KindOAuth2,
	// KindSigV4.
	Kind   string
	Secret inject.Secret
	OAuth  *OAuthMaterial
	// CreatedAt and UpdatedAt are stamped by Set: CreatedAt when the name
	// was first stored, UpdatedAt at each Set (rotation). A refreshed OAuth
	// token changes neither.
	CreatedAt, UpdatedAt time.Time
}

// String names the entry without its secrets, so that printing it with %v
// never leaks them.
func (c Credential) String() string {
	return fmt.Sprintf("Credential{Name: %s, Kind: %s, secrets redacted}", c.Name, c.Kind)
}

// GoString is String, for %#v.
func (c Credential) GoString() string { return c.String() }

// Info describes a vault entry without any of its values.
type Info struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Expiry is an oauth2 entry's access-token expiry, when known.
	Expiry *time.Time `json:"expiry,omitempty"`
}

// Vault holds credentials in an age-encrypted file, Dir/vault.age, under an
// X25519 identity kept in KeyFile (in age-keygen's format, so `age -d -i
// KEYFILE` can read a backup). Open decrypts the whole vault into memory;
// every change rewrites the file atomically (temp file, fsync, rename; mode
// 0600) before it becomes visible, so readers see a change from their very
// next call without a restart, and never see one that was not saved.
//
// Call Open before anything else. Methods are safe for concurrent use;
// readers never wait for disk I/O.
type Vault struct {
	// Dir holds vault.age, normally $AILERON_HOME/vault. Required; created
	// 0700 if missing.
	Dir string
	// KeyFile is the age identity, normally $AILERON_HOME/keys/vault.key.
	// Required; created 0600 on first use. A key group or others may read is
	// refused.
	KeyFile string
	// Now stamps CreatedAt and UpdatedAt. Nil means time.Now.
	Now func() time.Time
	// DB, when it is a database the nodes of a fleet share (Postgres),
	// keeps the sealed vault in its vault table instead of Dir/vault.age,
	// still encrypted to KeyFile's identity (every node holds a copy of
	// that file): a change made on one node reaches the others at once
	// (a notification, and Refresh), and an OAuth refresh runs on one node
	// at a time. Nil, or SQLite: the file, as on a single node.
	DB *state.DB

	writeMu sync.Mutex // serialises changes: read-modify-write of file and map
	mu      sync.RWMutex
	id      *age.X25519Identity
	entries map[string]Credential // copy-on-write; nil until Open
	rev     int64                 // the shared vault's revision in entries
}

// vaultPlaintext is the JSON inside vault.age.
type vaultPlaintext struct {
	Version     int                `json:"version"`
	Credentials []credentialRecord `json:"credentials"`
}

// credentialRecord is one entry inside vault.age.
type credentialRecord struct {
	Name            string         `json:"name"`
	Kind            string         `json:"kind"`
	Token           string         `json:"token,omitempty"`
	Username        string         `json:"username,omitempty"`
	Password        string         `json:"password,omitempty"`
	AccessKeyID     string         `json:"access_key_id,omitempty"`
	SecretAccessKey string         `json:"secret_access_key,omitempty"`
	SessionToken    string         `json:"session_token,omitempty"`
	Service         string         `json:"service,omitempty"`
	OAuth           *OAuthMaterial `json:"oauth,omitempty"`
	CreatedAt       time.Time      `json:"created_at"`
	UpdatedAt       time.Time      `json:"updated_at"`
}

// Open loads (or creates) the key and decrypts the vault into memory. A
// missing vault file is an empty vault; a vault file that exists is never
// replaced by Open. Failures: Dir or KeyFile unset wraps state.ErrInvalidArgument;
// a key file others may read wraps state.ErrInsecureFile; a key that is not an age
// X25519 identity, a vault that does not decrypt with it (wrong key, damaged
// file), or a vault whose key is missing wraps state.ErrCorruptState; each names
// the file and how to fix it.
func (v *Vault) Open() error {
	if v.Dir == "" || v.KeyFile == "" {
		return fmt.Errorf("%w: Vault needs Dir and KeyFile", state.ErrInvalidArgument)
	}
	file := v.file()
	if err := v.keyMissing(); err != nil {
		return err
	}
	id, err := loadOrCreateIdentity(v.KeyFile, file)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(v.Dir, 0o700); err != nil {
		return fmt.Errorf("creating vault directory: %w", err)
	}
	entries, err := readVault(file, v.KeyFile, id)
	if err != nil {
		return err
	}
	v.writeMu.Lock()
	defer v.writeMu.Unlock()
	v.mu.Lock()
	v.id = id
	v.mu.Unlock()
	if v.DB.Shared() {
		return v.openShared(entries)
	}
	v.mu.Lock()
	v.entries = entries
	v.mu.Unlock()
	return nil
}

// Set stores c, replacing (rotating) any entry of the same name; the next
// Get sees it. CreatedAt and UpdatedAt are stamped here (the caller's values
// are ignored): a rotation keeps CreatedAt and always advances UpdatedAt.
// c.Secret.Kind may be empty (it is set to c.Kind). Failures: an invalid
// name, kind or secret field (empty where required, set where the kind does
// not use it, or holding CR, LF or NUL) wraps state.ErrInvalidArgument and never
// contains secret bytes; before Open, state.ErrNotOpen; a failed write leaves
// both the file and memory as they were.
func (v *Vault) Set(c Credential) error {
	c = cloneCredential(c)
	if err := validateCredential(&c); err != nil {
		return err
	}
	now := v.now().UTC().Round(0)
	return v.mutate(func(cur map[string]Credential) (map[string]Credential, error) {
		c := c
		c.CreatedAt, c.UpdatedAt = now, now
		if prev, ok := cur[c.Name]; ok {
			c.CreatedAt = prev.CreatedAt
			if !now.After(prev.UpdatedAt) {
				c.UpdatedAt = prev.UpdatedAt.Add(time.Nanosecond)
			}
		}
		next := maps.Clone(cur)
		next[c.Name] = c
		return next, nil
	})
}

// Get returns a copy of the entry name. An unknown name wraps state.ErrNotFound;
// before Open, state.ErrNotOpen.
func (v *Vault) Get(name string) (Credential, error) {
	v.mu.RLock()
	entries := v.entries
	c, ok := entries[name]
	v.mu.RUnlock()
	if entries == nil {
		return Credential{}, fmt.Errorf("%w: vault", state.ErrNotOpen)
	}
	if !ok {
		return Credential{}, fmt.Errorf("%w: credential %q is not in the vault (see `aileron credential list`; "+
			"store it with `aileron credential set %s --kind KIND`)", state.ErrNotFound, name, name)
	}
	return cloneCredential(c), nil
}

// List describes every entry, sorted by name, without any secret value.
// Before Open it returns nil.
func (v *Vault) List() []Info {
	v.mu.RLock()
	entries := v.entries
	v.mu.RUnlock()
	if entries == nil {
		return nil
	}
	out := make([]Info, 0, len(entries))
	for _, c := range entries {
		in := Info{Name: c.Name, Kind: c.Kind, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
		if c.OAuth != nil && !c.OAuth.Expiry.IsZero() {
			exp := c.OAuth.Expiry
			in.Expiry = &exp
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Delete removes the entry name. An unknown name wraps state.ErrNotFound; before
// Open, state.ErrNotOpen.
func (v *Vault) Delete(name string) error {
	return v.mutate(func(cur map[string]Credential) (map[string]Credential, error) {
		if _, ok := cur[name]; !ok {
			return nil, fmt.Errorf("%w: credential %q is not in the vault (see `aileron credential list`)", state.ErrNotFound, name)
		}
		next := maps.Clone(cur)
		delete(next, name)
		return next, nil
	})
}

// UpdateOAuthToken persists a refreshed token for the oauth2 entry name:
// its access token, expiry and, when tok carries one, its refresh token
// (an empty RefreshToken keeps the stored one). UpdatedAt does not change:
// a refresh is not a rotation. Failures: an unknown name wraps state.ErrNotFound;
// an entry of another kind or a token field holding CR, LF or NUL wraps
// state.ErrInvalidArgument; before Open, state.ErrNotOpen.
func (v *Vault) UpdateOAuthToken(name string, tok inject.OAuthToken) error {
	return v.updateOAuthToken(name, tok, nil)
}

// updateOAuthToken is UpdateOAuthToken; when rev is non-nil and the entry
// was rotated since (its UpdatedAt differs), the stale token is dropped and
// nil returned.
func (v *Vault) updateOAuthToken(name string, tok inject.OAuthToken, rev *time.Time) error {
	if err := inject.CheckValue("access_token", tok.AccessToken); err != nil {
		return fmt.Errorf("%w: refreshed token for credential %s: %w", state.ErrInvalidArgument, name, err)
	}
	if tok.RefreshToken != "" {
		if err := inject.CheckValue("refresh_token", tok.RefreshToken); err != nil {
			return fmt.Errorf("%w: refreshed token for credential %s: %w", state.ErrInvalidArgument, name, err)
		}
	}
	return v.mutate(func(cur map[string]Credential) (map[string]Credential, error) {
		c, ok := cur[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: credential %q is not in the vault", state.ErrNotFound, name)
		case c.Kind != inject.KindOAuth2 || c.OAuth == nil:
			return nil, fmt.Errorf("%w: credential %s is %s, not oauth2", state.ErrInvalidArgument, name, c.Kind)
		case rev != nil && !rev.Equal(c.UpdatedAt):
			return nil, nil
		}
		m := *c.OAuth
		m.Scopes = slices.Clone(m.Scopes)
		m.AccessToken, m.Expiry = tok.AccessToken, tok.Expiry.UTC().Round(0)
		if tok.RefreshToken != "" {
			m.RefreshToken = tok.RefreshToken
		}
		c.OAuth = &m
		next := maps.Clone(cur)
		next[name] = c
		return next, nil
	})
}

// snapshot returns the current map (never modified in place) or state.ErrNotOpen.
func (v *Vault) snapshot() (map[string]Credential, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.entries == nil {
		return nil, fmt.Errorf("%w: vault", state.ErrNotOpen)
	}
	return v.entries, nil
}

// mutate applies fn to the current entries and stores what it returns (nil:
// no change), in the vault file or, shared, in the database.
func (v *Vault) mutate(fn func(cur map[string]Credential) (map[string]Credential, error)) error {
	v.writeMu.Lock()
	defer v.writeMu.Unlock()
	cur, err := v.snapshot()
	if err != nil {
		return err
	}
	if v.DB.Shared() {
		return v.mutateShared(fn)
	}
	next, err := fn(cur)
	if err != nil || next == nil {
		return err
	}
	return v.commit(next)
}

// commit encrypts next to the vault file and then makes it current. The
// caller holds writeMu.
func (v *Vault) commit(next map[string]Credential) error {
	v.mu.RLock()
	id := v.id
	v.mu.RUnlock()
	data, err := sealVault(next, id)
	if err != nil {
		return err
	}
	if err := state.WriteFileAtomic(v.file(), data); err != nil {
		return fmt.Errorf("writing vault: %w", err)
	}
	v.mu.Lock()
	v.entries = next
	v.mu.Unlock()
	return nil
}

// file is Dir/vault.age.
func (v *Vault) file() string { return filepath.Join(v.Dir, VaultFile) }

// now returns the vault clock's time.
func (v *Vault) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// sealVault encodes entries and encrypts them to id's recipient.
func sealVault(entries map[string]Credential, id *age.X25519Identity) ([]byte, error) {
	pt := vaultPlaintext{Version: vaultFormat, Credentials: make([]credentialRecord, 0, len(entries))}
	for _, c := range entries {
		s := c.Secret
		pt.Credentials = append(pt.Credentials, credentialRecord{Name: c.Name, Kind: c.Kind,
			Token: s.Token, Username: s.Username, Password: s.Password, AccessKeyID: s.AccessKeyID,
			SecretAccessKey: s.SecretAccessKey, SessionToken: s.SessionToken, Service: s.Service,
			OAuth: c.OAuth, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt})
	}
	sort.Slice(pt.Credentials, func(i, j int) bool { return pt.Credentials[i].Name < pt.Credentials[j].Name })
	plain, err := json.Marshal(pt)
	if err != nil {
		return nil, fmt.Errorf("encoding vault: %w", err)
	}
	var buf bytes.Buffer
	w, err := age.Encrypt(&buf, id.Recipient())
	if err != nil {
		return nil, fmt.Errorf("encrypting vault: %w", err)
	}
	if _, err := w.Write(plain); err != nil {
		return nil, fmt.Errorf("encrypting vault: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("encrypting vault: %w", err)
	}
	return buf.Bytes(), nil
}

// readVault decrypts and decodes the vault file; a missing file is an empty
// vault. Content failures wrap state.ErrCorruptState and name the file.
func readVault(file, keyFile string, id *age.X25519Identity) (map[string]Credential, error) {
	data, err := readVaultFile(file)
	if data == nil || err != nil {
		return map[string]Credential{}, err
	}
	return openVault(data, file, keyFile, id)
}

// readVaultFile reads the vault file: nil, nil when there is none.
func readVaultFile(file string) ([]byte, error) {
	info, err := os.Lstat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading vault: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: vault %s is not a regular file (mode %v); restore it from a backup", state.ErrCorruptState, file, info.Mode())
	}
	data, err := state.ReadBounded(file, maxVaultSize)
	if err != nil {
		return nil, fmt.Errorf("reading vault: %w", err)
	}
	return data, nil
}

// openVault decrypts and decodes sealed vault data; where names it in
// errors (the file, or the database table).
func openVault(data []byte, where, keyFile string, id *age.X25519Identity) (map[string]Credential, error) {
	file := where
	r, err := age.Decrypt(bytes.NewReader(data), id)
	var plain []byte
	if err == nil {
		plain, err = io.ReadAll(r)
	}
	if err != nil {
		why := "the file is damaged or is not an age file"
		if _, wrongKey := errors.AsType[*age.NoIdentityMatchError](err); wrongKey {
			why = "it was encrypted to a different key"
		}
		return nil, fmt.Errorf("%w: vault %s does not decrypt with the key in %s: %s; restore the matching key or vault "+
			"from a backup (the vault file was left untouched)", state.ErrCorruptState, file, keyFile, why)
	}
	return decodeVault(file, plain)
}

// decodeVault parses and validates the vault's plaintext.
func decodeVault(file string, plain []byte) (map[string]Credential, error) {
	var pt vaultPlaintext
	if err := json.Unmarshal(plain, &pt); err != nil {
		return nil, fmt.Errorf("%w: vault %s decrypts but its content is not valid vault JSON", state.ErrCorruptState, file)
	}
	if pt.Version != vaultFormat {
		return nil, fmt.Errorf("%w: vault %s has format version %d; this aileron reads version %d", state.ErrCorruptState, file, pt.Version, vaultFormat)
	}
	entries := make(map[string]Credential, len(pt.Credentials))
	for i, r := range pt.Credentials {
		c := Credential{Name: r.Name, Kind: r.Kind, OAuth: r.OAuth, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
			Secret: inject.Secret{Kind: r.Kind, Token: r.Token, Username: r.Username, Password: r.Password,
				AccessKeyID: r.AccessKeyID, SecretAccessKey: r.SecretAccessKey, SessionToken: r.SessionToken, Service: r.Service}}
		if err := validateCredential(&c); err != nil {
			return nil, fmt.Errorf("%w: vault %s: entry %d: %v", state.ErrCorruptState, file, i, err)
		}
		if _, dup := entries[c.Name]; dup {
			return nil, fmt.Errorf("%w: vault %s: credential %q appears twice", state.ErrCorruptState, file, c.Name)
		}
		entries[c.Name] = c
	}
	return entries, nil
}

// cloneCredential returns c with its OAuth material and scopes copied.
func cloneCredential(c Credential) Credential {
	if c.OAuth != nil {
		m := *c.OAuth
		m.Scopes = slices.Clone(m.Scopes)
		c.OAuth = &m
	}
	return c
}

// loadOrCreateIdentity reads the age X25519 identity in keyFile, first
// creating one (mode 0600, directory 0700) if the file does not exist and
// no vault file needs the old one.
func loadOrCreateIdentity(keyFile, vaultFile string) (*age.X25519Identity, error) {
	if _, err := os.Lstat(keyFile); errors.Is(err, fs.ErrNotExist) {
		if _, verr := os.Lstat(vaultFile); verr == nil {
			return nil, fmt.Errorf("%w: vault %s exists but its key %s is missing; restore the key from a backup "+
				"(a new key cannot read the existing vault)", state.ErrCorruptState, vaultFile, keyFile)
		}
		if err := createIdentity(keyFile); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	if err := state.CheckPrivateFile(keyFile, "vault key"); err != nil {
		return nil, err
	}
	data, err := state.ReadBounded(keyFile, maxKeyFileSize)
	if err != nil {
		return nil, fmt.Errorf("reading vault key: %w", err)
	}
	// age's parse errors may quote the key; they are not passed on.
	ids, err := age.ParseIdentities(bytes.NewReader(data))
	if err == nil && len(ids) == 1 {
		if id, ok := ids[0].(*age.X25519Identity); ok {
			return id, nil
		}
	}
	return nil, fmt.Errorf("%w: vault key %s does not hold exactly one age X25519 identity (a line AGE-SECRET-KEY-1…); "+
		"restore it from a backup", state.ErrCorruptState, keyFile)
}

// createIdentity writes a new age X25519 identity to keyFile in
// age-keygen's format, failing with fs.ErrExist if the file appeared.
func createIdentity(keyFile string) error {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return fmt.Errorf("generating vault key: %w", err)
	}
	body := fmt.Sprintf("# aileron vault key: keep it private and back it up; without it the vault cannot be read\n"+
		"# public key: %s\n%s\n", id.Recipient(), id)
	return state.CreatePrivateFile(keyFile, []byte(body), "vault key")
}

// isCredentialName reports whether name is 1 to 64 of A-Z a-z 0-9 . _ -.
func isCredentialName(name string) bool {
	if name == "" || len(name) > maxCredentialName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-", c) >= 0) {
			return false
		}
	}
	return true
}

// CheckName validates a credential name, for a caller to check it before
// it does anything it cannot undo (a login redeeming its one code); the
// error wraps state.ErrInvalidArgument.
func CheckName(name string) error { return checkCredentialName(name) }

// checkCredentialName validates a credential name; the error wraps
// state.ErrInvalidArgument.
func checkCredentialName(name string) error {
	if !isCredentialName(name) {
		return fmt.Errorf("%w: credential name %q must be 1 to %d of the characters A-Z a-z 0-9 . _ -",
			state.ErrInvalidArgument, name, maxCredentialName)
	}
	return nil
}
