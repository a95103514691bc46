package manifest

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/aileronhq/aileron/policy"
)

// tables lists, per table, the keys it accepts; the did-you-mean draws on it.
var tables = map[string][]string{
	"":                               {"connector", "capabilities", "provides"},
	"connector":                      {"name", "version", "provenance_hash"},
	"capabilities":                   {"network", "credential", "runtime"},
	"capabilities.network":           {"hosts"},
	"capabilities.credential":        {"kind", "scope", "oauth2"},
	"capabilities.credential.oauth2": {"authorize_url", "token_url", "client_id", "scopes", "client_secret", "token_endpoint_auth_method"},
	"capabilities.runtime":           {"imports"},
	"provides":                       {"intents"},
}

// checkUndecoded reports keys the format does not define, once per unknown
// table, with the nearest known key.
func checkUndecoded(md toml.MetaData, p *problems) {
	reported := map[string]bool{}
outer:
	for _, k := range md.Undecoded() {
		for i := 1; i < len(k); i++ {
			if reported[strings.Join(k[:i], ".")] {
				continue outer
			}
		}
		path := strings.Join(k, ".")
		reported[path] = true
		parent, name := strings.Join(k[:len(k)-1], "."), k[len(k)-1]
		known := tables[parent]
		msg := fmt.Sprintf("unknown key %s in %s", strconv.Quote(name), where(parent))
		if s, ok := policy.Closest(name, known); ok {
			msg += fmt.Sprintf(" (did you mean %s?)", strconv.Quote(s))
		}
		p.add(path, "unknown_key", msg+fmt.Sprintf("; remove it or fix its spelling (known: %s)", strings.Join(known, ", ")))
	}
}

func where(table string) string {
	if table == "" {
		return "the top level"
	}
	return "[" + table + "]"
}

// tomlMessage renders a decode error (syntax or wrong type) with its line.
func tomlMessage(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := fmt.Sprintf("TOML syntax error on line %d: %s", pe.Position.Line, pe.Message)
		if pe.LastKey != "" {
			msg += fmt.Sprintf(" (key %s)", strconv.Quote(pe.LastKey))
		}
		return msg + "; fix the file (strings are quoted, lists are [\"a\", \"b\"], tables are [name])"
	}
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	if i, j := strings.Index(msg, "struct {"), strings.LastIndex(msg, "}"); i >= 0 && j > i {
		msg = msg[:i] + "a table" + msg[j+1:]
	}
	return msg + "; check the key's type (strings are quoted, lists are [\"a\", \"b\"], tables are [name])"
}

// names checks a list of non-empty, printable, distinct strings.
func names(list []string, key string, p *problems) []string {
	var out []string
	seen := map[string]bool{}
	for i, s := range list {
		k := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case s == "" || strings.TrimSpace(s) != s:
			p.add(k, "name_empty", fmt.Sprintf("entry %s is empty or has surrounding spaces; write the bare name", strconv.Quote(s)))
		case strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r == 0x7f }):
			p.add(k, "name_chars", fmt.Sprintf("entry %s holds spaces or control characters; a name is one word", strconv.Quote(s)))
		case seen[s]:
			p.add(k, "name_duplicate", fmt.Sprintf("%s is listed twice; list it once", strconv.Quote(s)))
		default:
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// httpsURL checks an absolute https URL without user information or
// fragment.
func httpsURL(s *string, name string, p *problems) string {
	key := "capabilities.credential.oauth2." + name
	if s == nil || *s == "" {
		p.add(key, "required", fmt.Sprintf("the oauth2 table needs %s, an https:// URL of the publisher's OAuth provider", name))
		return ""
	}
	u, err := url.Parse(*s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		p.add(key, "oauth2_url", fmt.Sprintf("%s is not an absolute https:// URL without user information or fragment; write e.g. \"https://auth.example.com/oauth/%s\"",
			strconv.Quote(*s), strings.TrimSuffix(name, "_url")))
		return ""
	}
	if _, err := policy.ParseAuthority(u.Host, 443); err != nil {
		p.add(key, "oauth2_url", fmt.Sprintf("%s has an invalid host: %v", strconv.Quote(*s), err))
		return ""
	}
	return *s
}
