package witness

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// keyFile is the witness key's file name under Dir. It holds one line,
// "PRIVATE+KEY+<name>+<8 hex key ID>+<base64(0x04 || Ed25519 seed)>\n",
// the note private-key layout with the cosignature algorithm byte, so that
// the key is bound to the name it was created for.
const keyFile = "witness.key"

// prepareDir creates dir 0700 and refuses one that group or others may
// write to (they could replace the state files).
func prepareDir(dir string) error {
	if dir == "" {
		return errors.New("witness: Dir is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("witness: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("witness: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("witness: %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("witness: %s is writable by group or others (mode %v); chmod 700 it", dir, fi.Mode().Perm())
	}
	return nil
}

// loadOrCreateKey reads Dir/witness.key, or creates it when it does not
// exist.
func loadOrCreateKey(dir, name string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dir, keyFile)
	priv, err := loadKey(path, name)
	if !errors.Is(err, fs.ErrNotExist) {
		return priv, err
	}
	_, priv, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("witness: generating the key: %w", err)
	}
	if err := createKeyFile(dir, path, name, priv); err != nil {
		return nil, err
	}
	return priv, nil
}

func loadKey(path, name string) (ed25519.PrivateKey, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err // fs.ErrNotExist: the caller creates it
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("witness: %s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("witness: %s is accessible by group or others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	priv, err := parseKey(string(data), name)
	if err != nil {
		return nil, fmt.Errorf("witness: %s: %w", path, err)
	}
	return priv, nil
}

func parseKey(data, name string) (ed25519.PrivateKey, error) {
	line, ok := strings.CutSuffix(data, "\n")
	if !ok {
		return nil, errors.New("malformed key file")
	}
	// The name has no '+' (validName), the base64 may.
	parts := strings.SplitN(line, "+", 5)
	if len(parts) != 5 || parts[0] != "PRIVATE" || parts[1] != "KEY" {
		return nil, errors.New("malformed key file")
	}
	keyName, hash16, b64 := parts[2], parts[3], parts[4]
	if keyName != name {
		return nil, fmt.Errorf("the key was made for witness name %q, not %q", keyName, name)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != algCosignature {
		return nil, errors.New("malformed key file")
	}
	priv := ed25519.NewKeyFromSeed(raw[1:])
	id, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil || len(hash16) != 8 || uint32(id) != keyID(name, priv.Public().(ed25519.PublicKey)) {
		return nil, errors.New("malformed key file: the key ID does not match the key")
	}
	return priv, nil
}

// createKeyFile writes the key to a temp file and links it into place:
// the key file appears whole or not at all, and an existing one is never
// replaced.
func createKeyFile(dir, path, name string, priv ed25519.PrivateKey) error {
	pub := priv.Public().(ed25519.PublicKey)
	line := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s\n", name, keyID(name, pub),
		base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, priv.Seed()...)))
	f, err := os.CreateTemp(dir, ".tmp-key-*") // mode 0600
	if err != nil {
		return fmt.Errorf("witness: creating the key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.WriteString(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("witness: writing the key: %w", err)
	}
	return nil
}

// stateFile is the file of one log's state: the origin is arbitrary text,
// so the name is its SHA-256.
func stateFile(dir, origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return filepath.Join(dir, "checkpoint-"+hex.EncodeToString(sum[:]))
}

// load reads the log's stored note, if any. The file holds the note the
// read endpoint serves; size and root come from its body.
func (ls *logState) load(dir, origin string) error {
	ls.file = stateFile(dir, origin)
	data, err := os.ReadFile(ls.file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("witness: reading the state of %q: %w", origin, err)
	}
	i := bytes.LastIndex(data, []byte("\n\n"))
	if i < 0 {
		return fmt.Errorf("witness: %s: malformed state file", ls.file)
	}
	got, size, root, err := ParseCheckpoint(string(data[:i+1]))
	if err != nil {
		return fmt.Errorf("witness: %s: %w", ls.file, err)
	}
	if got != origin {
		return fmt.Errorf("witness: %s holds origin %q, not %q", ls.file, got, origin)
	}
	ls.size, ls.root, ls.note = size, root, data
	ls.lastTime = lastCosigTime(data)
	return nil
}

// lastCosigTime is the timestamp of a stored note's last signature line,
// the witness's cosignature (0 when it does not decode as one).
func lastCosigTime(stored []byte) uint64 {
	text := strings.TrimSuffix(string(stored), "\n")
	line := text[strings.LastIndexByte(text, '\n')+1:]
	b64 := line[strings.LastIndexByte(line, ' ')+1:]
	sig, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sig) != 4+8+ed25519.SignatureSize {
		return 0
	}
	return binary.BigEndian.Uint64(sig[4:12])
}

// writeFileAtomic replaces path with data durably: a temp file in dir,
// written and fsynced, renamed over path, then dir fsynced.
func writeFileAtomic(dir, path string, data []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
