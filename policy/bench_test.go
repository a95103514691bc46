package policy

import "testing"

func BenchmarkDecide(b *testing.B) {
	p := testPolicy(b)
	scope := []string{fqnGoogle, fqnLinear, fqnRegional}
	cases := []struct {
		name string
		args Args
		want Verdict
	}{
		{"literal", Args{Method: "GET", Host: "gmail.googleapis.com", Port: 443, Path: "/gmail/v1/users/me/messages", Connectors: scope}, Allow},
		{"templated", Args{Method: "GET", Host: "gmail.googleapis.com", Port: 443, Path: "/gmail/v1/users/me/messages/18c2f3a9d0e1", Connectors: scope}, Allow},
		{"rest", Args{Method: "GET", Host: "api.eu.example.com", Port: 443, Path: "/v2/files/exports/2026/q1.csv"}, Allow},
		{"miss", Args{Method: "GET", Host: "gmail.googleapis.com", Port: 443, Path: "/gmail/v1/users/other/messages"}, Deny},
		{"unknown_host", Args{Method: "GET", Host: "evil.example.net", Port: 443, Path: "/x"}, Deny},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d := p.Decide(tc.args); d.Verdict != tc.want {
					b.Fatalf("verdict %v", d.Verdict)
				}
			}
		})
	}
}

func BenchmarkCheckPath(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckPath("/gmail/v1/users/me/messages/18c2f3a9d0e1"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalHost(b *testing.B) {
	for _, h := range []string{"gmail.googleapis.com", "Gmail.GoogleAPIs.com.", "bücher.example"} {
		b.Run(h, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CanonicalHost(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseSpec(b *testing.B) {
	data := mustJSON(b, loadSpec(b, "gmail.json"))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSpec("gmail.json", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckArguments checks a small JSON body ("mail only to
// @example.com", "max_tokens at most 4096") and a query, to set against
// BenchmarkDecide: the check runs only for operations with a schema.
func BenchmarkCheckArguments(b *testing.B) {
	spec, err := ParseSpec("bench.json", []byte(`{"schema_version":"aileron.connector.v1",
 "connector":{"fqn":"local://bench/args","version":"1.0.0"},
 "tools":[{"name":"t","operations":[
  {"name":"send","method":"POST","path":"/v1/mail","hosts":["api.example.com"],
   "inputs":[{"name":"to","required":true,"format":"email","pattern":"@example\\.com$"},
             {"name":"max_tokens","type":"integer","maximum":4096},{"name":"subject","maxLength":200}]},
  {"name":"list","method":"GET","path":"/v1/items/{id}","hosts":["api.example.com"],
   "inputs":[{"name":"id","pattern":"^[0-9]+$"},{"name":"limit","type":"integer","maximum":100}]}]}]}`))
	if err != nil {
		b.Fatal(err)
	}
	p, errs := Compile([]Source{{Spec: spec, Hash: "h", Origin: "bench.json"}}, nil)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	send, _ := p.Lookup("local://bench/args", "t", "send")
	list, _ := p.Lookup("local://bench/args", "t", "list")
	cases := []struct {
		name string
		op   *Operation
		v    ArgumentValues
	}{
		{"json_body", send, ArgumentValues{ContentType: "application/json",
			Body: []byte(`{"to":"ann@example.com","max_tokens":1024,"subject":"Quarterly numbers","text":"see attached"}`)}},
		{"path_query", list, ArgumentValues{Path: map[string]string{"id": "42"}, Query: map[string][]string{"limit": {"10"}}}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := tc.op.CheckArguments(tc.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
