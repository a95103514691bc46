package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DefaultPort is the port of a spec host entry that names none.
const DefaultPort = 443

// Authority is a canonical host and a port. Host is the output of
// CanonicalHost: lower-case ASCII (punycode), no trailing dot, or an IP
// address in canonical text form without brackets.
type Authority struct {
	Host string
	Port int
}

// String renders host:port, with brackets around an IPv6 host.
func (a Authority) String() string {
	p := strconv.Itoa(a.Port)
	if strings.IndexByte(a.Host, ':') >= 0 {
		return "[" + a.Host + "]:" + p
	}
	return a.Host + ":" + p
}

// CanonicalHost returns the canonical form of a host name or IP literal:
// lower-case, internationalised names converted to punycode with the IDNA
// lookup profile, one trailing dot removed, IPv4 in dotted-quad form and
// IPv6 (given bare or in brackets, without a zone) in its canonical text
// form without brackets. Names whose last label is numeric (such as
// "2130706433" or "foo.0x7f"), which resolvers may read as IPv4 addresses,
// are rejected. Every failure wraps ErrBadHost.
func CanonicalHost(h string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("%w: host is empty", ErrBadHost)
	}
	if h[0] == '[' {
		if len(h) < 2 || h[len(h)-1] != ']' {
			return "", fmt.Errorf("%w: host %s has an unclosed '['", ErrBadHost, quote(h))
		}
		return canonicalIPv6(h[1 : len(h)-1])
	}
	if strings.IndexByte(h, ':') >= 0 {
		if a, err := netip.ParseAddr(h); err == nil && a.Is6() {
			return canonicalIPv6(h)
		}
		return "", fmt.Errorf("%w: host %s contains ':'; give the port separately", ErrBadHost, quote(h))
	}
	if strings.IndexByte(h, '@') >= 0 {
		return "", fmt.Errorf("%w: host %s contains user information ('@'); remove everything up to and including '@'", ErrBadHost, quote(h))
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if c < 0x80 && !isAlnum(c) && c != '-' && c != '.' {
			return "", fmt.Errorf("%w: host %s contains %s; host names use only letters, digits, dots and dashes",
				ErrBadHost, quote(h), quote(string(rune(c))))
		}
	}
	if !utf8.ValidString(h) {
		return "", fmt.Errorf("%w: host %s is not valid UTF-8", ErrBadHost, quote(h))
	}
	name := strings.TrimSuffix(h, ".")
	if strings.Trim(name, "0123456789.") == "" {
		if a, err := netip.ParseAddr(name); err == nil && a.Is4() {
			return a.String(), nil
		}
	}
	lower, ascii := fastASCIIHost(name)
	if !ascii {
		out, err := idna.Lookup.ToASCII(name)
		if err == nil {
			// The result must be a fixed point, or two spellings of one
			// host could canonicalise differently.
			if again, err2 := idna.Lookup.ToASCII(out); err2 != nil || again != out {
				err = fmt.Errorf("does not round-trip through IDNA (%s)", quote(again))
			}
		}
		if err != nil {
			return "", fmt.Errorf("%w: host %s is not a valid internationalised domain name: %v", ErrBadHost, quote(h), err)
		}
		lower = strings.ToLower(out)
	}
	if msg := dnsNameProblem(lower); msg != "" {
		return "", fmt.Errorf("%w: host %s %s", ErrBadHost, quote(h), msg)
	}
	return lower, nil
}

func canonicalIPv6(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return "", fmt.Errorf("%w: %s is not an IPv6 address (only IPv6 literals go in brackets)", ErrBadHost, quote(s))
	}
	if a.Zone() != "" {
		return "", fmt.Errorf("%w: IPv6 address %s has a zone; zones are not allowed", ErrBadHost, quote(s))
	}
	return a.String(), nil
}

// fastASCIIHost returns the lower-cased name and true when name is plain
// ASCII letters, digits, dots and dashes with no label that IDNA would need
// to inspect ("xn--…" or "--" in positions 3-4). It allocates only when
// name has upper-case letters.
func fastASCIIHost(name string) (string, bool) {
	upper := false
	labelStart := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '.' {
			if i-labelStart >= 4 && name[labelStart+2] == '-' && name[labelStart+3] == '-' {
				return "", false
			}
			labelStart = i + 1
			continue
		}
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case isAlnum(c) || c == '-':
		default:
			return "", false
		}
	}
	if upper {
		return strings.ToLower(name), true
	}
	return name, true
}

// dnsNameProblem checks an ASCII, lower-case host name: at most 253 bytes,
// labels of 1 to 63 letters, digits or dashes, not starting or ending with
// a dash, and a last label that does not look like a number.
func dnsNameProblem(h string) string {
	if h == "" {
		return "is empty"
	}
	if len(h) > 253 {
		return "is longer than 253 bytes"
	}
	labelStart := 0
	for i := 0; i <= len(h); i++ {
		if i < len(h) && h[i] != '.' {
			c := h[i]
			if !isAlnum(c) && c != '-' {
				return fmt.Sprintf("contains %s", quote(string(rune(c))))
			}
			continue
		}
		label := h[labelStart:i]
		switch {
		case label == "":
			return "has an empty label (\"..\", a leading dot or more than one trailing dot)"
		case len(label) > 63:
			return "has a label longer than 63 bytes"
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Sprintf("has label %s starting or ending with '-'", quote(label))
		}
		labelStart = i + 1
	}
	last := h[strings.LastIndexByte(h, '.')+1:]
	if allDigits(last) || (len(last) > 2 && last[0] == '0' && last[1] == 'x' && isHexString(last[2:])) {
		return "ends in a numeric label; resolvers may read it as an IPv4 address, write the address in dotted-quad form instead"
	}
	return ""
}

func isHexString(s string) bool {
	for i := 0; i < len(s); i++ {
		if unhex(s[i]) < 0 {
			return false
		}
	}
	return true
}

// ParseAuthority parses "host", "host:port", "[ipv6]" or "[ipv6]:port"
// (the form of a CONNECT target or a Host header) into a canonical
// Authority. defaultPort is used when s names no port; a defaultPort of 0
// makes the port mandatory. It rejects an empty or missing host, an empty,
// non-numeric, zero-padded, zero or out-of-range port, user information,
// paths, queries, fragments and unbracketed IPv6. Every failure wraps
// ErrBadAuthority.
func ParseAuthority(s string, defaultPort int) (Authority, error) {
	host, port, hasPort, rule, msg := splitAuthority(s)
	if rule != "" {
		return Authority{}, fmt.Errorf("%w: %s", ErrBadAuthority, msg)
	}
	p := defaultPort
	if hasPort {
		var ok bool
		if p, ok = parsePort(port); !ok {
			return Authority{}, fmt.Errorf("%w: authority %s has invalid port %s; use a number from 1 to 65535", ErrBadAuthority, quote(s), quote(port))
		}
	} else if p < 1 || p > 65535 {
		return Authority{}, fmt.Errorf("%w: authority %s names no port", ErrBadAuthority, quote(s))
	}
	h, err := CanonicalHost(host)
	if err != nil {
		return Authority{}, fmt.Errorf("%w: %w", ErrBadAuthority, err)
	}
	return Authority{Host: h, Port: p}, nil
}

// splitAuthority splits an authority into host and port text, classifying
// what is wrong with it by spec rule.
func splitAuthority(s string) (host, port string, hasPort bool, rule, msg string) {
	switch {
	case s == "":
		return "", "", false, ruleHostEmpty, "host is empty"
	case strings.Contains(s, "://"):
		return "", "", false, ruleHostScheme, fmt.Sprintf("host must not include a URL scheme (%s)", quote(s))
	case strings.IndexByte(s, '@') >= 0:
		return "", "", false, ruleHostUserinfo, fmt.Sprintf("host must not include user information (%s)", quote(s))
	case strings.IndexByte(s, '/') >= 0:
		return "", "", false, ruleHostPath, fmt.Sprintf("host must not include a path (%s)", quote(s))
	case strings.IndexByte(s, '?') >= 0:
		return "", "", false, ruleHostQuery, fmt.Sprintf("host must not include a query (%s)", quote(s))
	case strings.IndexByte(s, '#') >= 0:
		return "", "", false, ruleHostFragment, fmt.Sprintf("host must not include a fragment (%s)", quote(s))
	case strings.IndexByte(s, '*') >= 0:
		return "", "", false, ruleHostWildcard, fmt.Sprintf("host must not be a wildcard (%s); list every host explicitly", quote(s))
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, ruleHostChars, fmt.Sprintf("host %s has an unclosed '['", quote(s))
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, "", false, "", ""
		}
		if rest[0] != ':' {
			return "", "", false, ruleHostChars, fmt.Sprintf("host %s has text after ']' that is not a port", quote(s))
		}
		return host, rest[1:], true, "", ""
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, "", ""
	case 1:
		host, port, _ = strings.Cut(s, ":")
		if host == "" {
			return "", "", false, ruleHostEmpty, fmt.Sprintf("host is missing before the port (%s)", quote(s))
		}
		return host, port, true, "", ""
	}
	return "", "", false, ruleHostIPv6, fmt.Sprintf("IPv6 literal %s must be in brackets, e.g. \"[2001:db8::1]:443\"", quote(s))
}

// parsePort parses a decimal port 1-65535 without sign or leading zeros.
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' || !allDigits(s) {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return n, true
}

// parseHostEntry parses one operations[].hosts[] entry. On failure it
// returns the rule broken and a message with a suggested fix.
func parseHostEntry(s string) (Authority, string, string) {
	host, port, hasPort, rule, msg := splitAuthority(s)
	if rule != "" {
		if fix := suggestHost(s); fix != "" && fix != s && rule != ruleHostEmpty && rule != ruleHostIPv6 && rule != ruleHostWildcard {
			msg += fmt.Sprintf("; write just the host, e.g. %s", quote(fix))
		}
		return Authority{}, rule, msg
	}
	p := DefaultPort
	if hasPort {
		var ok bool
		if p, ok = parsePort(port); !ok {
			return Authority{}, ruleHostPort, fmt.Sprintf("host %s has invalid port %s; use a number from 1 to 65535 without leading zeros, or omit it for 443", quote(s), quote(port))
		}
	}
	h, err := CanonicalHost(host)
	if err != nil {
		return Authority{}, ruleHostChars, strings.TrimPrefix(err.Error(), ErrBadHost.Error()+": ")
	}
	return Authority{Host: h, Port: p}, "", ""
}

// suggestHost strips scheme, user information, path, query and fragment
// from a URL-like host entry.
func suggestHost(s string) string {
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
