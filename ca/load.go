package ca

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names used by Save and LoadDir inside their directory.
const (
	CertFile = "ca.pem"     // the root certificate, mode 0644
	KeyFile  = "ca-key.pem" // the root's PKCS#8 private key, mode 0600
)

// maxPEMSize bounds how much LoadDir reads from each file.
const maxPEMSize = 1 << 20

// Load builds an Authority from a PEM certificate (the first CERTIFICATE
// block) and its PEM private key (PKCS#8 "PRIVATE KEY", SEC 1 "EC PRIVATE
// KEY" or PKCS#1 "RSA PRIVATE KEY"; encrypted keys are not supported).
// opts.CommonName and opts.Validity are ignored: the certificate keeps its own.
//
// Every failure wraps ErrInvalidOptions or ErrInvalidCA, and the message says
// which PEM is bad and why (no PEM block, unparsable, not a CA, lacking
// keyCertSign, key not matching the certificate, expired). An expired
// certificate also wraps ErrCAExpired. Errors never contain key material.
func Load(certPEM, keyPEM []byte, opts Options) (*Authority, error) {
	return load(certPEM, keyPEM, opts, "certificate PEM", "key PEM")
}

// LoadDir loads dir/ca.pem and dir/ca-key.pem as Load does. It refuses a key
// file that is not a regular file or whose mode grants group or others any
// access (wrapping ErrKeyPermissions, naming the file and suggesting chmod
// 600). Read failures wrap ErrIO and the underlying *fs.PathError (so
// errors.Is(err, fs.ErrNotExist) works); content failures wrap ErrInvalidCA and
// name the file.
func LoadDir(dir string, opts Options) (*Authority, error) {
	certPath := filepath.Join(dir, CertFile)
	keyPath := filepath.Join(dir, KeyFile)
	certPEM, err := readPEMFile(certPath, false)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readPEMFile(keyPath, true)
	if err != nil {
		return nil, err
	}
	defer clear(keyPEM)
	return load(certPEM, keyPEM, opts, certPath, keyPath)
}

// load implements Load; certName and keyName label the inputs in errors.
func load(certPEM, keyPEM []byte, opts Options, certName, keyName string) (*Authority, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidCA, certName, err)
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidCA, keyName, err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("%w: %s: certificate %q is not a CA (basic constraints CA:TRUE missing); "+
			"use a root CA certificate, not a leaf", ErrInvalidCA, certName, cert.Subject.CommonName)
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("%w: %s: certificate %q lacks the keyCertSign key usage, so it cannot sign leaves",
			ErrInvalidCA, certName, cert.Subject.CommonName)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%w: %s does not match %s (different public keys); pass the key that belongs to "+
			"this certificate", ErrInvalidCA, keyName, certName)
	}
	if now := opts.Now(); !now.Before(cert.NotAfter) {
		return nil, fmt.Errorf("%w: %s: the CA expired at %s; create a new CA (%w)",
			ErrInvalidCA, certName, cert.NotAfter.Format(time.RFC3339), ErrCAExpired)
	}
	return newAuthority(cert, key, opts), nil
}

// parseCertPEM returns the first CERTIFICATE block of data, parsed.
func parseCertPEM(data []byte) (*x509.Certificate, error) {
	var seen []string
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			seen = append(seen, b.Type)
			continue
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing the CERTIFICATE block: %w", err)
		}
		return cert, nil
	}
	return nil, fmt.Errorf("no CERTIFICATE PEM block found%s", describeSeen(seen, "certificate and key"))
}

// parseKeyPEM returns the first private key block of data as a signer.
func parseKeyPEM(data []byte) (crypto.Signer, error) {
	var seen []string
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return nil, fmt.Errorf("the private key is encrypted, which is not supported; " +
				"decrypt it first (openssl pkey -in KEY -out KEY.pem)")
		}
		var (
			k   any
			err error
		)
		switch b.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			seen = append(seen, b.Type)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parsing the %s block: %w", b.Type, err)
		}
		signer, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("the %s block holds a %T, which cannot sign certificates", b.Type, k)
		}
		return signer, nil
	}
	return nil, fmt.Errorf("no PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY PEM block found%s",
		describeSeen(seen, "key and certificate"))
}

// describeSeen explains which PEM blocks were found instead, hinting at a swap
// of the two inputs.
func describeSeen(seen []string, swapped string) string {
	if len(seen) == 0 {
		return " (the input holds no PEM data)"
	}
	return fmt.Sprintf(" (found %s; were the %s swapped?)", strings.Join(seen, ", "), swapped)
}

// readPEMFile reads a regular file of at most maxPEMSize bytes. When private,
// it refuses a file that group or others may access. Failures wrap ErrIO or
// ErrKeyPermissions.
func readPEMFile(path string, private bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIO, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file (mode %v)", ErrIO, path, fi.Mode())
	}
	if perm := fi.Mode().Perm(); private && perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o, so group or others can access the CA private key; "+
			"run: chmod 600 %s", ErrKeyPermissions, path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPEMSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", ErrIO, path, err)
	}
	if len(data) > maxPEMSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes; it is not a PEM certificate or key",
			ErrIO, path, maxPEMSize)
	}
	return data, nil
}

// Save writes the root certificate to dir/ca.pem (mode 0644) and its private
// key to dir/ca-key.pem (mode 0600, PKCS#8), each atomically through a temp
// file in dir and a rename, creating dir with mode 0700 if it is missing (an
// existing dir keeps its mode). Every failure wraps ErrIO.
func (a *Authority) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: creating CA directory: %w", ErrIO, err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return fmt.Errorf("%w: encoding the CA private key: %w", ErrIO, err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	clear(der)
	defer clear(keyPEM)
	if err := writeFileAtomic(filepath.Join(dir, KeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, CertFile), a.certPEM, 0o644); err != nil {
		return err
	}
	return syncDir(dir)
}

// writeFileAtomic writes data to a temp file next to path with exactly mode
// perm (independent of the umask), syncs it and renames it over path. Failures
// wrap ErrIO and leave no temp file behind.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("%w: creating temp file for %s: %w", ErrIO, path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("%w: setting mode of %s: %w", ErrIO, tmp, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%w: writing %s: %w", ErrIO, tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: syncing %s: %w", ErrIO, tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: closing %s: %w", ErrIO, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%w: renaming %s to %s: %w", ErrIO, tmp, path, err)
	}
	return nil
}

// syncDir flushes dir's entries so the renames survive a crash. Failures wrap
// ErrIO.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: syncing directory %s: %w", ErrIO, dir, err)
	}
	return nil
}
