package sandboxapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/state"
)

// storeAccess is Access over the real proposal store, as the daemon wires
// it (cmd/aileron).
type storeAccess struct{ s *proposals.Store }

func (a storeAccess) Ask(ctx context.Context, session string, r AccessAsk) (AccessAnswer, error) {
	p, err := a.s.Ask(ctx, session, r.Method, r.Host, r.Port, r.Path, r.Justification)
	return answerOf(p), err
}

func (a storeAccess) Await(ctx context.Context, session, id string, wait time.Duration) (AccessAnswer, error) {
	p, err := a.s.Await(ctx, session, id, wait)
	return answerOf(p), err
}

func answerOf(p proposals.Proposal) AccessAnswer {
	ans := AccessAnswer{ProposalID: p.ID, State: p.State, Method: p.Method, Host: p.Host, Port: p.Port, Template: p.Template,
		Reason: p.Reason, Connector: p.Connector}
	if p.Rule != nil {
		ans.Rule = &AccessRule{Method: p.Rule.Method, Template: p.Rule.Template, Approval: p.Rule.Approval}
	}
	return ans
}

// withAccess wires the env's sandbox API to a proposal store on its
// database and returns the store, as the admin side reaches it.
func (e *sapiEnv) withAccess() *proposals.Store {
	s := &proposals.Store{DB: e.db}
	e.api.Access = storeAccess{s}
	return s
}

// acceptDirectly marks proposal id accepted as a rule the way the accept
// step does, by a plain UPDATE (the admin side's Accept is built
// elsewhere).
func acceptDirectly(t *testing.T, db *state.DB, id, method, template string) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *state.Tx) error {
		_, err := tx.ExecContext(context.Background(), `UPDATE proposals SET state = 'accepted', rule = ?, connector = ?, decided_by = 'cli:test' WHERE id = ?`,
			fmt.Sprintf(`{"method":%q,"template":%q,"approval":true}`, method, template), "local://learned/s1@1.0.0", id)
		return err
	})
	if err != nil {
		t.Error(err)
	}
}

// inBackground runs fn and returns a channel that receives its result.
func inBackground[T any](fn func() T) <-chan T {
	c := make(chan T, 1)
	go func() { c <- fn() }()
	return c
}

// waitProposal waits until session has a proposal with the justification
// and returns it.
func waitProposal(t *testing.T, s *proposals.Store, session, justification string) proposals.Proposal {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		list, err := s.List(context.Background(), session)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list {
			if p.Justification == justification {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no proposal of session %s with justification %q", session, justification)
	return proposals.Proposal{}
}

// TestAccessRequestAskAndWait: a session asks for access with a
// justification the admin side reads; the answer waits for a human's
// decision (a rejection with its reason, an acceptance with its rule), or
// says it still waits; GET keeps waiting; nothing is sent upstream; another
// session's request is not there for it.
func TestAccessRequestAskAndWait(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	admin := e.withAccess()
	var open AccessAnswer
	res := e.do(t, "s1", "POST", "/v1/access-requests", map[string]any{"method": "get",
		"url": "https://api.example.com/v1/reports/42?secret=hunter2", "justification": "to read report 42"})
	res.decode(t, &open)
	if res.status != http.StatusAccepted || open.State != AccessOpen || open.ProposalID == "" || open.Method != "GET" ||
		open.Host != "api.example.com" || open.Port != 443 || open.Template != "/v1/reports/{id}" ||
		!strings.Contains(open.Message, "ask again for proposal "+open.ProposalID) {
		t.Fatalf("ask without waiting: %d %s", res.status, res.body)
	}
	if p, err := admin.Get(t.Context(), open.ProposalID); err != nil || p.Justification != "to read report 42" || p.Session != "s1" || p.Count != 0 {
		t.Fatalf("the admin side sees %+v, %v", p, err)
	}
	// Asking again for the same template waits, and gets the rejection.
	asked := inBackground(func() apiResponse {
		return e.do(t, "s1", "POST", "/v1/access-requests", map[string]any{"method": "GET",
			"url": "https://api.example.com/v1/reports/43", "justification": "report 43 too", "wait_seconds": 20})
	})
	waitProposal(t, admin, "s1", "report 43 too")
	if _, err := admin.Reject(t.Context(), open.ProposalID, "cli:alice", "use the export instead"); err != nil {
		t.Fatal(err)
	}
	var got AccessAnswer
	res = <-asked
	res.decode(t, &got)
	if res.status != http.StatusOK || got.State != AccessRejected || got.ProposalID != open.ProposalID || got.Reason != "use the export instead" ||
		!strings.Contains(got.Message, "use the export instead") {
		t.Fatalf("ask waiting for a rejection: %d %s", res.status, res.body)
	}
	res = e.do(t, "s1", "GET", "/v1/access-requests/"+open.ProposalID, nil)
	if res.decode(t, &got); res.status != http.StatusOK || got.State != AccessRejected {
		t.Fatalf("GET a rejected request: %d %s", res.status, res.body)
	}

	// GET keeps waiting, and gets the acceptance with its rule.
	res = e.do(t, "s1", "POST", "/v1/access-requests", map[string]any{"method": "POST", "url": "https://api.example.com:8443/v1/notes",
		"justification": "to leave a note"})
	res.decode(t, &open)
	waiting := inBackground(func() apiResponse {
		return e.do(t, "s1", "GET", "/v1/access-requests/"+open.ProposalID+"?wait_seconds=20", nil)
	})
	time.Sleep(300 * time.Millisecond) // let it wait before the decision
	acceptDirectly(t, e.db, open.ProposalID, "POST", "/v1/notes")
	res = <-waiting
	res.decode(t, &got)
	if res.status != http.StatusOK || got.State != AccessAccepted || got.Rule == nil || *got.Rule != (AccessRule{"POST", "/v1/notes", true}) ||
		got.Connector != "local://learned/s1@1.0.0" ||
		got.Message != "POST https://api.example.com:8443/v1/notes is allowed now, each request held until a human approves it; send the request again" {
		t.Fatalf("GET waiting for an acceptance: %d %s", res.status, res.body)
	}

	// Another session's request is not found, as a missing one is.
	other := e.do(t, "s2", "GET", "/v1/access-requests/"+open.ProposalID, nil)
	missing := e.do(t, "s2", "GET", "/v1/access-requests/pr_aaaaaaaaaaaaaaaaaaaa", nil)
	oe, me := other.envelope(t), missing.envelope(t)
	if other.status != http.StatusNotFound || oe.Reason != policy.ReasonNotFound ||
		strings.ReplaceAll(oe.Message, open.ProposalID, "ID") != strings.ReplaceAll(me.Message, "pr_aaaaaaaaaaaaaaaaaaaa", "ID") {
		t.Errorf("another session's request: %d %s; a missing one: %s", other.status, other.body, missing.body)
	}
	if n := len(e.upstreamHits()); n != 0 {
		t.Errorf("asking for access sent %d requests upstream", n)
	}
	list, err := admin.List(t.Context(), "")
	if err != nil || len(list) != 2 || strings.Contains(fmt.Sprint(list), "hunter2") {
		t.Errorf("proposals %+v, %v; want two, with no query value", list, err)
	}
}

// TestAccessRequestRefusals: a bad request for access is refused with a
// clear message and records nothing.
func TestAccessRequestRefusals(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	e.withAccess()
	ask := func(method, u, just string) map[string]any {
		return map[string]any{"method": method, "url": u, "justification": just}
	}
	long := strings.Repeat("x", proposals.MaxJustification+1)
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
		has    string
	}{
		{"no method", "POST", "", ask("", "https://api.example.com/x", "j"), 400, "give the HTTP method"},
		{"method with a space", "POST", "", ask("GET X", "https://api.example.com/x", "j"), 400, "give the HTTP method"},
		{"CONNECT", "POST", "", ask("CONNECT", "https://api.example.com/x", "j"), 400, "give the HTTP method"},
		{"http", "POST", "", ask("GET", "http://api.example.com/x", "j"), 400, "https only"},
		{"no scheme", "POST", "", ask("GET", "api.example.com/x", "j"), 400, "full https:// URL"},
		{"userinfo", "POST", "", ask("GET", "https://user:pw@api.example.com/x", "j"), 400, "user information"},
		{"no host", "POST", "", ask("GET", "https:///x", "j"), 400, "host is empty"},
		{"bad port", "POST", "", ask("GET", "https://api.example.com:0/x", "j"), 400, "invalid port"},
		{"private address", "POST", "", ask("GET", "https://10.1.2.3/x", "j"), 400, "never forwards to"},
		{"loopback", "POST", "", ask("GET", "https://127.0.0.1:8080/x", "j"), 400, "never forwards to"},
		{"the API itself", "POST", "", ask("GET", "https://aileron.internal/v1/operations", "j"), 400, "Aileron's own API"},
		{"space in path", "POST", "", ask("GET", "https://api.example.com/a b", "j"), 400, "percent-encode"},
		{"dot segment", "POST", "", ask("GET", "https://api.example.com/a/../b", "j"), 400, "not in plain form"},
		{"no justification", "POST", "", ask("GET", "https://api.example.com/x", " "), 400, "justification is required"},
		{"long justification", "POST", "", ask("GET", "https://api.example.com/x", long), 400, "keep it to 1024"},
		{"control in justification", "POST", "", ask("GET", "https://api.example.com/x", "ok\x1b[31m"), 400, "control character"},
		{"wait too long", "POST", "", map[string]any{"method": "GET", "url": "https://api.example.com/x", "justification": "j", "wait_seconds": 61}, 400, "from 0"},
		{"negative wait", "POST", "", map[string]any{"method": "GET", "url": "https://api.example.com/x", "justification": "j", "wait_seconds": -1}, 400, "from 0"},
		{"unknown field", "POST", "", `{"method":"GET","url":"https://api.example.com/x","justification":"j","approve":true}`, 400, "approve"},
		{"GET unknown query", "GET", "/pr_aaaaaaaaaaaaaaaaaaaa?approve=1", nil, 400, "only parameter is wait_seconds"},
		{"GET bad wait", "GET", "/pr_aaaaaaaaaaaaaaaaaaaa?wait_seconds=soon", nil, 400, "only parameter is wait_seconds"},
		{"GET wait too long", "GET", "/pr_aaaaaaaaaaaaaaaaaaaa?wait_seconds=600", nil, 400, "from 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(t, "s1", tc.method, "/v1/access-requests"+tc.path, tc.body)
			if res.status != tc.status || !strings.Contains(res.envelope(t).Message, tc.has) {
				t.Fatalf("%d %s; want %d saying %q", res.status, res.body, tc.status, tc.has)
			}
		})
	}
	if n := testkit.CountRows(t, e.db, "proposals"); n != 0 {
		t.Errorf("the refused requests recorded %d proposals", n)
	}
}

// TestAccessRequestCannotDecide: nothing the sandbox reaches accepts or
// rejects: the interfaces it holds only ask and wait, no method or path
// of the API decides, and the proposal stays open.
func TestAccessRequestCannotDecide(t *testing.T) {
	methods := func(v any) []string {
		typ := reflect.TypeOf(v).Elem()
		var out []string
		for i := range typ.NumMethod() {
			out = append(out, typ.Method(i).Name)
		}
		return out
	}
	if got := methods((*Access)(nil)); !slices.Equal(got, []string{"Ask", "Await"}) {
		t.Errorf("Access has methods %v; the sandbox may only ask and wait", got)
	}
	if got := methods((*AccessBackend)(nil)); !slices.Equal(got, []string{"AccessStatus", "RequestAccess"}) {
		t.Errorf("AccessBackend has methods %v; the sandbox may only ask and wait", got)
	}
	e := newSapiEnv(t, sapiOpts{})
	admin := e.withAccess()
	var open AccessAnswer
	e.do(t, "s1", "POST", "/v1/access-requests", map[string]any{"method": "GET", "url": "https://api.example.com/x",
		"justification": "j"}).decode(t, &open)
	for _, try := range []struct{ method, path string }{
		{"POST", "/v1/access-requests/" + open.ProposalID},
		{"PATCH", "/v1/access-requests/" + open.ProposalID},
		{"PUT", "/v1/access-requests/" + open.ProposalID},
		{"DELETE", "/v1/access-requests/" + open.ProposalID},
		{"POST", "/v1/access-requests/" + open.ProposalID + "/accept"},
		{"POST", "/v1/access-requests/" + open.ProposalID + "/reject"},
		{"POST", "/v1/proposals/" + open.ProposalID + "/accept"},
		{"GET", "/v1/access-requests"},
	} {
		res := e.do(t, "s1", try.method, try.path, `{"state":"accepted","reason":"self-approved"}`)
		if res.status != http.StatusNotFound && res.status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d %s", try.method, try.path, res.status, res.body)
		}
	}
	if p, err := admin.Get(t.Context(), open.ProposalID); err != nil || p.State != proposals.StateOpen || p.Reason != "" {
		t.Fatalf("after the sandbox's attempts: %+v, %v", p, err)
	}
}

// TestAccessRequestNotEnabled: without a proposal store the routes say so.
func TestAccessRequestNotEnabled(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	res := e.do(t, "s1", "POST", "/v1/access-requests", map[string]any{"method": "GET", "url": "https://api.example.com/x", "justification": "j"})
	if env := res.envelope(t); res.status != http.StatusNotFound || env.Reason != policy.ReasonNotEnabled {
		t.Fatalf("%d %s", res.status, res.body)
	}
}

// TestAccessWaitEndsOnStop: StopWaits (the daemon stopping) answers a
// waiting access request as it stands, and later ones at once. Each
// request asks to wait longer than its client does: one that waited would
// fail.
func TestAccessWaitEndsOnStop(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	admin := e.withAccess()
	body := `{"method":"GET","url":"https://api.example.com/x","justification":"to read x","wait_seconds":60}`
	ask := func() (int, []byte, error) { return postAccess(t, e, body) }
	type answer struct {
		status int
		body   []byte
		err    error
	}
	waiting := inBackground(func() answer { st, b, err := ask(); return answer{st, b, err} })
	waitProposal(t, admin, "s1", "to read x")
	e.api.StopWaits()
	first := <-waiting
	st, b, err := ask()
	for _, a := range []answer{first, {st, b, err}} {
		var ans AccessAnswer
		if a.err != nil || a.status != http.StatusAccepted || json.Unmarshal(a.body, &ans) != nil || ans.State != AccessOpen {
			t.Fatalf("after StopWaits: %d %s %v", a.status, a.body, a.err)
		}
	}
}

// postAccess posts body to session s1's /v1/access-requests and returns
// the answer's status and body; a client waits at most 20 s.
func postAccess(t *testing.T, e *sapiEnv, body string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", "https://"+dataplane.DefaultAPIHost+"/v1/access-requests", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := e.client(t, "s1").Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// TestAccessWaitsAreBoundedPerSession: a session already waiting on
// MaxAccessWaits access requests gets the next one answered at once, as it
// stands, rather than one more wait re-reading the database; the waits
// end when their clients leave or the daemon stops.
func TestAccessWaitsAreBoundedPerSession(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	e.withAccess()
	e.api.MaxAccessWaits = 1
	ask := func(path string) (int, []byte, error) {
		return postAccess(t, e, `{"method":"GET","url":"https://api.example.com`+path+`","justification":"to read it","wait_seconds":60}`)
	}
	waiting := inBackground(func() error { _, _, err := ask("/first"); return err })
	for deadline := time.Now().Add(20 * time.Second); ; {
		e.api.waitMu.Lock()
		n := e.api.waits["s1"]
		e.api.waitMu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first access request never began to wait")
		}
		time.Sleep(10 * time.Millisecond)
	}
	st, b, err := ask("/second")
	var ans AccessAnswer
	if err != nil || st != http.StatusAccepted || json.Unmarshal(b, &ans) != nil || ans.State != AccessOpen {
		t.Fatalf("a wait past the session's limit: %d %s %v; want it answered at once, open", st, b, err)
	}
	e.api.StopWaits()
	if err := <-waiting; err != nil {
		t.Fatalf("the first wait: %v", err)
	}
	e.api.waitMu.Lock()
	defer e.api.waitMu.Unlock()
	if len(e.api.waits) != 0 {
		t.Errorf("waits left counted: %v", e.api.waits)
	}
}
