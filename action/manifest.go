package action

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// MaxManifestSize is the largest action.md Parse reads, in bytes.
const MaxManifestSize = 1 << 20

// Manifest is one parsed, validated action.md. Values returned by Parse and
// LoadPackage are read-only.
type Manifest struct {
	Name    string
	Version string
	Source  string
	// Description is the Markdown body after the front matter, trimmed.
	Description string
	// Requires lists the connectors the action needs ([[requires.connectors]]).
	Requires []Requirement
	// Intent is [match] intent.
	Intent string
	// Steps are the [[execute]] steps in order; there is at least one.
	Steps    []Step
	Approval Approval
	Inputs   []Input
	// Timeout is the run's deadline ("timeout", MinTimeout..MaxTimeout),
	// counted from when its steps start executing; 0 means the daemon's
	// actions.default_timeout.
	Timeout time.Duration
	// File is the manifest's origin, used in messages.
	File string
}

// Requirement is one [[requires.connectors]] entry.
type Requirement struct {
	Name    string // connector FQN
	Version string
	// Hash is "sha256:<64 lower-case hex>" once bound, or a placeholder such
	// as "sha256:bound-at-release" (or empty) before release.
	Hash         string
	Capabilities []string
}

// Bound reports whether Hash is a real digest "sha256:<64 hex>" rather
// than a placeholder.
func (r Requirement) Bound() bool {
	d, ok := strings.CutPrefix(r.Hash, "sha256:")
	return ok && len(d) == 64 && isLowerHex(d)
}

// Step is one [[execute]] step.
type Step struct {
	ID        string
	Connector string // connector FQN
	Op        string // operation name
	// Tool optionally names the tool holding Op, for an operation name
	// several tools of the connector use.
	Tool       string
	Idempotent bool
	// Inputs are the operation's arguments, possibly holding templates
	// (see Expand). Values are strings, int64, float64, bools,
	// []any and map[string]any. Nil (no inputs table) means: pass the
	// action's arguments through unchanged; an empty table sends none.
	Inputs map[string]any
}

// Approval is the [approval] table.
type Approval struct {
	Required bool
	// Preview is shown to the approver; it may hold ${args.NAME} templates.
	Preview string
}

// Input is one [[inputs]] entry: an argument of the action.
type Input struct {
	Name string
	// Type is free-form ("string", "integer", "String", "DateTime",
	// "[String]"…); "string" when the manifest gives none. See
	// Manifest.InputSchema for how types map to JSON Schema.
	Type        string
	Description string
	Label       string
	// Required is true unless the manifest says required = false.
	Required  bool
	Multiline bool
	// ItemsType is the element type of an array input.
	ItemsType string
}

// rawManifest mirrors the front matter for decoding.
type rawManifest struct {
	Name     string `toml:"name"`
	Version  string `toml:"version"`
	Source   string `toml:"source"`
	Requires struct {
		Connectors []rawRequirement `toml:"connectors"`
	} `toml:"requires"`
	Match struct {
		Intent string `toml:"intent"`
	} `toml:"match"`
	Execute  []rawStep `toml:"execute"`
	Approval struct {
		Required bool   `toml:"required"`
		Preview  string `toml:"preview"`
	} `toml:"approval"`
	Inputs  []rawInput `toml:"inputs"`
	Timeout *string    `toml:"timeout"`
}

type rawRequirement struct {
	Name         string   `toml:"name"`
	Version      string   `toml:"version"`
	Hash         string   `toml:"hash"`
	Capabilities []string `toml:"capabilities"`
}

type rawStep struct {
	ID         string         `toml:"id"`
	Connector  string         `toml:"connector"`
	Op         string         `toml:"op"`
	Tool       string         `toml:"tool"`
	Idempotent bool           `toml:"idempotent"`
	Inputs     map[string]any `toml:"inputs"`
}

type rawInput struct {
	Name        string  `toml:"name"`
	Type        *string `toml:"type"`
	Description string  `toml:"description"`
	Label       string  `toml:"label"`
	Required    *bool   `toml:"required"`
	Multiline   bool    `toml:"multiline"`
	ItemsType   string  `toml:"items_type"`
}

// Parse decodes and fully validates one action.md. file names it in error
// messages. On failure it returns every problem found, joined with
// errors.Join; each is a *ValidationError wrapping ErrInvalidAction that
// names file and the offending key.
func Parse(file string, data []byte) (*Manifest, error) {
	p := &problems{file: file}
	front, body, ok := splitFrontMatter(data, p)
	if !ok {
		return nil, p.err()
	}
	if msg := shapeProblem(front); msg != "" {
		p.add("", ruleTOML, msg)
		return nil, p.err()
	}
	var raw rawManifest
	// A leading newline makes TOML line numbers equal file line numbers:
	// the front matter starts on line 2, after "+++".
	md, err := toml.Decode("\n"+front, &raw)
	if err != nil {
		p.add("", ruleTOML, tomlMessage(err))
		return nil, p.err()
	}
	checkUndecoded(md, p)
	m := &Manifest{
		Name: raw.Name, Version: raw.Version, Source: raw.Source,
		Description: strings.TrimSpace(body), Intent: raw.Match.Intent,
		Approval: Approval(raw.Approval), File: file,
	}
	for _, r := range raw.Requires.Connectors {
		m.Requires = append(m.Requires, Requirement(r))
	}
	for i, s := range raw.Execute {
		m.Steps = append(m.Steps, Step{ID: s.ID, Connector: s.Connector, Op: s.Op, Tool: s.Tool,
			Idempotent: s.Idempotent, Inputs: normalizeInputs(s.Inputs, idx("execute", i)+".inputs", p)})
	}
	for _, in := range raw.Inputs {
		typ := "string"
		if in.Type != nil {
			typ = *in.Type
		}
		m.Inputs = append(m.Inputs, Input{Name: in.Name, Type: typ, Description: in.Description, Label: in.Label,
			Required: in.Required == nil || *in.Required, Multiline: in.Multiline, ItemsType: in.ItemsType})
	}
	m.Timeout = parseTimeout(raw.Timeout, p)
	m.validate(p)
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	return m, nil
}

// Bounds of an action's timeout.
const (
	MinTimeout = time.Second
	MaxTimeout = time.Hour
)

// parseTimeout reads the "timeout" key: a Go duration string within
// MinTimeout..MaxTimeout; nil (absent) is 0, the daemon's default.
func parseTimeout(v *string, p *problems) time.Duration {
	if v == nil {
		return 0
	}
	const fix = `; write a duration between "1s" and "1h", such as "30s" or "5m", or leave timeout out for the daemon's actions.default_timeout`
	d, err := time.ParseDuration(*v)
	switch {
	case err != nil:
		p.add("timeout", ruleValue, fmt.Sprintf("timeout %s is not a duration", quote(*v))+fix)
	case d < MinTimeout || d > MaxTimeout:
		p.add("timeout", ruleValue, fmt.Sprintf("timeout %s is out of range", quote(*v))+fix)
	default:
		return d
	}
	return 0
}

// splitFrontMatter returns the TOML between the opening and closing "+++"
// lines and the body after them.
func splitFrontMatter(data []byte, p *problems) (front, body string, ok bool) {
	const fix = `; an action.md starts with a line "+++", then TOML front matter, then a line "+++", then the Markdown description`
	if len(data) > MaxManifestSize {
		p.add("", ruleSize, fmt.Sprintf("manifest is %d bytes, larger than the %d-byte limit; shorten the description", len(data), MaxManifestSize))
		return "", "", false
	}
	if !utf8.Valid(data) {
		p.add("", ruleEncoding, "manifest is not valid UTF-8; save the file as UTF-8")
		return "", "", false
	}
	if bytes.IndexByte(data, 0) >= 0 {
		p.add("", ruleEncoding, "manifest contains a NUL byte; it must be text")
		return "", "", false
	}
	s := strings.TrimPrefix(string(data), "\uFEFF")
	first, rest, found := strings.Cut(s, "\n")
	if strings.TrimSuffix(first, "\r") != "+++" {
		p.add("", ruleFrontMatter, fmt.Sprintf("the first line is %s, not \"+++\"", quote(first))+fix)
		return "", "", false
	}
	if !found {
		p.add("", ruleFrontMatter, "the front matter is not closed"+fix)
		return "", "", false
	}
	off := 0
	for off <= len(rest) {
		line, _, _ := strings.Cut(rest[off:], "\n")
		if strings.TrimSuffix(line, "\r") == "+++" {
			end := min(off+len(line)+1, len(rest))
			return rest[:off], rest[end:], true
		}
		off += len(line) + 1
	}
	p.add("", ruleFrontMatter, "the front matter is not closed: no line after the first is exactly \"+++\""+fix)
	return "", "", false
}

// tomlMessage renders a decode error with its position.
func tomlMessage(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := fmt.Sprintf("TOML syntax error on line %d: %s", pe.Position.Line, clip(pe.Message))
		if pe.LastKey != "" {
			msg += fmt.Sprintf(" (after key %s)", quote(pe.LastKey))
		}
		return msg + "; fix the front matter"
	}
	// Type mismatches: "toml: line N (last key "k"): incompatible types…".
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	if line, rest, ok := strings.Cut(strings.TrimPrefix(msg, "line "), ` (last key "`); ok && strings.HasPrefix(msg, "line ") {
		if key, detail, ok := strings.Cut(rest, `"): `); ok {
			if i, j := strings.Index(detail, "struct {"), strings.LastIndex(detail, "}"); i >= 0 && j > i {
				detail = detail[:i] + "a table" + detail[j+1:]
			}
			msg = fmt.Sprintf("key %s on line %s has the wrong type: %s", quote(key), clip(line), clip(detail))
		}
	}
	return clip(msg) + "; check the key's type (strings are quoted, tables are written [name], arrays of tables [[name]])"
}

// checkUndecoded reports keys the manifest format does not define. Keys
// inside a step's inputs table are free-form and never reported.
func checkUndecoded(md toml.MetaData, p *problems) {
	reported := map[string]bool{}
outer:
	for _, k := range md.Undecoded() {
		if len(k) >= 3 && k[0] == "execute" && k[1] == "inputs" {
			continue
		}
		key := ""
		for _, part := range k {
			key = keyPath(key, part)
			if reported[key] { // an unknown table: its keys are not reported again
				continue outer
			}
		}
		reported[key] = true
		p.add(key, ruleUnknownKey, fmt.Sprintf("unknown key %s%s; remove it or fix its spelling (%s)", quote(k[len(k)-1]), where(k), known(k)))
	}
}

func where(k toml.Key) string {
	switch {
	case len(k) == 1:
		return " at the top level"
	case k[0] == "execute":
		return " in an [[execute]] step"
	case k[0] == "inputs":
		return " in an [[inputs]] entry"
	case len(k) >= 3 && k[0] == "requires" && k[1] == "connectors":
		return " in a [[requires.connectors]] entry"
	}
	return " in [" + strings.Join(k[:len(k)-1], ".") + "]"
}

// known lists the keys accepted next to an unknown key k.
func known(k toml.Key) string {
	var keys string
	switch {
	case len(k) == 1:
		keys = "name, version, source, timeout, [requires], [match], [[execute]], [approval], [[inputs]]"
	case k[0] == "execute":
		keys = "id, connector, op, tool, idempotent, inputs"
	case k[0] == "inputs":
		keys = "name, type, description, label, required, multiline, items_type"
	case k[0] == "requires" && len(k) == 2:
		keys = "[[requires.connectors]]"
	case k[0] == "requires":
		keys = "name, version, hash, capabilities"
	case k[0] == "match":
		keys = "intent"
	case k[0] == "approval":
		keys = "required, preview"
	default:
		keys = "see the action manifest format"
	}
	return "accepted: " + keys
}

// normalizeInputs converts a decoded step inputs table to JSON-shaped
// values (arrays of tables become []any) and reports TOML dates and times,
// which have no JSON form.
func normalizeInputs(in map[string]any, key string, p *problems) map[string]any {
	if in == nil {
		return nil
	}
	v, _ := normalizeValue(in, key, p).(map[string]any)
	return v
}

func normalizeValue(v any, key string, p *problems) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = normalizeValue(e, keyPath(key, k), p)
		}
		return out
	case []map[string]any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalizeValue(e, idx(key, i), p)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalizeValue(e, idx(key, i), p)
		}
		return out
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			p.add(key, ruleValue, "nan and inf have no JSON form; use a finite number or a string")
			return nil
		}
		return t
	case string, bool, int64:
		return t
	}
	p.add(key, ruleValue, fmt.Sprintf("value of type %T is not allowed in step inputs; quote dates and times as strings", v))
	return nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
