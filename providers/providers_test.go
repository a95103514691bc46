package providers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/store"
)

// specOf parses provider p's package.
func specOf(t *testing.T, p Provider) *policy.Spec {
	t.Helper()
	data, err := Spec(p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := policy.ParseSpec(p.Name, data)
	if err != nil {
		t.Fatalf("%s's package does not validate: %v", p.Name, err)
	}
	return s
}

// TestShippedPackagesMatchTheTable checks each embedded spec against the
// provider table: FQN, hosts, a credential on every operation, usage on
// every model call, and nothing under the agents' own paths.
func TestShippedPackagesMatchTheTable(t *testing.T) {
	for _, p := range Known() {
		t.Run(p.Name, func(t *testing.T) {
			s := specOf(t, p)
			if s.Connector.FQN != p.FQN {
				t.Errorf("spec FQN %s, table %s", s.Connector.FQN, p.FQN)
			}
			if len(p.KeyEnv) == 0 || p.Credential == "" {
				t.Errorf("table entry lacks key variables or a credential name: %+v", p)
			}
			models := 0
			for _, tool := range s.Tools {
				for _, op := range tool.Operations {
					if !slices.Equal(op.Hosts, p.Hosts) {
						t.Errorf("%s hosts %v, table %v", op.Name, op.Hosts, p.Hosts)
					}
					if op.Credential.Kind != policy.CredentialAPIKey {
						t.Errorf("%s credential %+v, want api_key", op.Name, op.Credential)
					}
					if strings.HasPrefix(op.Path, "/api/") {
						t.Errorf("%s covers an agent's own endpoint %s", op.Name, op.Path)
					}
					if op.Usage != "" {
						models++
						if op.Usage != p.Name {
							t.Errorf("%s usage %q, want %q", op.Name, op.Usage, p.Name)
						}
					} else if op.Method == http.MethodPost && !strings.Contains(op.Path, "{") && !strings.Contains(op.Name, "count") {
						// every POST but token counting (free, no model call) makes a model work
						t.Errorf("%s (POST %s) is not marked as a model call", op.Name, op.Path)
					}
				}
			}
			if models == 0 {
				t.Error("no operation is marked as a model call")
			}
		})
	}
}

// TestShippedPackagesDecide compiles the three packages together and asks
// the policy about the requests the SDKs and CLIs send, and about the
// agents' own endpoints, which must match nothing.
func TestShippedPackagesDecide(t *testing.T) {
	var srcs []policy.Source
	for i, p := range Known() {
		srcs = append(srcs, policy.Source{Spec: specOf(t, p), Hash: strings.Repeat(string(rune('a'+i)), 64), Origin: p.Name})
	}
	pol, errs := policy.Compile(srcs, nil)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	tests := []struct {
		method, url, op, usage string // op "" = no operation
		upgrade                bool
	}{
		{"POST", "https://api.anthropic.com/v1/messages", "create-message", "anthropic", false},
		{"POST", "https://api.anthropic.com/v1/messages?beta=true", "create-message", "anthropic", false},
		{"POST", "https://api.anthropic.com/v1/messages/count_tokens", "count-tokens", "", false}, // free: no model call
		{"GET", "https://api.anthropic.com/v1/models/claude-sonnet-4-5", "get-model", "", false},
		{"POST", "https://api.anthropic.com/v1/messages/batches", "create-batch", "anthropic", false},
		{"GET", "https://api.anthropic.com/v1/messages/batches/msgbatch_01/results", "get-batch-results", "", false},
		{"GET", "https://api.anthropic.com/api/claude_code/settings", "", "", false},
		{"GET", "https://api.anthropic.com/api/claude_code/policy_limits", "", "", false},
		{"POST", "https://api.anthropic.com/api/event_logging/batch", "", "", false},
		{"GET", "https://api.anthropic.com/api/claude_cli/bootstrap", "", "", false},
		{"POST", "https://api.openai.com/v1/responses", "create-response", "openai", false},
		{"GET", "https://api.openai.com/v1/responses", "response-socket", "openai", true},
		{"GET", "https://api.openai.com/v1/responses/resp_1", "get-response", "", false},
		{"POST", "https://api.openai.com/v1/responses/compact", "compact-response", "openai", false},
		{"POST", "https://api.openai.com/v1/chat/completions", "create-chat-completion", "openai", false},
		{"POST", "https://api.openai.com/v1/embeddings", "create-embeddings", "openai", false},
		{"GET", "https://api.openai.com/v1/models", "list-models", "", false},
		{"POST", "https://api.openai.com/v1/files", "", "", false},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent", "call-model-v1beta", "gemini", false},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "call-model-v1beta", "gemini", false},
		{"POST", "https://generativelanguage.googleapis.com/v1/models/gemini-2.5-flash:countTokens", "call-model-v1", "gemini", false},
		{"GET", "https://generativelanguage.googleapis.com/v1beta/models", "list-models-v1beta", "", false},
		{"POST", "https://generativelanguage.googleapis.com/v1beta/files", "", "", false},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		d := pol.Decide(policy.Args{Method: tc.method, Host: u.Hostname(), Port: 443, Path: u.EscapedPath()})
		if tc.upgrade && d.Op != nil && !d.Op.Spec.WebSocket {
			t.Errorf("%s %s: operation %s does not allow a WebSocket", tc.method, tc.url, d.Op.Spec.Name)
		}
		switch {
		case tc.op == "" && d.Verdict != policy.Deny:
			t.Errorf("%s %s: %v, want a denial", tc.method, tc.url, d.Verdict)
		case tc.op == "" && d.Reason != policy.ReasonNoMatchingOperation:
			t.Errorf("%s %s: reason %s, want no_matching_operation", tc.method, tc.url, d.Reason)
		case tc.op != "" && (d.Op == nil || d.Op.Spec.Name != tc.op):
			t.Errorf("%s %s: %v %s, want operation %s", tc.method, tc.url, d.Verdict, d.Reason, tc.op)
		case tc.op != "" && d.Op.Spec.Usage != tc.usage:
			t.Errorf("%s %s: usage %q, want %q", tc.method, tc.url, d.Op.Spec.Usage, tc.usage)
		}
	}
	// A model API's request streams to it: a prompt is often larger than
	// proxy.max_checked_body, and its fields take shapes no simple input
	// type states (Anthropic's system is a string or a list of blocks). So
	// no shipped operation declares arguments the proxy would check.
	for _, o := range pol.Operations() {
		if o.ChecksBody() || o.InputSchema() != nil {
			t.Errorf("%s/%s declares arguments: its requests would be read whole and checked (%s)", o.FQN, o.Spec.Name, o.InputSchema())
		}
	}
}

// TestPackagesInstall writes each package, the shipped ones and a
// generated OpenAI-compatible one, and installs it through a real store:
// validation and content hashing as for any package; a second install of
// the same content is the same version and hash.
func TestPackagesInstall(t *testing.T) {
	home, db := testkit.HomeDB(t)
	st := &store.Store{Dir: filepath.Join(home, "store"), DB: db}
	var compat []Provider // two of them: their tools must not clash
	for _, name := range []string{"vllm", "router"} {
		p, err := Compatible(name, name+".example.com:8443", nil)
		if err != nil {
			t.Fatal(err)
		}
		compat = append(compat, p)
	}
	for _, p := range append(Known(), compat...) {
		dir, err := WritePackage(p, filepath.Join(t.TempDir(), p.Name))
		if err != nil {
			t.Fatal(err)
		}
		var first store.Installed
		for range 2 {
			active, errs := st.Load(t.Context())
			if len(errs) != 0 {
				t.Fatal(errs)
			}
			offer, err := st.Offer(t.Context(), dir)
			if err != nil {
				t.Fatal(err)
			}
			inst, err := st.Install(t.Context(), dir, active, store.Consent{Hash: offer.Hash, By: "test", Via: store.ViaProvider})
			if err != nil {
				t.Fatalf("installing %s: %v", p.Name, err)
			}
			if inst.FQN != p.FQN || !inst.Active {
				t.Errorf("installed %+v, want %s active", inst, p.FQN)
			}
			if first.Hash != "" && inst.Hash != first.Hash {
				t.Errorf("a second install of %s changed its hash", p.Name)
			}
			first = inst
		}
	}
	if problems := st.Verify(t.Context()); len(problems) != 0 {
		t.Errorf("Verify: %v", problems)
	}
}

// TestStatusJSON: an unbound provider's variables are an empty list in
// JSON (`provider list --json`), not null.
func TestStatusJSON(t *testing.T) {
	f := Facts{Installed: []string{"hub://aileron/openai"}, Bound: map[string][]string{"hub://aileron/gemini": {"GEMINI_API_KEY"}}}
	for _, s := range f.All() {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"env":[`) {
			t.Errorf("%s: %s; want env as a list", s.Name, b)
		}
	}
}
