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
