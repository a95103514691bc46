package sandboxapi

import (
	"encoding/json"
	"github.com/aileronhq/aileron/dataplane"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
)

const notesFQN = "local://test/notes"

// notesSendInput is the input_schema of notes/send.
const notesSendInput = `{"type":"object","properties":{"to":{"type":"string","format":"email","pattern":"@example\\.com$"},` +
	`"count":{"type":"integer","minimum":1,"maximum":5}},"required":["to"],"additionalProperties":false}`

// notesSendOutput is the output_schema of notes/send.
const notesSendOutput = `{"type":"object","properties":{"id":{"type":"string"}}}`

// notesSpec is a connector with an operation declaring schemas, an internal
// one and one without a request; summary tells versions apart.
func notesSpec(t *testing.T, version, summary string) *policy.Spec {
	t.Helper()
	spec, err := policy.ParseSpec("notes.json", []byte(`{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/notes", "version": "`+version+`"},
  "tools": [{"name": "notes", "operations": [
    {"name": "send", "summary": "`+summary+`", "description": "Sends a note.", "method": "POST", "path": "/v1/notes",
     "hosts": ["api.example.com"], "approval": "required",
     "credential": {"kind": "bearer", "header": "Authorization", "format": "Bearer {token}"},
     "input_schema": `+notesSendInput+`, "output_schema": `+notesSendOutput+`},
    {"name": "purge", "summary": "Purge every note", "method": "DELETE", "path": "/v1/notes", "hosts": ["api.example.com"],
     "visibility": "internal"},
    {"name": "doc", "summary": "documentation only"}
  ]}]
}`))
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// installNotes makes the env's policy the test connectors plus notes at
// version, as a reinstall swaps the policy.
func (e *sapiEnv) installNotes(t *testing.T, version, summary string) {
	t.Helper()
	linSpec, _ := loadTestdataPackage(t, "linear")
	gooSpec, _ := loadTestdataPackage(t, "google")
	items, err := policy.ParseSpec("items.json", []byte(testkit.ItemsSpec))
	if err != nil {
		t.Fatal(err)
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: linSpec, Origin: "linear"}, {Spec: gooSpec, Origin: "google"},
		{Spec: items, Origin: "items"}, {Spec: notesSpec(t, version, summary), Origin: "notes"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	e.api.Policy.Store(pol)
}

func opNames(list OperationList) []string {
	var out []string
	for _, o := range list.Operations {
		out = append(out, o.ConnectorFQN+" "+o.Tool+"/"+o.Operation)
	}
	return out
}

// TestDiscoveryListsOperations: GET /v1/operations is the session's
// external, callable operations with every field of their specs, sorted.
func TestDiscoveryListsOperations(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	e.installNotes(t, "1.2.0", "Send a note")
	res := e.do(t, "s1", "GET", "/v1/operations", nil)
	if res.status != 200 || res.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v: %s", res.status, res.header, res.body)
	}
	var list OperationList
	res.decode(t, &list)
	want := []string{
		tdGoogleFQN + " gmail/messages.send",
		tdLinearFQN + " linear/comment-create", tdLinearFQN + " linear/get-issue",
		itemsFQN + " items/create", itemsFQN + " items/delete", itemsFQN + " items/file", itemsFQN + " items/get",
		itemsFQN + " items/head", itemsFQN + " items/list", itemsFQN + " items/replace", itemsFQN + " items/update",
		notesFQN + " notes/send",
	}
	if got := opNames(list); !reflect.DeepEqual(got, want) {
		t.Fatalf("operations\n%v\nwant\n%v", got, want)
	}
	for _, leak := range []string{"purge", "Purge", "documentation only", "Bearer", "{token}", "{key}", "Authorization"} {
		if strings.Contains(string(res.body), leak) {
			t.Errorf("the answer shows %q: %s", leak, res.body)
		}
	}
	send := list.Operations[len(list.Operations)-1]
	wantSend := OperationInfo{ConnectorFQN: notesFQN, Version: "1.2.0", Tool: "notes", Operation: "send", Summary: "Send a note",
		Description: "Sends a note.", Method: "POST", Path: "/v1/notes", Hosts: []string{"api.example.com:443"},
		ApprovalRequired: true, Credential: "bearer"}
	checkInfo(t, send, wantSend, notesSendInput, notesSendOutput)
	getIssue := list.Operations[2]
	wantGet := OperationInfo{ConnectorFQN: tdLinearFQN, Version: "1.0.0", Tool: "linear", Operation: "get-issue", Summary: "Get one issue",
		Description: "Returns the issue with the given id as JSON.", Method: "GET", Path: "/issues/{id}",
		Hosts: []string{"api.linear.test:443"}, Credential: "api_key"}
	checkInfo(t, getIssue, wantGet, `{"type":"object","required":["id"],"properties":{"id":{"type":"string","description":"Issue identifier, e.g. ENG-123"}}}`, "")
	checkInfo(t, list.Operations[3], OperationInfo{ConnectorFQN: itemsFQN, Version: "1.0.0", Tool: "items", Operation: "create",
		Method: "POST", Path: "/v1/projects/{project}/items", Hosts: []string{"api.example.com:443"}}, `{"type":"object"}`, "")
	if list := list.Operations[8]; !reflect.DeepEqual(list.Hosts, []string{"api.example.com:8443", "alt.example.com:443"}) {
		t.Errorf("items/list hosts %v", list.Hosts)
	}
}

// checkInfo compares got with want, its schemas as JSON values.
func checkInfo(t *testing.T, got, want OperationInfo, input, output string) {
	t.Helper()
	if !jsonEqual(t, got.InputSchema, input) {
		t.Errorf("%s input_schema %s, want %s", got.Operation, got.InputSchema, input)
	}
	if output == "" && got.OutputSchema != nil || output != "" && !jsonEqual(t, got.OutputSchema, output) {
		t.Errorf("%s output_schema %s, want %s", got.Operation, got.OutputSchema, output)
	}
	got.InputSchema, got.OutputSchema = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("operation\n%+v\nwant\n%+v", got, want)
	}
}

func jsonEqual(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestDiscoveryScopeAndFilter: a scoped session sees only its connectors;
// ?connector= narrows the list, and a connector out of scope answers like
// one not installed.
func TestDiscoveryScopeAndFilter(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	e.installNotes(t, "1.2.0", "Send a note")
	tests := []struct {
		name, session, query string
		status               int
		reason               policy.Reason
		want                 []string
	}{
		{name: "scoped", session: "scoped", status: 200, want: []string{tdGoogleFQN + " gmail/messages.send",
			itemsFQN + " items/create", itemsFQN + " items/delete", itemsFQN + " items/file", itemsFQN + " items/get",
			itemsFQN + " items/head", itemsFQN + " items/list", itemsFQN + " items/replace", itemsFQN + " items/update"}},
		{name: "filter", session: "s1", query: "?connector=" + notesFQN, status: 200, want: []string{notesFQN + " notes/send"}},
		{name: "filter in scope", session: "scoped", query: "?connector=" + tdGoogleFQN, status: 200, want: []string{tdGoogleFQN + " gmail/messages.send"}},
		{name: "out of scope", session: "scoped", query: "?connector=" + notesFQN, status: 404, reason: "not_found"},
		{name: "not installed", session: "s1", query: "?connector=local://x/y", status: 404, reason: "not_found"},
		{name: "empty connector", session: "s1", query: "?connector=", status: 400, reason: "invalid_argument"},
		{name: "unknown parameter", session: "s1", query: "?tool=notes", status: 400, reason: "invalid_argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(t, tc.session, "GET", "/v1/operations"+tc.query, nil)
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			if tc.reason != "" {
				env := res.envelope(t)
				if env.Reason != tc.reason {
					t.Errorf("reason %s, want %s", env.Reason, tc.reason)
				}
				if tc.status == 404 && !strings.Contains(env.Message, "is not available to this session") {
					t.Errorf("message %q", env.Message)
				}
				return
			}
			var list OperationList
			res.decode(t, &list)
			if got := opNames(list); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("operations %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDiscoveryOneOperation: one operation by tool and name, with or
// without its connector; an internal one answers exactly as an unknown one.
func TestDiscoveryOneOperation(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	e.installNotes(t, "1.2.0", "Send a note")
	var list OperationList
	e.do(t, "s1", "GET", "/v1/operations?connector="+notesFQN, nil).decode(t, &list)
	for _, q := range []string{"", "?connector=" + notesFQN} {
		res := e.do(t, "s1", "GET", "/v1/operations/notes/send"+q, nil)
		var info OperationInfo
		res.decode(t, &info)
		if res.status != 200 || !reflect.DeepEqual(jsonNorm(t, info), jsonNorm(t, list.Operations[0])) {
			t.Errorf("%s: %d %+v, want %+v", q, res.status, info, list.Operations[0])
		}
	}
	unknown := e.do(t, "s1", "GET", "/v1/operations/notes/zzzzz", nil)
	for _, tc := range []struct{ session, path string }{
		{"s1", "/v1/operations/notes/purge"}, // internal
		{"s1", "/v1/operations/notes/doc"},   // no request
		{"scoped", "/v1/operations/notes/send"},
		{"s1", "/v1/operations/notes/send?connector=" + itemsFQN},
		{"s1", "/v1/operations/items/purge"},
	} {
		res := e.do(t, tc.session, "GET", tc.path, nil)
		env, want := res.envelope(t), unknown.envelope(t)
		name := strings.TrimPrefix(strings.SplitN(tc.path, "?", 2)[0], "/v1/operations/")
		msg := strings.Replace(env.Message, `"`+name+`"`, `"notes/zzzzz"`, 1)
		msg = strings.Replace(msg, ` of connector "`+itemsFQN+`"`, "", 1)
		if res.status != 404 || env.Reason != want.Reason || env.Class != want.Class || msg != want.Message {
			t.Errorf("%s %s: %d %+v, want as unknown: %+v", tc.session, tc.path, res.status, env, want)
		}
		if strings.Contains(string(res.body), "internal") {
			t.Errorf("%s: the answer tells the operation is internal: %s", tc.path, res.body)
		}
	}
}

// TestDiscoveryETag: the ETag is stable while nothing changes, answers 304
// to If-None-Match, and changes when a reinstall changes the answer.
func TestDiscoveryETag(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	e.installNotes(t, "1.2.0", "Send a note")
	for _, path := range []string{"/v1/operations", "/v1/operations/notes/send"} {
		t.Run(path, func(t *testing.T) {
			e.installNotes(t, "1.2.0", "Send a note")
			first := e.do(t, "s1", "GET", path, nil)
			tag := first.header.Get("ETag")
			if !strings.HasPrefix(tag, `"sha256-`) || !strings.HasSuffix(tag, `"`) {
				t.Fatalf("ETag %q is not a strong digest tag", tag)
			}
			if again := e.do(t, "s1", "GET", path, nil); again.header.Get("ETag") != tag || string(again.body) != string(first.body) {
				t.Fatalf("a second call answers ETag %q, want %q", again.header.Get("ETag"), tag)
			}
			notMod := e.doHeader(t, "s1", path, "If-None-Match", tag)
			if notMod.status != 304 || len(notMod.body) != 0 || notMod.header.Get("ETag") != tag {
				t.Fatalf("If-None-Match: %d %q %s", notMod.status, notMod.header.Get("ETag"), notMod.body)
			}
			if other := e.doHeader(t, "s1", path, "If-None-Match", `"sha256-other"`); other.status != 200 {
				t.Fatalf("If-None-Match of another tag: %d", other.status)
			}
			e.installNotes(t, "1.2.1", "Send a short note")
			after := e.doHeader(t, "s1", path, "If-None-Match", tag)
			if after.status != 200 || after.header.Get("ETag") == tag || !strings.Contains(string(after.body), `"1.2.1"`) ||
				!strings.Contains(string(after.body), "Send a short note") {
				t.Fatalf("after a reinstall: %d ETag %q: %s", after.status, after.header.Get("ETag"), after.body)
			}
		})
	}
}

// doHeader sends GET path as session id with one request header.
func (e *sapiEnv) doHeader(t *testing.T, id, path, name, value string) apiResponse {
	t.Helper()
	req, err := http.NewRequest("GET", "https://"+dataplane.DefaultAPIHost+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(name, value)
	resp, err := e.client(t, id).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apiResponse{status: resp.StatusCode, header: resp.Header, body: data}
}
