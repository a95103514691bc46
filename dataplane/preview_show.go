package dataplane

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable makes s safe to show a human on a terminal or a page: control
// characters, invisible and direction-changing characters (U+202E, U+200B,
// …) and bytes that are not UTF-8 become visible escapes (\x1b, \r,
// \u202e, \xff), so a value cannot rewrite the approver's screen or hide
// part of itself. With multiline, newlines and tabs stay as they are.
func Printable(s string, multiline bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case multiline && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && (r < 0x20 || r == 0x7f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r != ' ' && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Target is the request's host and target as sent: host[:port], the
// escaped path and any raw query.
func (p *Preview) Target() string { return p.Host + p.requestTarget() }

// requestTarget is the escaped path and any raw query: the request line's.
func (p *Preview) requestTarget() string {
	if p.Query != "" {
		return p.Path + "?" + p.Query
	}
	return p.Path
}

// Undeclared names the fields the operation's spec does not declare, as
// "source name", in request order.
func (p *Preview) Undeclared() []string {
	var out []string
	for _, f := range p.Fields {
		if !f.Declared {
			out = append(out, f.Source+" "+f.Name)
		}
	}
	return out
}

// Show returns the body for reading, made Printable, cut after about limit
// bytes (limit <= 0: never), and how many bytes of the reading it left out.
// JSON shows pretty-printed, text and forms as sent, binary as a hex dump.
func (b *PreviewBody) Show(limit int) (string, int) {
	var s string
	switch {
	case b.Kind == BodyJSON && b.Text != "":
		s = b.Text
	case b.Kind == BodyBinary:
		s = hex.Dump(b.Raw)
	default:
		s = string(b.Raw)
	}
	if limit <= 0 {
		return Printable(s, true), 0
	}
	cut := runeCut(s, limit)
	return Printable(s[:cut], true), len(s) - cut
}

// Clip returns Printable(s) cut after about limit bytes, saying how many
// more bytes there are.
func Clip(s string, limit int) string {
	cut := runeCut(s, limit)
	if cut == len(s) {
		return Printable(s, false)
	}
	return Printable(s[:cut], false) + fmt.Sprintf(" … %d more bytes", len(s)-cut)
}

// runeCut is where to cut s to at most limit bytes without splitting a
// UTF-8 sequence: len(s) when it fits.
func runeCut(s string, limit int) int {
	if len(s) <= limit {
		return len(s)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return cut
}

// RawRequest renders the whole request as it will be sent, nothing cut,
// every line Printable: the request line, Host, the forwarded headers, a
// note of what the proxy adds, and the body (a hex dump if binary).
func (p *Preview) RawRequest() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\nHost: %s\n", Printable(p.Method, false), Printable(p.requestTarget(), false),
		Printable(strings.TrimSuffix(p.Host, ":443"), false)) // the Host line an upstream reads
	for _, h := range p.Headers {
		fmt.Fprintf(&b, "%s: %s\n", Printable(h.Name, false), Printable(h.Value, false))
	}
	if p.Credential != "" {
		fmt.Fprintf(&b, "(credential: %s)\n", p.Credential)
	}
	b.WriteString("\n")
	if p.Body != nil {
		if p.Body.Kind == BodyBinary {
			b.WriteString(hex.Dump(p.Body.Raw))
		} else {
			b.WriteString(Printable(string(p.Body.Raw), true))
		}
	}
	if !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n") // a display ends its last line; the body's bytes are in --json
	}
	return b.String()
}

// InputFields lists an action's arguments (Inputs) sorted by name, each
// value a string as it is and anything else as compact JSON.
func (p *Preview) InputFields() []PreviewField {
	out := make([]PreviewField, 0, len(p.Inputs))
	for k, v := range p.Inputs {
		s, ok := v.(string)
		if !ok {
			b, err := json.Marshal(v)
			if err != nil {
				b = []byte(fmt.Sprint(v))
			}
			s = string(b)
		}
		out = append(out, PreviewField{Source: "action", Name: k, Value: s, Declared: true})
	}
	slices.SortFunc(out, func(a, b PreviewField) int { return strings.Compare(a.Name, b.Name) })
	return out
}
