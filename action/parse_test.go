package action

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// linearManifest is the real-world shape from the Linear connector.
const linearManifest = `+++
name = "issue-create"
version = "0.0.0-dev"
source = "github://ALRubinger/aileron-connector-linear/actions/issue-create@0.0.0-dev"

[[requires.connectors]]
name = "github://ALRubinger/aileron-connector-linear"
version = "0.0.0-dev"
hash = "sha256:bound-at-release"
capabilities = ["network:api.linear.app:443", "credential:oauth2"]

[match]
intent = "Creates a new issue."

[[execute]]
id = "issue"
connector = "github://ALRubinger/aileron-connector-linear"
op = "issue_create"
idempotent = false

[approval]
required = true

[[inputs]]
name = "assigneeId"
type = "String"
description = "The identifier of the user to assign the issue to."
required = false

[[inputs]]
name = "title"
type = "String"
+++

Creates a Linear issue ... (markdown body = description)

`

const sendEmailManifest = `+++
name = "send-email"
version = "1.2.0"

[[requires.connectors]]
name = "github://acme/aileron-connector-google"
version = "1.0.0"
hash = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

[[execute]]
id = "send"
connector = "github://acme/aileron-connector-google"
tool = "gmail"
op = "messages.send"
inputs = { to = "${args.to}", subject = "Re: ${args.subject}", body = "${args.body}", meta = { n = 3, f = 1.5, tags = ["a", "${args.to}"] } }

[approval]
required = true
preview = "Send ${args.subject} to ${args.to}"

[[inputs]]
name = "to"
label = "To"

[[inputs]]
name = "subject"
type = "String"
label = "Subject"

[[inputs]]
name = "body"
type = "String"
label = "Message body"
multiline = true
+++
Sends an e-mail.
`

func TestParseValid(t *testing.T) {
	tests := []struct {
		name string
		data string
		want *Manifest
	}{
		{"linear", linearManifest, &Manifest{
			Name: "issue-create", Version: "0.0.0-dev",
			Source:      "github://ALRubinger/aileron-connector-linear/actions/issue-create@0.0.0-dev",
			Description: "Creates a Linear issue ... (markdown body = description)",
			Requires: []Requirement{{Name: "github://ALRubinger/aileron-connector-linear", Version: "0.0.0-dev",
				Hash: "sha256:bound-at-release", Capabilities: []string{"network:api.linear.app:443", "credential:oauth2"}}},
			Intent:   "Creates a new issue.",
			Steps:    []Step{{ID: "issue", Connector: "github://ALRubinger/aileron-connector-linear", Op: "issue_create"}},
			Approval: Approval{Required: true},
			Inputs: []Input{
				{Name: "assigneeId", Type: "String", Description: "The identifier of the user to assign the issue to.", Required: false},
				{Name: "title", Type: "String", Required: true},
			},
			File: "test/action.md",
		}},
		{"send-email", sendEmailManifest, &Manifest{
			Name: "send-email", Version: "1.2.0", Description: "Sends an e-mail.",
			Requires: []Requirement{{Name: googleFQN, Version: "1.0.0",
				Hash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
			Steps: []Step{{ID: "send", Connector: googleFQN, Tool: "gmail", Op: "messages.send", Inputs: map[string]any{
				"to": "${args.to}", "subject": "Re: ${args.subject}", "body": "${args.body}",
				"meta": map[string]any{"n": int64(3), "f": 1.5, "tags": []any{"a", "${args.to}"}},
			}}},
			Approval: Approval{Required: true, Preview: "Send ${args.subject} to ${args.to}"},
			Inputs: []Input{
				{Name: "to", Type: "string", Label: "To", Required: true},
				{Name: "subject", Type: "String", Label: "Subject", Required: true},
				{Name: "body", Type: "String", Label: "Message body", Required: true, Multiline: true},
			},
			File: "test/action.md",
		}},
		{"crlf, BOM, array of tables in inputs, empty body", "\uFEFF+++\r\n" + strings.ReplaceAll(minimal, "\n", "\r\n") +
			"[[execute.inputs.items]]\r\nk = \"${args.x}\"\r\n[[inputs]]\r\nname = \"x\"\r\nrequired = true\r\n+++\r\n", &Manifest{
			Name: "get-issue", Version: "1.0.0",
			Requires: []Requirement{{Name: linearFQN, Version: "1.0.0", Hash: "sha256:bound-at-release"}},
			Steps: []Step{{ID: "issue", Connector: linearFQN, Op: "get-issue",
				Inputs: map[string]any{"items": []any{map[string]any{"k": "${args.x}"}}}}},
			Inputs: []Input{{Name: "x", Type: "string", Required: true}},
			File:   "test/action.md",
		}},
		{"closing line at end of file without newline", "+++\n" + minimal + "+++", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, []byte(tt.data))
			if tt.want != nil && !reflect.DeepEqual(m, tt.want) {
				t.Fatalf("got  %#v\nwant %#v", m, tt.want)
			}
		})
	}
}

func TestRequirementBound(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	for hash, want := range map[string]bool{
		"sha256:" + hex64:                  true,
		"sha256:bound-at-release":          false,
		"":                                 false,
		"sha512:" + hex64:                  false,
		"sha256:" + strings.ToUpper(hex64): false,
		"sha256:" + hex64[:63] + "g":       false,
		"sha256:" + hex64 + "00":           false,
	} {
		if got := (Requirement{Hash: hash}).Bound(); got != want {
			t.Errorf("Bound(%q) = %v, want %v", hash, got, want)
		}
	}
}

// TestParseTimeout: timeout is a Go duration within 1s..1h; absent is 0
// (the daemon's default).
func TestParseTimeout(t *testing.T) {
	for _, tc := range []struct {
		line string
		want time.Duration
	}{{"", 0}, {"timeout = \"1s\"\n", time.Second}, {"timeout = \"90s\"\n", 90 * time.Second}, {"timeout = \"1h\"\n", time.Hour}} {
		m, err := Parse("a.md", doc(tc.line+minimal, ""))
		if err != nil || m.Timeout != tc.want {
			t.Errorf("%q: timeout %v (%v), want %v", tc.line, m, err, tc.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	step2 := "\n[[execute]]\nid = \"two\"\nconnector = \"" + linearFQN + "\"\nop = \"x\"\n"
	tests := []struct {
		name string
		data []byte
		key  string // key of the first problem
		rule string
		msg  string // substring of its message
	}{
		{"no opening line", []byte("name = \"x\"\n"), "", ruleFrontMatter, `first line is "name = \"x\""`},
		{"opening line with text", []byte("+++ toml\n" + minimal + "+++\n"), "", ruleFrontMatter, "not \"+++\""},
		{"empty file", nil, "", ruleFrontMatter, "first line"},
		{"not closed", []byte("+++\n" + minimal), "", ruleFrontMatter, "not closed"},
		{"only opening", []byte("+++"), "", ruleFrontMatter, "not closed"},
		{"closing line with spaces", []byte("+++\n" + minimal + "+++ \n"), "", ruleFrontMatter, "not closed"},
		{"invalid UTF-8", []byte("+++\nname = \"\xff\"\n+++\n"), "", ruleEncoding, "UTF-8"},
		{"NUL", []byte("+++\nname = \"\x00\"\n+++\n"), "", ruleEncoding, "NUL"},
		{"too large", append(doc(minimal, ""), make([]byte, MaxManifestSize)...), "", ruleSize, "limit"},
		{"TOML syntax with file line", doc(minimal+"op = \n", ""), "", ruleTOML, "line 14"},
		{"TOML wrong type", doc(strings.Replace(minimal, `version = "1.0.0"`, "version = 1", 1), ""), "", ruleTOML, "version"},
		{"TOML duplicate key", doc(minimal+"[match]\nintent = \"a\"\nintent = \"b\"\n", ""), "", ruleTOML, "intent"},
		{"unknown top-level key", doc("nmae = \"x\"\n"+minimal, ""), "nmae", ruleUnknownKey, `unknown key "nmae" at the top level`},
		{"requried in inputs", doc(minimal+"[[inputs]]\nname = \"a\"\nrequried = false\n", ""), "inputs.requried", ruleUnknownKey, "in an [[inputs]] entry"},
		{"unknown step key", doc(minimal+"opp = \"y\"\n", ""), "execute.opp", ruleUnknownKey, "id, connector, op"},
		{"unknown approval key", doc(minimal+"[approval]\nrequird = true\n", ""), "approval.requird", ruleUnknownKey, "required, preview"},
		{"unknown requirement key", doc(strings.Replace(minimal, "hash =", "hsh =", 1), ""), "requires.connectors.hsh", ruleUnknownKey, "[[requires.connectors]]"},
		{"unknown match key", doc(minimal+"[match]\nintnt = \"x\"\n", ""), "match.intnt", ruleUnknownKey, "intent"},
		{"unknown table", doc(minimal+"[extra]\nx = 1\n", ""), "extra", ruleUnknownKey, "at the top level"},
		{"timeout not a duration", doc("timeout = \"2 minutes\"\n"+minimal, ""), "timeout", ruleValue, `timeout "2 minutes" is not a duration; write a duration between "1s" and "1h"`},
		{"timeout bare number", doc("timeout = \"30\"\n"+minimal, ""), "timeout", ruleValue, "not a duration"},
		{"timeout too short", doc("timeout = \"500ms\"\n"+minimal, ""), "timeout", ruleValue, `timeout "500ms" is out of range`},
		{"timeout too long", doc("timeout = \"61m\"\n"+minimal, ""), "timeout", ruleValue, "out of range"},
		{"timeout negative", doc("timeout = \"-5s\"\n"+minimal, ""), "timeout", ruleValue, "out of range"},
		{"timeout not a string", doc("timeout = 30\n"+minimal, ""), "", ruleTOML, "timeout"},
		{"name missing", doc(strings.Replace(minimal, `name = "get-issue"`, "", 1), ""), "name", ruleRequired, "name is missing"},
		{"name underscore", doc(strings.Replace(minimal, `"get-issue"`, `"get_issue"`, 1), ""), "name", ruleName, `contains "_"`},
		{"name leading dash", doc(strings.Replace(minimal, `"get-issue"`, `"-get"`, 1), ""), "name", ruleName, "start or end"},
		{"name too long", doc(strings.Replace(minimal, `"get-issue"`, `"`+strings.Repeat("a", 65)+`"`, 1), ""), "name", ruleName, "limit is 64"},
		{"version missing", doc(strings.Replace(minimal, "version = \"1.0.0\"\n\n", "\n", 1), ""), "version", ruleRequired, "version is missing"},
		{"version v-prefix", doc(strings.Replace(minimal, `version = "1.0.0"`, `version = "v1.0.0"`, 1), ""), "version", ruleSemVer, "not strict SemVer"},
		{"no steps", doc(minimal[:strings.Index(minimal, "[[execute]]")], ""), "execute", ruleStepsEmpty, "no [[execute]] steps"},
		{"step id missing", doc(strings.Replace(minimal, `id = "issue"`, "", 1), ""), "execute[0].id", ruleStepID, "missing"},
		{"step id upper-case", doc(strings.Replace(minimal, `id = "issue"`, `id = "Issue"`, 1), ""), "execute[0].id", ruleStepID, `contains "I"`},
		{"step id args", doc(strings.Replace(minimal, `id = "issue"`, `id = "args"`, 1), ""), "execute[0].id", ruleStepID, "reserved"},
		{"step id duplicate", doc(minimal+strings.Replace(step2, `"two"`, `"issue"`, 1), ""), "execute[1].id", ruleDuplicate, "execute[0]"},
		{"step connector missing", doc(strings.Replace(minimal, "connector = \"github://acme/aileron-connector-linear\"\nop", "op", 1), ""), "execute[0].connector", ruleRequired, "connector FQN"},
		{"step connector bad FQN", doc(strings.Replace(minimal, "connector = \"github://acme/aileron-connector-linear\"\nop", "connector = \"acme/linear\"\nop", 1), ""), "execute[0].connector", ruleFQN, "no scheme"},
		{"step connector not required", doc(strings.Replace(minimal, "connector = \"github://acme/aileron-connector-linear\"\nop", "connector = \"github://acme/other\"\nop", 1), ""), "execute[0].connector", ruleRequirement, "not listed in [[requires.connectors]]"},
		{"op missing", doc(strings.Replace(minimal, `op = "get-issue"`, "", 1), ""), "execute[0].op", ruleRequired, "op is missing"},
		{"inputs date value", doc(minimal+"[execute.inputs]\nwhen = 2024-01-01\n", ""), "execute[0].inputs.when", ruleValue, "quote dates"},
		{"inputs nan", doc(minimal+"[execute.inputs]\nx = nan\n", ""), "execute[0].inputs.x", ruleValue, "finite"},
		{"input name missing", doc(minimal+"[[inputs]]\ntype = \"string\"\n", ""), "inputs[0].name", ruleName, "missing"},
		{"input name chars", doc(minimal+"[[inputs]]\nname = \"a b\"\n", ""), "inputs[0].name", ruleName, `contains " "`},
		{"input name dots", doc(minimal+"[[inputs]]\nname = \"a..b\"\n", ""), "inputs[0].name", ruleName, "empty dot-separated part"},
		{"input duplicate", doc(minimal+"[[inputs]]\nname = \"a\"\n[[inputs]]\nname = \"a\"\n", ""), "inputs[1].name", ruleDuplicate, "declared twice"},
		{"input type empty", doc(minimal+"[[inputs]]\nname = \"a\"\ntype = \"\"\n", ""), "inputs[0].type", ruleInputType, "type is empty"},
		{"input items_type control", doc(minimal+"[[inputs]]\nname = \"a\"\ntype = \"array\"\nitems_type = \"a\\tb\"\n", ""), "inputs[0].items_type", ruleInputType, "control character"},
		{"requirement bad FQN", doc(strings.Replace(minimal, "name = \"github://acme/aileron-connector-linear\"", "name = \"github://acme\"", 1), ""), "requires.connectors[0].name", ruleFQN, "owner and a repository"},
		{"requirement version", doc(strings.Replace(minimal, "version = \"1.0.0\"\nhash", "version = \"latest\"\nhash", 1), ""), "requires.connectors[0].version", ruleSemVer, "latest"},
		{"requirement version missing", doc(strings.Replace(minimal, "version = \"1.0.0\"\nhash", "hash", 1), ""), "requires.connectors[0].version", ruleRequired, "missing"},
		{"requirement duplicate", doc(minimal+"[[requires.connectors]]\nname = \""+linearFQN+"\"\nversion = \"1.0.0\"\n", ""), "requires.connectors[1].name", ruleDuplicate, "listed twice"},
		{"truncated hash", doc(strings.Replace(minimal, "bound-at-release", "abc123", 1), ""), "requires.connectors[0].hash", ruleHash, "64 lower-case hex"},
		{"empty capability", doc(strings.Replace(minimal, "hash =", "capabilities = [\"\"]\nhash =", 1), ""), "requires.connectors[0].capabilities[0]", ruleValue, "empty"},
		{"hash missing", doc(strings.Replace(minimal, "hash = \"sha256:bound-at-release\"\n", "", 1), ""), "requires.connectors[0].hash", ruleRequired, `hash is missing; write the connector's installed hash "sha256:<64 hex>" (aileron connector list), or "self"`},
		{"hash neither self nor sha256", doc(strings.Replace(minimal, "sha256:bound-at-release", "latest", 1), ""), "requires.connectors[0].hash", ruleHash, `"latest" is neither "self" nor "sha256:…"`},
		{"capability without form", withCaps(`"create_issue"`), "requires.connectors[0].capabilities[0]", ruleCapability, `"create_issue" is not a capability; write "network:HOST:PORT", "credential:KIND" or "scope:SCOPE"`},
		{"bare credential kind", withCaps(`"oauth2"`), "requires.connectors[0].capabilities[0]", ruleCapability, `write "credential:oauth2"`},
		{"bare host", withCaps(`"api.linear.test:443"`), "requires.connectors[0].capabilities[0]", ruleCapability, `write "network:api.linear.test:443"`},
		{"wildcard host", withCaps(`"network:*.linear.test:443"`), "requires.connectors[0].capabilities[0]", ruleCapability, "wildcard"},
		{"host without port", withCaps(`"network:api.linear.test"`), "requires.connectors[0].capabilities[0]", ruleCapability, "names no port"},
		{"host not canonical", withCaps(`"network:API.linear.test:443"`), "requires.connectors[0].capabilities[0]", ruleCapability, `write "network:api.linear.test:443"`},
		{"unknown credential kind", withCaps(`"credential:token"`), "requires.connectors[0].capabilities[0]", ruleCapability, `names no credential kind; the kinds are "oauth2"`},
		{"empty scope", withCaps(`"scope:"`), "requires.connectors[0].capabilities[0]", ruleCapability, "the scope is empty"},
		{"duplicate capability", withCaps(`"scope:a", "scope:a"`), "requires.connectors[0].capabilities[1]", ruleDuplicate, "listed twice"},
		{"undeclared arg", doc(minimal+"[execute.inputs]\nid = \"${args.idd}\"\n[[inputs]]\nname = \"id\"\n", ""), "execute[0].inputs.id", ruleTemplate, `use one of "id"`},
		{"own step", doc(minimal+"[execute.inputs]\nid = \"${issue.id}\"\n", ""), "execute[0].inputs.id", ruleTemplate, "own output"},
		{"later step", doc(minimal+"[execute.inputs]\nid = \"x-${two.id}\"\n"+step2, ""), "execute[0].inputs.id", ruleTemplate, "runs later (execute[1])"},
		{"unknown step", doc(minimal+step2+"[execute.inputs]\nq = [\"${isue.id}\"]\n", ""), "execute[1].inputs.q[0]", ruleTemplate, `earlier steps: "issue"`},
		{"unclosed template", doc(minimal+"[execute.inputs]\nid = \"${args.id\"\n", ""), "execute[0].inputs.id", ruleTemplate, "not closed"},
		{"empty template", doc(minimal+"[execute.inputs]\nid = \"${}\"\n", ""), "execute[0].inputs.id", ruleTemplate, "empty template"},
		{"bad template chars", doc(minimal+"[execute.inputs]\nid = \"${args.a b}\"\n", ""), "execute[0].inputs.id", ruleTemplate, `contains " "`},
		{"template empty segment", doc(minimal+"[execute.inputs]\nid = \"${args..a}\"\n", ""), "execute[0].inputs.id", ruleTemplate, "empty segment"},
		{"preview step ref", doc(minimal+"[approval]\nrequired = true\npreview = \"${issue.id}\"\n", ""), "approval.preview", ruleTemplate, "before any step runs"},
		{"preview unknown arg", doc(minimal+"[approval]\npreview = \"${args.x}\"\n", ""), "approval.preview", ruleTemplate, "no declared input"},
		{"preview unclosed", doc(minimal+"[approval]\npreview = \"${args.x\"\n", ""), "approval.preview", ruleTemplate, "not closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse("pkg/actions/x/action.md", tt.data)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", m)
			}
			if m != nil {
				t.Fatal("Parse returned a manifest with an error")
			}
			ves := validationErrors(t, err)
			ve := ves[0]
			if ve.Key != tt.key || ve.Rule != tt.rule || !strings.Contains(ve.Message, tt.msg) {
				t.Fatalf("first problem %+v,\nwant key %q rule %q message containing %q (all: %v)", ve, tt.key, tt.rule, tt.msg, err)
			}
			if ve.File != "pkg/actions/x/action.md" || !strings.HasPrefix(err.Error(), "pkg/actions/x/action.md: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
}

// TestParseReportsEveryProblem: an author sees all problems at once.
func TestParseReportsEveryProblem(t *testing.T) {
	data := doc(`
name = "bad_name"
version = "1"
typo = true

[[execute]]
id = "A"
connector = "github://acme/x"
`, "")
	_, err := Parse("a.md", data)
	got := map[string]string{}
	for _, ve := range validationErrors(t, err) {
		got[ve.Key] = ve.Rule
	}
	want := map[string]string{"typo": ruleUnknownKey, "name": ruleName, "version": ruleSemVer,
		"execute[0].id": ruleStepID, "execute[0].connector": ruleRequirement, "execute[0].op": ruleRequired}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("problems %v, want %v", got, want)
	}
}

func TestToolName(t *testing.T) {
	for name, want := range map[string]string{"send-email": "send_email", "get": "get", "a-b-c": "a_b_c"} {
		if got := (&Manifest{Name: name}).ToolName(); got != want {
			t.Errorf("ToolName(%q) = %q, want %q", name, got, want)
		}
	}
}

// withCaps is minimal with capabilities = [list] in its requirement.
func withCaps(list string) []byte {
	return doc(strings.Replace(minimal, "hash =", "capabilities = ["+list+"]\nhash =", 1), "")
}
