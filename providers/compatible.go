package providers

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// maxCompatibleName bounds an OpenAI-compatible provider's name.
const maxCompatibleName = 40

// Compatible returns the OpenAI-compatible provider called name at
// hostport ("host" or "host:port", port 443 when absent). env names the
// variables that get its key placeholder; empty means NAME_API_KEY (the
// name upper-cased, '-' as '_'). Its FQN is local://openai-compatible/NAME,
// its vault entry openai-compatible-NAME, and clients find it through
// OPENAI_BASE_URL=https://HOST[:PORT]/v1. Errors say which argument is
// wrong and how to fix it.
func Compatible(name, hostport string, env []string) (Provider, error) {
	if msg := compatibleNameProblem(name); msg != "" {
		return Provider{}, fmt.Errorf("--name %q: %s", name, msg)
	}
	if hostport == "" {
		return Provider{}, fmt.Errorf("--host is required: the provider's host, e.g. --host llm.example.com or --host llm.example.com:8443")
	}
	a, err := policy.ParseAuthority(hostport, 443)
	if err != nil {
		return Provider{}, fmt.Errorf("--host %q: %v; give a host name or address with an optional port, without scheme or path", hostport, err)
	}
	host, base := a.Host, a.Host
	if strings.Contains(a.Host, ":") {
		base = "[" + a.Host + "]"
	}
	if a.Port != 443 {
		host, base = a.String(), base+":"+strconv.Itoa(a.Port)
	}
	if len(env) == 0 {
		env = []string{strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_API_KEY"}
	}
	return Provider{Name: name, FQN: CompatibleScheme + name, Hosts: []string{host}, Credential: compatibleCredential(name),
		KeyEnv: env, BaseURLEnv: "OPENAI_BASE_URL", BaseURL: "https://" + base + "/v1", Compatible: true}, nil
}

// compatibleCredential is the vault entry of the OpenAI-compatible
// provider name.
func compatibleCredential(name string) string { return "openai-compatible-" + name }

// compatibleNameProblem describes what is wrong with a provider name, or
// returns "".
func compatibleNameProblem(name string) string {
	if name == "" || len(name) > maxCompatibleName {
		return fmt.Sprintf("a name is 1 to %d characters", maxCompatibleName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '-')) {
			return "use lower-case letters, digits and '-', starting with a letter, e.g. vllm or local-llm"
		}
	}
	if _, shipped := Lookup(name); shipped || name == "openai-compatible" {
		return fmt.Sprintf("%s is the name of a shipped provider; choose another, e.g. %s-proxy", name, name)
	}
	return ""
}

// compatibleSpec generates the connector spec of an OpenAI-compatible
// provider: one tool named after the provider (tool names are unique across
// connectors), with the OpenAI API's model endpoints (responses, chat completions,
// completions, embeddings, models) at its host, the key as
// Authorization: Bearer.
func compatibleSpec(p Provider) ([]byte, error) {
	if len(p.Hosts) != 1 {
		return nil, fmt.Errorf("OpenAI-compatible provider %s needs exactly one host", p.Name)
	}
	cred := map[string]any{"kind": "api_key", "header": "Authorization", "format": "Bearer {token}"}
	op := func(name, method, path, summary, usage string) map[string]any {
		o := map[string]any{"name": name, "method": method, "path": path, "summary": summary, "hosts": p.Hosts, "credential": cred}
		if usage != "" {
			o["usage"] = usage
		}
		return o
	}
	ops := []any{
		op("create-response", "POST", "/v1/responses", "Create a model response", policy.UsageOpenAI),
		op("create-chat-completion", "POST", "/v1/chat/completions", "Create a chat completion", policy.UsageOpenAI),
		op("create-completion", "POST", "/v1/completions", "Create a text completion", policy.UsageOpenAI),
		op("create-embeddings", "POST", "/v1/embeddings", "Create embeddings", policy.UsageOpenAI),
		op("list-models", "GET", "/v1/models", "List the models", ""),
		op("get-model", "GET", "/v1/models/{model...}", "Describe one model (names may hold '/')", ""),
	}
	spec := map[string]any{
		"schema_version": policy.SchemaVersion,
		"connector":      map[string]any{"fqn": p.FQN, "version": cmp.Or(p.Version, "1.0.0")},
		"tools": []any{map[string]any{"name": p.Name, "operations": ops,
			"description": "An OpenAI-compatible model API at " + p.Hosts[0] + ": responses, chat completions, completions, embeddings and models."}},
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
