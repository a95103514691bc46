package providers

import (
	"slices"
	"strings"
	"testing"
)

func TestCompatible(t *testing.T) {
	tests := []struct {
		name, host string
		env        []string
		wantErr    string
		hosts      []string
		baseURL    string
		keyEnv     []string
	}{
		{name: "vllm", host: "llm.example.com", hosts: []string{"llm.example.com"}, baseURL: "https://llm.example.com/v1", keyEnv: []string{"VLLM_API_KEY"}},
		{name: "local-llm", host: "LLM.example.com:8443", env: []string{"OPENAI_API_KEY"},
			hosts: []string{"llm.example.com:8443"}, baseURL: "https://llm.example.com:8443/v1", keyEnv: []string{"OPENAI_API_KEY"}},
		{name: "v6", host: "[2001:db8::1]:8443", hosts: []string{"[2001:db8::1]:8443"}, baseURL: "https://[2001:db8::1]:8443/v1", keyEnv: []string{"V6_API_KEY"}},
		{name: "", host: "llm.example.com", wantErr: "--name"},
		{name: "Vllm", host: "llm.example.com", wantErr: "lower-case"},
		{name: "1llm", host: "llm.example.com", wantErr: "starting with a letter"},
		{name: "my_llm", host: "llm.example.com", wantErr: "lower-case"},
		{name: strings.Repeat("a", 41), host: "llm.example.com", wantErr: "1 to 40"},
		{name: "openai", host: "llm.example.com", wantErr: "shipped provider"},
		{name: "openai-compatible", host: "llm.example.com", wantErr: "shipped provider"},
		{name: "vllm", host: "", wantErr: "--host is required"},
		{name: "vllm", host: "https://llm.example.com", wantErr: "--host"},
		{name: "vllm", host: "llm.example.com/v1", wantErr: "--host"},
		{name: "vllm", host: "llm.example.com:0", wantErr: "--host"},
	}
	for _, tc := range tests {
		p, err := Compatible(tc.name, tc.host, tc.env)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Compatible(%q, %q) = %v, want an error with %q", tc.name, tc.host, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Compatible(%q, %q): %v", tc.name, tc.host, err)
			continue
		}
		if !slices.Equal(p.Hosts, tc.hosts) || p.BaseURL != tc.baseURL || !slices.Equal(p.KeyEnv, tc.keyEnv) ||
			p.FQN != CompatibleScheme+tc.name || p.Credential != "openai-compatible-"+tc.name {
			t.Errorf("Compatible(%q, %q) = %+v", tc.name, tc.host, p)
		}
		s := specOf(t, p)
		for _, op := range s.Tools[0].Operations {
			if !slices.Equal(op.Hosts, tc.hosts) {
				t.Errorf("%s: operation %s hosts %v", tc.name, op.Name, op.Hosts)
			}
		}
	}
}

func TestStatusReady(t *testing.T) {
	an, _ := Lookup("anthropic")
	tests := []struct {
		facts   Facts
		wantErr string
	}{
		{Facts{}, "is not installed; run `aileron provider add anthropic` first"},
		{Facts{Installed: []string{an.FQN}}, "has no key bound; run `aileron provider add anthropic`"},
		{Facts{Installed: []string{an.FQN}, Bound: map[string][]string{an.FQN: {"ANTHROPIC_API_KEY"}}}, ""},
	}
	for _, tc := range tests {
		st := tc.facts.Status(an)
		err := st.Ready()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Ready() with %+v = %v, want %q", tc.facts, err, tc.wantErr)
		}
	}
	all := Facts{Installed: []string{CompatibleScheme + "vllm", "hub://aileron/openai"}}.All()
	if len(all) != 4 || all[3].Name != "vllm" || !all[3].Installed || all[3].Bound || !all[1].Installed || all[0].Installed {
		t.Errorf("All = %+v", all)
	}
	if err := all[3].Ready(); err == nil || !strings.Contains(err.Error(), "provider add openai-compatible --name vllm --host HOST[:PORT]") {
		t.Errorf("Ready of an unbound OpenAI-compatible provider: %v", err)
	}
	if _, err := Spec(Provider{Name: "nope"}); err == nil || !strings.Contains(err.Error(), "anthropic, openai, gemini") {
		t.Errorf("Spec of an unknown provider: %v", err)
	}
}
