package policy

import (
	"cmp"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseSpecTestdata(t *testing.T) {
	for _, name := range []string{"gmail.json", "linear.json", "regional.json"} {
		t.Run(name, func(t *testing.T) {
			s := loadSpec(t, name)
			if s.Connector.Version != "1.2.3" || !strings.HasPrefix(s.Connector.FQN, "github://acme/aileron-connector-") {
				t.Errorf("connector = %+v", s.Connector)
			}
		})
	}
	lin := loadSpec(t, "linear.json")
	want := Credential{Kind: "api_key", Header: "Authorization", Format: "{key}"}
	if got := lin.Tools[0].Operations[0].Credential; !reflect.DeepEqual(got, want) {
		t.Errorf("linear credential = %+v, want %+v", got, want)
	}
	gm := loadSpec(t, "gmail.json")
	if got := gm.Tools[0].Operations[0].Credential; !reflect.DeepEqual(got, Credential{Kind: "oauth2"}) {
		t.Errorf("gmail string credential = %+v", got)
	}
}

const op0, op1 = "$.tools[0].operations[0]", "$.tools[0].operations[1]"

// ruleCase breaks one thing in an otherwise valid spec and names the JSON
// path and rule expected.
type ruleCase struct {
	name       string
	mutate     func(map[string]any)
	path, rule string
}

func set(k string, v any) func(map[string]any) {
	return func(s map[string]any) { op(s, 0)[k] = v }
}

func host(h string) func(map[string]any) { return set("hosts", []any{h}) }

func fqn(f string) func(map[string]any) {
	return func(s map[string]any) { s["connector"].(map[string]any)["fqn"] = f }
}

func version(v string) func(map[string]any) {
	return func(s map[string]any) { s["connector"].(map[string]any)["version"] = v }
}

func identityCases() []ruleCase {
	return []ruleCase{
		{"schema version", func(s map[string]any) { s["schema_version"] = "aileron.connector.v2" }, "$.schema_version", ruleSchemaVersion},
		{"schema version missing", func(s map[string]any) { delete(s, "schema_version") }, "$.schema_version", ruleSchemaVersion},
		{"fqn empty", fqn(""), "$.connector.fqn", ruleFQN},
		{"fqn no scheme", fqn("acme/google"), "$.connector.fqn", ruleFQN},
		{"fqn unknown scheme", fqn("https://acme/google"), "$.connector.fqn", ruleFQN},
		{"fqn owner only", fqn("github://acme"), "$.connector.fqn", ruleFQN},
		{"fqn empty segment", fqn("github://acme//google"), "$.connector.fqn", ruleFQN},
		{"fqn trailing slash", fqn("github://acme/google/"), "$.connector.fqn", ruleFQN},
		{"fqn dotdot", fqn("github://acme/../google"), "$.connector.fqn", ruleFQN},
		{"fqn dot", fqn("github://acme/./google"), "$.connector.fqn", ruleFQN},
		{"fqn bad char", fqn("github://acme/goo gle"), "$.connector.fqn", ruleFQN},
		{"fqn at version", fqn("github://acme/google@1.2.3"), "$.connector.fqn", ruleFQN},
		{"version v prefix", version("v1.2.3"), "$.connector.version", ruleSemVer},
		{"version two parts", version("1.2"), "$.connector.version", ruleSemVer},
		{"version leading zero", version("01.2.3"), "$.connector.version", ruleSemVer},
		{"version pre leading zero", version("1.2.3-01"), "$.connector.version", ruleSemVer},
		{"version latest", version("latest"), "$.connector.version", ruleSemVer},
		{"version caret range", version("^1.2.0"), "$.connector.version", ruleSemVer},
		{"version x range", version("1.2.x"), "$.connector.version", ruleSemVer},
		{"version gte range", version(">=1.0.0"), "$.connector.version", ruleSemVer},
		{"version empty pre", version("1.2.3-"), "$.connector.version", ruleSemVer},
		{"version empty build", version("1.2.3+"), "$.connector.version", ruleSemVer},
		{"version empty", version(""), "$.connector.version", ruleSemVer},
		{"version date", version("2026.04.29"), "$.connector.version", ruleSemVer},
	}
}

func nameCases() []ruleCase {
	return []ruleCase{
		{"no tools", func(s map[string]any) { s["tools"] = []any{} }, "$.tools", ruleToolsEmpty},
		{"tool without operations", func(s map[string]any) { tool0(s)["operations"] = []any{} }, "$.tools[0].operations", ruleOperationsEmpty},
		{"tool name empty", func(s map[string]any) { tool0(s)["name"] = "" }, "$.tools[0].name", ruleNameEmpty},
		{"tool name quote", func(s map[string]any) { tool0(s)["name"] = `send"mail` }, "$.tools[0].name", ruleNameChars},
		{"tool name slash", func(s map[string]any) { tool0(s)["name"] = "a/b" }, "$.tools[0].name", ruleNameChars},
		{"tool name dotdot", func(s map[string]any) { tool0(s)["name"] = ".." }, "$.tools[0].name", ruleNameReserved},
		{"tool name dash", func(s map[string]any) { tool0(s)["name"] = "-rf" }, "$.tools[0].name", ruleNameReserved},
		{"tool name duplicate", func(s map[string]any) {
			s["tools"] = append(s["tools"].([]any), baseSpec()["tools"].([]any)[0])
		}, "$.tools[1].name", ruleNameDuplicate},
		{"operation name empty", set("name", ""), op0 + ".name", ruleNameEmpty},
		{"operation name quote", set("name", `send"mail`), op0 + ".name", ruleNameChars},
		{"operation name space", set("name", "send mail"), op0 + ".name", ruleNameChars},
		{"operation name duplicate", func(s map[string]any) { op(s, 1)["name"] = "items.get" }, op1 + ".name", ruleNameDuplicate},
		{"input name empty", set("inputs", []any{map[string]any{"name": ""}}), op0 + ".inputs[0].name", ruleNameEmpty},
		{"input name bad", set("inputs", []any{map[string]any{"name": "a b"}}), op0 + ".inputs[0].name", ruleNameChars},
		{"input name duplicate", set("inputs", []any{map[string]any{"name": "q"}, map[string]any{"name": "q"}}), op0 + ".inputs[1].name", ruleNameDuplicate},
		{"input type", set("inputs", []any{map[string]any{"name": "q", "type": "str"}}), op0 + ".inputs[0].type", ruleInputType},
		{"audit name empty", set("audit", []any{map[string]any{"name": "", "source": "query.q", "redact": "keep"}}), op0 + ".audit[0].name", ruleNameEmpty},
		{"audit name bad", set("audit", []any{map[string]any{"name": "a$", "source": "query.q", "redact": "keep"}}), op0 + ".audit[0].name", ruleNameChars},
		{"audit name duplicate", set("audit", []any{
			map[string]any{"name": "a", "source": "query.q", "redact": "keep"},
			map[string]any{"name": "a", "source": "query.r", "redact": "keep"}}), op0 + ".audit[1].name", ruleNameDuplicate},
		{"audit source prefix", set("audit", []any{map[string]any{"name": "a", "source": "header.x", "redact": "keep"}}), op0 + ".audit[0].source", ruleAuditSource},
		{"audit source no name", set("audit", []any{map[string]any{"name": "a", "source": "query.", "redact": "keep"}}), op0 + ".audit[0].source", ruleAuditSource},
		{"audit source bare", set("audit", []any{map[string]any{"name": "a", "source": "q", "redact": "keep"}}), op0 + ".audit[0].source", ruleAuditSource},
		{"audit source missing path var", set("audit", []any{map[string]any{"name": "a", "source": "path.nope", "redact": "keep"}}), op0 + ".audit[0].source", ruleAuditPathVar},
		{"audit path var without path", func(s map[string]any) {
			delete(op(s, 0), "path")
		}, op0 + ".audit[0].source", ruleAuditPathVar},
		{"audit redact unknown", set("audit", []any{map[string]any{"name": "a", "source": "query.q", "redact": "mask"}}), op0 + ".audit[0].redact", ruleAuditRedact},
		{"audit redact missing", set("audit", []any{map[string]any{"name": "a", "source": "query.q"}}), op0 + ".audit[0].redact", ruleAuditRedact},
	}
}

func hostCases() []ruleCase {
	return []ruleCase{
		{"host scheme", host("https://gmail.googleapis.com/path"), op0 + ".hosts[0]", ruleHostScheme},
		{"host path", host("gmail.googleapis.com/gmail"), op0 + ".hosts[0]", ruleHostPath},
		{"host query", host("gmail.googleapis.com?alt=json"), op0 + ".hosts[0]", ruleHostQuery},
		{"host userinfo", host("token@gmail.googleapis.com"), op0 + ".hosts[0]", ruleHostUserinfo},
		{"host fragment", host("gmail.googleapis.com#x"), op0 + ".hosts[0]", ruleHostFragment},
		{"host port zero", host("gmail.googleapis.com:0"), op0 + ".hosts[0]", ruleHostPort},
		{"host port too big", host("gmail.googleapis.com:70000"), op0 + ".hosts[0]", ruleHostPort},
		{"host port leading zero", host("gmail.googleapis.com:0443"), op0 + ".hosts[0]", ruleHostPort},
		{"host port empty", host("gmail.googleapis.com:"), op0 + ".hosts[0]", ruleHostPort},
		{"host port sign", host("gmail.googleapis.com:+443"), op0 + ".hosts[0]", ruleHostPort},
		{"host empty", host(""), op0 + ".hosts[0]", ruleHostEmpty},
		{"host only port", host(":443"), op0 + ".hosts[0]", ruleHostEmpty},
		{"host wildcard", host("*.googleapis.com"), op0 + ".hosts[0]", ruleHostWildcard},
		{"host underscore", host("gmail_api.googleapis.com"), op0 + ".hosts[0]", ruleHostChars},
		{"host space", host("gmail googleapis.com"), op0 + ".hosts[0]", ruleHostChars},
		{"host empty label", host("gmail..googleapis.com"), op0 + ".hosts[0]", ruleHostChars},
		{"host two trailing dots", host("gmail.googleapis.com.."), op0 + ".hosts[0]", ruleHostChars},
		{"host leading hyphen", host("-gmail.googleapis.com"), op0 + ".hosts[0]", ruleHostChars},
		{"host numeric", host("2130706433"), op0 + ".hosts[0]", ruleHostChars},
		{"host hex label", host("foo.0x7f"), op0 + ".hosts[0]", ruleHostChars},
		{"host short ipv4", host("127.1"), op0 + ".hosts[0]", ruleHostChars},
		{"host ipv6 unbracketed", host("2001:db8::1"), op0 + ".hosts[0]", ruleHostIPv6},
		{"host ipv4 bracketed", host("[192.0.2.1]"), op0 + ".hosts[0]", ruleHostChars},
		{"host ipv6 zone", host("[fe80::1%25eth0]"), op0 + ".hosts[0]", ruleHostChars},
		{"host duplicate", set("hosts", []any{"api.example.com", "API.example.com:443"}), op0 + ".hosts[1]", ruleHostDuplicate},
	}
}

func pathCases() []ruleCase {
	return []ruleCase{
		{"method lower", set("method", "get"), op0 + ".method", ruleMethodCase},
		{"method space", set("method", "GE T"), op0 + ".method", ruleMethodToken},
		{"method colon", set("method", "GET:"), op0 + ".method", ruleMethodToken},
		{"method connect", set("method", "CONNECT"), op0 + ".method", ruleMethodConnect},
		{"path relative", set("path", "v1/items"), op0 + ".path", rulePathAbsolute},
		{"path query", set("path", "/v1/items?x=1"), op0 + ".path", rulePathQuery},
		{"path fragment", set("path", "/v1/items#x"), op0 + ".path", rulePathQuery},
		{"path dotdot", set("path", "/v1/../items"), op0 + ".path", rulePathDotSegment},
		{"path dot", set("path", "/v1/./items"), op0 + ".path", rulePathDotSegment},
		{"path encoded dotdot", set("path", "/v1/%2e%2E/items"), op0 + ".path", rulePathDotSegment},
		{"path empty segment", set("path", "/v1//items"), op0 + ".path", rulePathEmptySegment},
		{"path double slash root", set("path", "//"), op0 + ".path", rulePathEmptySegment},
		{"path encoded slash", set("path", "/v1/a%2fb"), op0 + ".path", rulePathChars},
		{"path backslash", set("path", `/v1/a\b`), op0 + ".path", rulePathChars},
		{"path bad escape", set("path", "/v1/a%zz"), op0 + ".path", rulePathChars},
		{"path empty template", set("path", "/v1/{}"), op0 + ".path", rulePathTemplate},
		{"path template space", set("path", "/v1/{a b}"), op0 + ".path", rulePathTemplate},
		{"path template digit", set("path", "/v1/{1a}"), op0 + ".path", rulePathTemplate},
		{"path template dollar", set("path", "/v1/{$}"), op0 + ".path", rulePathTemplate},
		{"path multi not last", set("path", "/v1/{x...}/y"), op0 + ".path", rulePathTemplateLast},
		{"path multi before trailing slash", set("path", "/v1/{x...}/"), op0 + ".path", rulePathTemplateLast},
		{"path template duplicate", set("path", "/v1/{x}/{x}"), op0 + ".path", rulePathTemplateDup},
		{"path template mixed", set("path", "/v1/a{b}"), op0 + ".path", rulePathTemplateMix},
		{"path template mixed suffix", set("path", "/v1/{b}.json"), op0 + ".path", rulePathTemplateMix},
		{"path stray brace", set("path", "/v1/a}"), op0 + ".path", rulePathTemplateMix},
		{"path too long", set("path", "/"+strings.Repeat("a", maxPatternLen)), op0 + ".path", rulePathLength},
	}
}

func miscCases() []ruleCase {
	return []ruleCase{
		{"approval unknown", set("approval", "maybe"), op0 + ".approval", ruleApproval},
		{"idempotency unknown", set("idempotency", "sometimes"), op0 + ".idempotency", ruleIdempotency},
		{"websocket on POST", func(s map[string]any) { op(s, 0)["method"] = "POST"; op(s, 0)["websocket"] = true }, op0 + ".websocket", ruleWebSocket},
		{"websocket without method", func(s map[string]any) { delete(op(s, 0), "method"); op(s, 0)["websocket"] = true }, op0 + ".websocket", ruleWebSocket},
		{"wrong type websocket", set("websocket", "yes"), op0 + ".websocket", ruleJSONType},
		{"unknown usage", set("usage", "claude"), op0 + ".usage", ruleUsage},
		{"wrong type usage", set("usage", true), op0 + ".usage", ruleJSONType},
		{"websocket with approval", func(s map[string]any) { op(s, 0)["websocket"] = true; op(s, 0)["approval"] = "required" }, op0 + ".websocket", ruleWebSocket},
		{"credential kind string", set("credential", "password"), op0 + ".credential", ruleCredentialKind},
		{"credential kind object", set("credential", map[string]any{"kind": "password"}), op0 + ".credential", ruleCredentialKind},
		{"credential kind missing", set("credential", map[string]any{"header": "X-Key", "format": "{key}"}), op0 + ".credential.kind", ruleCredentialKind},
		{"credential kind empty string", set("credential", ""), op0 + ".credential", ruleCredentialKind},
		{"credential header token", set("credential", map[string]any{"kind": "api_key", "header": "X Key"}), op0 + ".credential.header", ruleCredentialHeader},
		{"credential header reserved", set("credential", map[string]any{"kind": "api_key", "header": "host"}), op0 + ".credential.header", ruleCredentialHeader},
		{"credential query chars", set("credential", map[string]any{"kind": "api_key", "query": "a&b"}), op0 + ".credential.query", ruleCredentialQuery},
		{"credential header and query", set("credential", map[string]any{"kind": "api_key", "header": "X-Key", "query": "key"}), op0 + ".credential", ruleCredentialPlace},
		{"credential format no placeholder", set("credential", map[string]any{"kind": "api_key", "header": "X-Key", "format": "secret"}), op0 + ".credential.format", ruleCredentialFormat},
		{"credential format newline", set("credential", map[string]any{"kind": "bearer", "format": "Bearer {token}\r\nX: y"}), op0 + ".credential.format", ruleCredentialFormat},
		{"credential format bad placeholder", set("credential", map[string]any{"kind": "bearer", "format": "Bearer {to ken}"}), op0 + ".credential.format", ruleCredentialFormat},
		{"credential service on oauth2", set("credential", map[string]any{"kind": "oauth2", "service": "s3"}), op0 + ".credential.service", ruleCredentialSvc},
		{"credential sigv4 service chars", set("credential", map[string]any{"kind": "aws_sigv4", "service": "S3!"}), op0 + ".credential.service", ruleCredentialSvc},
		{"credential sigv4 header", set("credential", map[string]any{"kind": "aws_sigv4", "header": "Authorization"}), op0 + ".credential", ruleCredentialPlace},
		{"credential alternative empty", set("credential", map[string]any{"kind": "api_key", "header": "x-api-key",
			"alternatives": []any{map[string]any{"format": "{key}"}}}), op0 + ".credential.alternatives[0]", ruleCredentialAlt},
		{"credential alternative header token", set("credential", map[string]any{"kind": "api_key",
			"alternatives": []any{map[string]any{"header": "X Key"}}}), op0 + ".credential.alternatives[0].header", ruleCredentialHeader},
		{"credential alternative header and query", set("credential", map[string]any{"kind": "api_key",
			"alternatives": []any{map[string]any{"header": "X-Key", "query": "key"}}}), op0 + ".credential.alternatives[0]", ruleCredentialPlace},
		{"credential alternative format", set("credential", map[string]any{"kind": "api_key",
			"alternatives": []any{map[string]any{"header": "X-Key", "format": "key"}}}), op0 + ".credential.alternatives[0].format", ruleCredentialFormat},
		{"credential alternative repeats primary", set("credential", map[string]any{"kind": "api_key", "header": "x-api-key",
			"alternatives": []any{map[string]any{"header": "X-Api-Key"}}}), op0 + ".credential.alternatives[0]", ruleCredentialAlt},
		{"credential alternative repeats default header", set("credential", map[string]any{"kind": "bearer",
			"alternatives": []any{map[string]any{"header": "authorization", "format": "Token {token}"}}}), op0 + ".credential.alternatives[0]", ruleCredentialAlt},
		{"credential alternative repeats another", set("credential", map[string]any{"kind": "api_key", "header": "x-api-key",
			"alternatives": []any{map[string]any{"query": "key"}, map[string]any{"query": "key"}}}), op0 + ".credential.alternatives[1]", ruleCredentialAlt},
		{"credential alternatives on basic", set("credential", map[string]any{"kind": "basic",
			"alternatives": []any{map[string]any{"header": "X-Key"}}}), op0 + ".credential.alternatives", ruleCredentialAlt},
		{"credential alternatives on sigv4", set("credential", map[string]any{"kind": "aws_sigv4",
			"alternatives": []any{map[string]any{"header": "X-Key"}}}), op0 + ".credential.alternatives", ruleCredentialAlt},
		{"credential alternative misspelt", set("credential", map[string]any{"kind": "api_key",
			"alternative": []any{map[string]any{"header": "X-Key"}}}), op0 + ".credential.alternative", ruleUnknownField},
		{"unknown credential alternative field", set("credential", map[string]any{"kind": "api_key",
			"alternatives": []any{map[string]any{"heade": "X-Key"}}}), op0 + ".credential.alternatives[0].heade", ruleUnknownField},
		{"credential alternatives not an array", set("credential", map[string]any{"kind": "api_key",
			"alternatives": map[string]any{"header": "X-Key"}}), op0 + ".credential.alternatives", ruleJSONType},
		{"operations clash in spec", func(s map[string]any) { op(s, 1)["path"] = "/v1/items/{other}" }, op1, ruleOperationClash},
		{"operations clash across tools", func(s map[string]any) {
			t2 := map[string]any{"name": "second", "operations": []any{
				map[string]any{"name": "x", "method": "GET", "path": "/v1/items", "hosts": []any{"api.example.com:443"}}}}
			s["tools"] = append(s["tools"].([]any), t2)
		}, "$.tools[1].operations[0]", ruleOperationClash},
		{"wrong type hosts", set("hosts", "api.example.com"), op0 + ".hosts", ruleJSONType},
		{"wrong type host element", set("hosts", []any{443}), op0 + ".hosts[0]", ruleJSONType},
		{"wrong type required", set("inputs", []any{map[string]any{"name": "q", "required": "yes"}}), op0 + ".inputs[0].required", ruleJSONType},
		{"wrong type credential", set("credential", 7), op0 + ".credential", ruleJSONType},
		{"wrong type credential header", set("credential", map[string]any{"kind": "api_key", "header": true}), op0 + ".credential.header", ruleJSONType},
		{"wrong type tools", func(s map[string]any) { s["tools"] = map[string]any{} }, "$.tools", ruleJSONType},
		{"key case variant", func(s map[string]any) { op(s, 0)["Method"] = "DELETE" }, op0 + ".Method", ruleJSONCase},
		{"credential key case variant", set("credential", map[string]any{"kind": "api_key", "HEADER": "X-Key"}), op0 + ".credential.HEADER", ruleJSONCase},
		{"unknown operation field", func(s map[string]any) { op(s, 0)["aproval"] = "required" }, op0 + ".aproval", ruleUnknownField},
		{"unknown top-level field", func(s map[string]any) { s["tool"] = []any{} }, "$.tool", ruleUnknownField},
		{"unknown credential field", set("credential", map[string]any{"kind": "api_key", "heder": "X-Key"}), op0 + ".credential.heder", ruleUnknownField},
	}
}

// TestValidationRules covers every rule of the schema, one case each.
func TestValidationRules(t *testing.T) {
	var cases []ruleCase
	for _, g := range [][]ruleCase{identityCases(), nameCases(), hostCases(), pathCases(), miscCases()} {
		cases = append(cases, g...)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.mutate(s)
			_, err := ParseSpec("test.json", mustJSON(t, s))
			ve := requireProblem(t, err, tc.path, tc.rule)
			if ve.File != "test.json" || ve.Message == "" {
				t.Errorf("problem lacks file or message: %+v", ve)
			}
		})
	}
}

func TestValidSpecVariants(t *testing.T) {
	set := func(k string, v any) func(map[string]any) {
		return func(s map[string]any) { op(s, 0)[k] = v }
	}
	set1 := func(k string, v any) func(map[string]any) {
		return func(s map[string]any) { op(s, 1)[k] = v }
	}
	cases := []struct {
		name   string
		mutate func(map[string]any)
	}{
		{"base", func(map[string]any) {}},
		{"semver prerelease", func(s map[string]any) { s["connector"].(map[string]any)["version"] = "2.0.0-rc.1" }},
		{"semver build", func(s map[string]any) { s["connector"].(map[string]any)["version"] = "1.2.0+sha.abc" }},
		{"semver both", func(s map[string]any) { s["connector"].(map[string]any)["version"] = "1.0.0-alpha.0.x-y+001" }},
		{"fqn subpath", func(s map[string]any) {
			s["connector"].(map[string]any)["fqn"] = "hub://aileron/integrations/connectors/slack"
		}},
		{"fqn local", func(s map[string]any) { s["connector"].(map[string]any)["fqn"] = "local://me/my_conn.v2" }},
		{"extension fields tolerated", func(s map[string]any) { s["x-extra"] = []any{1, 2}; op(s, 0)["x-retries"] = 3 }},
		{"trailing slash path", set1("path", "/v1/items/")},
		{"root path", set1("path", "/")},
		{"multi template", set1("path", "/v1/files/{path...}")},
		{"encoded literal", set("path", "/v1/it%65ms/{id}")},
		{"host with port", set("hosts", []any{"api.example.com:8443"})},
		{"host idna and case", set("hosts", []any{"Bücher.Example."})},
		{"host ipv4", set("hosts", []any{"192.0.2.10:8080"})},
		{"host ipv6", set("hosts", []any{"[2001:db8::1]:8443", "[2001:DB8::2]"})},
		{"no method path hosts", func(s map[string]any) {
			for _, k := range []string{"method", "path", "hosts", "audit"} {
				delete(op(s, 0), k)
			}
		}},
		{"approval none", set("approval", "none")},
		{"websocket on GET", set("websocket", true)},
		{"usage anthropic", set("usage", "anthropic")},
		{"usage openai", set("usage", "openai")},
		{"usage gemini", set("usage", "gemini")},
		{"websocket false on POST", func(s map[string]any) { op(s, 0)["method"] = "POST"; op(s, 0)["websocket"] = false }},
		{"credential sigv4", set("credential", map[string]any{"kind": "aws_sigv4", "service": "execute-api"})},
		{"credential basic", set("credential", "basic")},
		{"credential alternatives", set("credential", map[string]any{"kind": "api_key", "header": "x-api-key",
			"alternatives": []any{map[string]any{"header": "Authorization", "format": "Bearer {token}"}, map[string]any{"query": "key"}}})},
		{"credential null", set("credential", nil)},
		{"literal beats template", func(s map[string]any) { op(s, 1)["path"] = "/v1/items/special" }},
		{"same path other method", func(s map[string]any) { op(s, 1)["path"] = "/v1/items/{id}"; op(s, 1)["method"] = "DELETE" }},
		{"same path other port", func(s map[string]any) {
			op(s, 1)["path"] = "/v1/items/{id}"
			op(s, 1)["hosts"] = []any{"api.example.com:8443"}
		}},
		{"single vs multi", func(s map[string]any) { op(s, 1)["path"] = "/v1/items/{rest...}" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := baseSpec()
			tc.mutate(s)
			if _, err := ParseSpec("ok.json", mustJSON(t, s)); err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
		})
	}
}

func TestParseSpecRawDocuments(t *testing.T) {
	valid := string(mustJSON(t, baseSpec()))
	cases := []struct {
		name, doc, path, rule string
	}{
		{"syntax", `{"schema_version": "aileron.connector.v1",`, "$", ruleJSON},
		{"trailing data", valid + ` {}`, "$", ruleJSON},
		{"top-level array", `[]`, "$", ruleJSONType},
		{"duplicate key", strings.Replace(valid, `"method":"GET"`, `"method":"GET","method":"DELETE"`, 1), "$.tools[0].operations[0].method", ruleJSONDuplicate},
		{"invalid utf8", "{\"schema_version\": \"\xff\"}", "$", ruleJSON},
		{"too large", `{"x":"` + strings.Repeat("a", MaxSpecSize) + `"}`, "$", ruleSize},
		{"duplicate odd key", `{"a\nb":1,"a\nb":2}`, `$["a\nb"]`, ruleJSONDuplicate},
		{"too deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), "$" + strings.Repeat("[0]", maxJSONDepth+1), ruleJSON},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec("raw.json", []byte(tc.doc))
			requireProblem(t, err, tc.path, tc.rule)
		})
	}
}

func TestValidationErrorFormat(t *testing.T) {
	s := baseSpec()
	op(s, 1)["hosts"] = []any{"https://gmail.googleapis.com/path"}
	_, err := ParseSpec("google.json", mustJSON(t, s))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("errors.As failed: %v", err)
	}
	want := `google.json: $.tools[0].operations[1].hosts[0]: host must not include a URL scheme ("https://gmail.googleapis.com/path"); write just the host, e.g. "gmail.googleapis.com"`
	if ve.Error() != want {
		t.Errorf("Error() =\n%s\nwant\n%s", ve.Error(), want)
	}
	if !errors.Is(err, ErrInvalidSpec) {
		t.Error("error does not wrap ErrInvalidSpec")
	}
}

func TestParseSpecReportsAllProblems(t *testing.T) {
	s := baseSpec()
	s["schema_version"] = "v0"
	op(s, 0)["method"] = "get"
	op(s, 1)["hosts"] = []any{"a@b.com", "x:0"}
	_, err := ParseSpec("many.json", mustJSON(t, s))
	if got := len(validationErrors(t, err)); got != 4 {
		t.Errorf("got %d problems, want 4: %v", got, err)
	}
}

func TestCredentialJSONForms(t *testing.T) {
	cases := []struct {
		in   string
		want Credential
		out  string
	}{
		{`"oauth2"`, Credential{Kind: "oauth2"}, `"oauth2"`},
		{`{"kind":"bearer"}`, Credential{Kind: "bearer"}, `"bearer"`},
		{`{"kind":"api_key","header":"Authorization","format":"{key}"}`, Credential{Kind: "api_key", Header: "Authorization", Format: "{key}"},
			`{"kind":"api_key","header":"Authorization","format":"{key}"}`},
		{`{"kind":"aws_sigv4","service":"s3"}`, Credential{Kind: "aws_sigv4", Service: "s3"}, `{"kind":"aws_sigv4","service":"s3"}`},
		{`{"kind":"api_key","alternatives":[{"query":"key"}]}`, Credential{Kind: "api_key", Alternatives: []CredentialPlace{{Query: "key"}}},
			`{"kind":"api_key","alternatives":[{"query":"key"}]}`},
	}
	for _, tc := range cases {
		var c Credential
		if err := c.UnmarshalJSON([]byte(tc.in)); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if !reflect.DeepEqual(c, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.in, c, tc.want)
		}
		out, err := c.MarshalJSON()
		if err != nil || string(out) != tc.out {
			t.Errorf("%s: marshal = %s, %v; want %s", tc.in, out, err, tc.out)
		}
	}
	var c Credential
	for _, bad := range []string{`7`, `true`, `["oauth2"]`} {
		if err := c.UnmarshalJSON([]byte(bad)); err == nil {
			t.Errorf("UnmarshalJSON(%s) accepted", bad)
		}
	}
}

func TestParseRef(t *testing.T) {
	fqn, v, err := ParseRef("github://acme/aileron-connector-google@2.0.0-rc.1+b.5")
	if err != nil || fqn != "github://acme/aileron-connector-google" || v != "2.0.0-rc.1+b.5" {
		t.Errorf("ParseRef = %q, %q, %v", fqn, v, err)
	}
	for _, bad := range []string{"", "github://acme/x", "github://acme/x@", "github://acme/x@latest", "github://acme/x@^1.0.0",
		"github://acme/x@v1.0.0", "github://acme/x@1.0.0@2.0.0", "ftp://acme/x@1.0.0", "@1.0.0"} {
		if _, _, err := ParseRef(bad); !errors.Is(err, ErrBadIdent) || strings.HasPrefix(err.Error(), ErrBadIdent.Error()) {
			t.Errorf("ParseRef(%q) = %v, want ErrBadIdent with the problem alone as its message", bad, err)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	// Ascending precedence, from semver.org §11.
	order := []string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.0+build.1", "1.2.0", "1.10.0", "2.0.0", "10.0.0"}
	for i := range order {
		for j := range order {
			got := CompareVersions(order[i], order[j])
			if want := cmp.Compare(i, j); got != want {
				t.Errorf("CompareVersions(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

// TestUnknownFieldSaysWhatWasMeant: a typo names the field it was meant
// to be, so "aproval": "required" can never install as no approval.
func TestUnknownFieldSaysWhatWasMeant(t *testing.T) {
	s := baseSpec()
	s["tools"].([]any)[0].(map[string]any)["operations"].([]any)[0].(map[string]any)["aproval"] = "required"
	_, err := ParseSpec("typo.json", mustJSON(t, s))
	if err == nil || !strings.Contains(err.Error(), `did you mean "approval"?`) || !strings.Contains(err.Error(), "typo.json") {
		t.Fatalf("ParseSpec = %v, want an unknown-field error suggesting approval", err)
	}
	s = baseSpec()
	s["tools"].([]any)[0].(map[string]any)["operations"].([]any)[0].(map[string]any)["credential"] = map[string]any{
		"kind": "api_key", "alternatives": []any{map[string]any{"heder": "X-Key"}}}
	_, err = ParseSpec("typo.json", mustJSON(t, s))
	if err == nil || !strings.Contains(err.Error(), `did you mean "header"?`) {
		t.Fatalf("ParseSpec = %v, want an unknown-field error suggesting header", err)
	}
}

func TestClosest(t *testing.T) {
	names := []string{"approval", "audit", "credential", "listen", "web_listen", "max_held_bytes", "max_held_bytes_per_session", "max_pending_per_session"}
	for in, want := range map[string]string{"aproval": "approval", "listn": "listen", "web_listn": "web_listen", "credentail": "credential",
		"max_pending": "max_pending_per_session", "max_held_bytes_per": "max_held_bytes_per_session", "max_held": "max_held_bytes"} {
		if got, ok := Closest(in, names); !ok || got != want {
			t.Errorf("Closest(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"zzz", "approval", "", "something_else_entirely", "max"} {
		if got, ok := Closest(in, names); ok {
			t.Errorf("Closest(%q) = %q; want no suggestion", in, got)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"prot", "port", 1}, {"listn", "listen", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
