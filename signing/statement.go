package signing

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// Namespace is the SSH signature namespace of a package statement: a
// signature made for another purpose (git commits sign in "git", files in
// "file") never verifies as a package signature.
const Namespace = "aileron-connector"

// statementVersion is the first line of a statement; a later format gets a
// new one.
const statementVersion = "aileron-connector-statement v1"

// Statement returns the canonical statement a publisher signs for a
// package: four lines, each ending in a newline,
//
//	aileron-connector-statement v1
//	fqn github://acme/aileron-connector-google
//	version 1.2.3
//	sha256 <64 lower-case hex digits: the package hash>
//
// The publisher signs it with
//
//	ssh-keygen -Y sign -n aileron-connector -f KEY statement
//
// and ships statement.sig as aileron.connector.sig at the package root.
// Statement does not check its arguments; ParseStatement does.
func Statement(fqn, version, hash string) []byte {
	return []byte(statementVersion + "\nfqn " + fqn + "\nversion " + version + "\nsha256 " + hash + "\n")
}

// ParseStatement reads a statement made by Statement and returns its FQN,
// version and package hash. Anything else (another version line, a missing
// or extra line, a value that is not a valid FQN, strict SemVer or
// lower-case hex SHA-256) is an error.
func ParseStatement(b []byte) (fqn, version, hash string, err error) {
	if !bytes.HasSuffix(b, []byte("\n")) {
		return "", "", "", errors.New("statement: does not end in a newline")
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	if len(lines) != 4 {
		return "", "", "", fmt.Errorf("statement: %d lines, want 4", len(lines))
	}
	if lines[0] != statementVersion {
		return "", "", "", fmt.Errorf("statement: line 1 is %q, want %q", lines[0], statementVersion)
	}
	vals := make([]string, 3)
	for i, key := range []string{"fqn", "version", "sha256"} {
		v, ok := strings.CutPrefix(lines[i+1], key+" ")
		if !ok {
			return "", "", "", fmt.Errorf("statement: line %d does not start with %q", i+2, key+" ")
		}
		vals[i] = v
	}
	fqn, version, hash = vals[0], vals[1], vals[2]
	if err := policy.CheckFQN(fqn); err != nil {
		return "", "", "", fmt.Errorf("statement: %w", err)
	}
	if err := policy.CheckSemVer(version); err != nil {
		return "", "", "", fmt.Errorf("statement: %w", err)
	}
	if !isHexHash(hash) {
		return "", "", "", fmt.Errorf("statement: sha256 %q is not 64 lower-case hex digits", hash)
	}
	return fqn, version, hash, nil
}

// isHexHash reports whether s is a lower-case hex SHA-256.
func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
