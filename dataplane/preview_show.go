package dataplane

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aileronhq/aileron/printable"
)

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

// Show returns the body for reading, made safe to show (printable.Text),
// cut after about limit bytes (limit <= 0: never), and how many bytes of
// the reading it left out. JSON shows pretty-printed, text and forms as
// sent, binary as a hex dump.
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
		return printable.Text(s), 0
	}
	cut := printable.Cut(s, limit)
	return printable.Text(s[:cut]), len(s) - cut
}

// RawRequest renders the whole request as it will be sent, nothing cut,
// every line made safe to show (printable): the request line, Host, the
// forwarded headers, a note of what the proxy adds, and the body (a hex
// dump if binary).
func (p *Preview) RawRequest() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\nHost: %s\n", printable.Line(p.Method), printable.Line(p.requestTarget()),
		printable.Line(strings.TrimSuffix(p.Host, ":443"))) // the Host line an upstream reads
	for _, h := range p.Headers {
		fmt.Fprintf(&b, "%s: %s\n", printable.Line(h.Name), printable.Line(h.Value))
	}
	if p.Credential != "" {
		fmt.Fprintf(&b, "(credential: %s)\n", p.Credential)
	}
	b.WriteString("\n")
	if p.Body != nil {
		if p.Body.Kind == BodyBinary {
			b.WriteString(hex.Dump(p.Body.Raw))
		} else {
			b.WriteString(printable.Text(string(p.Body.Raw)))
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
