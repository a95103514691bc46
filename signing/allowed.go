package signing

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Signer is one line of an allowed_signers file: a key and when, and for
// what, it may sign.
type Signer struct {
	// Line is the line's number in its file (1-based).
	Line int `json:"line"`
	// Principals is the principals field as written (comma-separated). It
	// names who holds the key; it is shown, not matched against anything:
	// the file as a whole belongs to one authority.
	Principals string `json:"principals"`
	// Namespaces is the namespaces="…" pattern list; empty means any.
	Namespaces string `json:"namespaces,omitempty"`
	// ValidAfter and ValidBefore bound when the key may sign (both
	// inclusive); zero means unbounded.
	ValidAfter  time.Time `json:"valid_after,omitzero"`
	ValidBefore time.Time `json:"valid_before,omitzero"`
	// KeyType and Fingerprint describe Key: its type (ssh-ed25519) and
	// its SHA256:… fingerprint, as ssh-keygen -l shows it.
	KeyType     string `json:"key_type"`
	Fingerprint string `json:"fingerprint"`
	// Key is the signer's public key.
	Key ssh.PublicKey `json:"-"`
}

// ValidAt reports whether the signer may sign package statements at t:
// within its validity period and with Namespace among its namespaces.
func (s Signer) ValidAt(t time.Time) bool {
	if !s.ValidAfter.IsZero() && t.Before(s.ValidAfter) || !s.ValidBefore.IsZero() && t.After(s.ValidBefore) {
		return false
	}
	return s.Namespaces == "" || matchPatternList(Namespace, s.Namespaces)
}

// ParseAllowedSigners parses an allowed_signers file in ssh's format (see
// ssh-keygen(1), ALLOWED SIGNERS): one signer a line,
//
//	principals [options] keytype base64-key [comment]
//
// with blank lines and lines starting with '#' ignored. The options are
// namespaces="…", valid-after="…" and valid-before="…" (timestamps
// YYYYMMDD[HHMM[SS]] and a Z: UTC, so that every node agrees on when a key
// is valid). cert-authority, unknown options and certificate keys are
// refused: list each signing key itself. name names the file in errors,
// each of which gives the line number; every bad line is reported.
func ParseAllowedSigners(name string, data []byte) ([]Signer, error) {
	var signers []Signer
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSignerLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, i+1, err))
			if len(errs) == 20 {
				errs = append(errs, fmt.Errorf("%s: more errors follow; fix these first", name))
				break
			}
			continue
		}
		s.Line = i + 1
		signers = append(signers, s)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return signers, nil
}

// parseSignerLine parses one non-comment line.
func parseSignerLine(line string) (Signer, error) {
	fields, err := splitFields(line)
	if err != nil {
		return Signer{}, err
	}
	var s Signer
	s.Principals = unquote(fields[0])
	if s.Principals == "" {
		return Signer{}, errors.New("the principals field is empty; name the key's owner, e.g. alice@acme.example")
	}
	rest := fields[1:]
	if len(rest) > 0 && !isKeyType(rest[0]) {
		if err := s.parseOptions(rest[0]); err != nil {
			return Signer{}, err
		}
		rest = rest[1:]
	}
	if len(rest) < 2 {
		return Signer{}, errors.New("no key: want principals [options] keytype base64-key, e.g. alice@acme.example ssh-ed25519 AAAAC3Nza…")
	}
	s.Key, err = parseKey(rest[0], rest[1])
	if err != nil {
		return Signer{}, err
	}
	s.KeyType, s.Fingerprint = s.Key.Type(), ssh.FingerprintSHA256(s.Key)
	return s, nil
}

// splitFields splits line at whitespace outside double quotes.
func splitFields(line string) ([]string, error) {
	var fields []string
	start, quoted := -1, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			quoted = !quoted
			if start < 0 {
				start = i
			}
		case (c == ' ' || c == '\t') && !quoted:
			if start >= 0 {
				fields = append(fields, line[start:i])
				start = -1
			}
		case start < 0:
			start = i
		}
	}
	if quoted {
		return nil, errors.New("a double quote is not closed")
	}
	if start >= 0 {
		fields = append(fields, line[start:])
	}
	return fields, nil
}

// unquote removes one pair of surrounding double quotes.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// keyTypes are the key types ssh signs with; certificates are refused,
// and so is DSA (the last), which is recognised only to say so.
var keyTypes = []string{
	ssh.KeyAlgoED25519, ssh.KeyAlgoRSA, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256, ssh.KeyAlgoDSA,
}

// isKeyType reports whether field names a key type, certificates included.
func isKeyType(field string) bool {
	for _, t := range keyTypes {
		if field == t || strings.TrimSuffix(field, "-cert-v01@openssh.com") == t {
			return true
		}
	}
	return false
}

// parseKey reads a keytype and base64-key pair.
func parseKey(keyType, b64 string) (ssh.PublicKey, error) {
	if strings.HasSuffix(keyType, "-cert-v01@openssh.com") {
		return nil, fmt.Errorf("key type %s is a certificate; list the signing key itself (certificates and cert-authority are not supported)", keyType)
	}
	if !isKeyType(keyType) {
		return nil, fmt.Errorf("unknown key type %q; want one of %s", keyType, strings.Join(keyTypes[:len(keyTypes)-1], ", "))
	}
	if keyType == ssh.KeyAlgoDSA {
		return nil, errors.New("ssh-dss (DSA) keys sign with SHA-1 and 1024-bit keys, and OpenSSH no longer supports them; " +
			"list an ssh-ed25519, ECDSA or RSA key instead")
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("the %s key is not valid base64: %v", keyType, err)
	}
	key, err := ssh.ParsePublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("the %s key does not parse: %v", keyType, err)
	}
	if key.Type() != keyType {
		return nil, fmt.Errorf("the key is a %s key, but the line says %s", key.Type(), keyType)
	}
	return key, nil
}

// parseOptions reads the comma-separated options field into s.
func (s *Signer) parseOptions(field string) error {
	seen := map[string]bool{}
	for _, opt := range splitOptions(field) {
		name, value, hasValue := strings.Cut(opt, "=")
		name = strings.ToLower(name)
		if seen[name] {
			return fmt.Errorf("option %s appears twice", name)
		}
		seen[name] = true
		if name == "cert-authority" {
			return errors.New("cert-authority is not supported: list each signing key on a line of its own")
		}
		if name != "namespaces" && name != "valid-after" && name != "valid-before" {
			return fmt.Errorf("unknown option %q (or an unknown key type); the options are namespaces, valid-after and valid-before", name)
		}
		if !hasValue || len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
			return fmt.Errorf(`option %s needs a double-quoted value, e.g. %s="…"`, name, name)
		}
		value = value[1 : len(value)-1]
		if err := s.setOption(name, value); err != nil {
			return err
		}
	}
	if !s.ValidAfter.IsZero() && !s.ValidBefore.IsZero() && !s.ValidAfter.Before(s.ValidBefore) {
		return fmt.Errorf("valid-after (%s) is not before valid-before (%s)", stamp(s.ValidAfter), stamp(s.ValidBefore))
	}
	return nil
}

// setOption sets the option name (validated) to value (unquoted).
func (s *Signer) setOption(name, value string) error {
	if name == "namespaces" {
		if value == "" || strings.ContainsAny(value, "\" \t") {
			return fmt.Errorf("namespaces=%q: want a comma-separated list such as \"aileron-connector\"", value)
		}
		s.Namespaces = value
		return nil
	}
	t, err := parseTimestamp(value)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if name == "valid-after" {
		s.ValidAfter = t
	} else {
		s.ValidBefore = t
	}
	return nil
}

// splitOptions splits an options field at commas outside double quotes.
func splitOptions(field string) []string {
	var opts []string
	start, quoted := 0, false
	for i := 0; i < len(field); i++ {
		switch field[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				opts = append(opts, field[start:i])
				start = i + 1
			}
		}
	}
	return append(opts, field[start:])
}

// parseTimestamp reads YYYYMMDDZ, YYYYMMDDHHMMZ or YYYYMMDDHHMMSSZ.
func parseTimestamp(v string) (time.Time, error) {
	digits, utc := strings.CutSuffix(v, "Z")
	if !utc {
		return time.Time{}, fmt.Errorf("timestamp %q has no Z: write it in UTC with a Z suffix (e.g. %q), so that every node agrees on when the key is valid", v, v+"Z")
	}
	layouts := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}
	layout, ok := layouts[len(digits)]
	if ok && strings.Trim(digits, "0123456789") == "" {
		if t, err := time.Parse(layout, digits); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp %q is not YYYYMMDDZ, YYYYMMDDHHMMZ or YYYYMMDDHHMMSSZ", v)
}

// stamp formats t as an allowed_signers timestamp.
func stamp(t time.Time) string { return t.UTC().Format("20060102150405") + "Z" }

// matchPatternList reports whether s matches the comma-separated pattern
// list, as ssh's match_pattern_list does: a negated pattern (!p) that
// matches rejects s outright; otherwise any matching pattern accepts it.
func matchPatternList(s, list string) bool {
	matched := false
	for _, p := range strings.Split(list, ",") {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if matchPattern(s, p) {
			if neg {
				return false
			}
			matched = true
		}
	}
	return matched
}

// matchPattern matches s against a pattern of '*' (any run) and '?' (any
// byte), in time linear in len(s)*len(p).
func matchPattern(s, p string) bool {
	si, pi, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si, pi = si+1, pi+1
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// sameKey reports whether a and b are the same public key.
func sameKey(a, b ssh.PublicKey) bool { return bytes.Equal(a.Marshal(), b.Marshal()) }
