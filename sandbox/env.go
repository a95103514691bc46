package sandbox

import (
	"sort"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/sessions"
)

// NoProxy is the NO_PROXY value given to sandboxes: loopback stays local.
const NoProxy = "localhost,127.0.0.1,::1"

// EnvVar is one environment variable.
type EnvVar struct {
	Name  string
	Value string
}

// Env returns the environment that sends a sandbox's HTTP clients through
// session info's proxy and makes them trust its CA:
//
//   - HTTPS_PROXY, HTTP_PROXY and their lower-case forms (curl honours only
//     lower-case http_proxy) → info.ProxyURL, which carries the token;
//   - NO_PROXY / no_proxy → localhost and the loopback addresses;
//   - SSL_CERT_FILE (OpenSSL, Go, Python ssl), REQUESTS_CA_BUNDLE (requests),
//     CURL_CA_BUNDLE (curl), NODE_EXTRA_CA_CERTS (Node), GIT_SSL_CAINFO (git)
//     → info.CABundlePath, the session CA plus the system roots, because
//     passthrough hosts present their real certificates;
//   - NODE_USE_ENV_PROXY=1, which makes Node ≥ 24 honour the proxy variables;
//   - AILERON_SESSION_ID, and AILERON_API_URL when apiURL is not empty;
//   - one variable per placeholder binding (e.g. LINEAR_API_KEY), holding a
//     placeholder the proxy swaps for the real credential, sorted by name.
//
// info must come from Create or Get (List leaves ProxyURL empty).
func Env(info sessions.Info, apiURL string) []EnvVar {
	vars := []EnvVar{
		{"HTTPS_PROXY", info.ProxyURL},
		{"HTTP_PROXY", info.ProxyURL},
		{"https_proxy", info.ProxyURL},
		{"http_proxy", info.ProxyURL},
		{"NO_PROXY", NoProxy},
		{"no_proxy", NoProxy},
		{"SSL_CERT_FILE", info.CABundlePath},
		{"REQUESTS_CA_BUNDLE", info.CABundlePath},
		{"CURL_CA_BUNDLE", info.CABundlePath},
		{"NODE_EXTRA_CA_CERTS", info.CABundlePath},
		{"GIT_SSL_CAINFO", info.CABundlePath},
		{"NODE_USE_ENV_PROXY", "1"},
		{"AILERON_SESSION_ID", info.ID},
	}
	if apiURL != "" {
		vars = append(vars, EnvVar{"AILERON_API_URL", apiURL})
	}
	names := make([]string, 0, len(info.Placeholders))
	for name := range info.Placeholders {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		vars = append(vars, EnvVar{name, info.Placeholders[name]})
	}
	return vars
}

// RenderShell renders vars as POSIX shell `export NAME='value'` lines, safe
// to eval: each value is single-quoted, and an embedded single quote closes
// the quoting, is written backslash-escaped, and reopens it.
// A name that is not a shell identifier cannot be exported safely; it is
// rendered as a comment (Go-quoted, so a newline in it cannot end the
// comment).
func RenderShell(vars []EnvVar) string {
	var b strings.Builder
	for _, v := range vars {
		if !isShellName(v.Name) {
			b.WriteString("# skipped: not a shell variable name: ")
			b.WriteString(strconv.Quote(v.Name))
			b.WriteByte('\n')
			continue
		}
		b.WriteString("export ")
		b.WriteString(v.Name)
		b.WriteByte('=')
		b.WriteString(shellQuote(v.Value))
		b.WriteByte('\n')
	}
	return b.String()
}

// isShellName reports whether s is a POSIX shell variable name:
// [A-Za-z_][A-Za-z0-9_]*.
func isShellName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
