package state

import (
	"crypto/rand"
	"fmt"
	"strings"
)

// IDAlphabet is the RFC 4648 base32 alphabet in lower case: the characters
// of every random id (sessions s_…, approvals ap_…, runs ar_…).
const IDAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// RandomID returns prefix and n random IDAlphabet characters (5 bits each).
func RandomID(prefix string, n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a %s id: %w", prefix, err)
	}
	for i := range b {
		b[i] = IDAlphabet[b[i]&31]
	}
	return prefix + string(b), nil
}

// ValidID reports whether id has the form RandomID(prefix, n) produces, so
// that it is safe to use as a file name.
func ValidID(id, prefix string, n int) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) != n {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(IDAlphabet, rest[i]) < 0 {
			return false
		}
	}
	return true
}
