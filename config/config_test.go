package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "aileron.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsNeedNoFile(t *testing.T) {
	home := t.TempDir()
	c, err := Load(Options{Environ: []string{"AILERON_HOME=" + home}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.Listen != "127.0.0.1:9080" || c.Home != home || c.Admin.Socket != filepath.Join(home, "admin.sock") {
		t.Errorf("defaults: %+v", c)
	}
	if c.Proxy.HandshakeTimeout != 10*time.Second || len(c.Egress.AllowCIDRs) != 0 || len(c.Upstream.Resolve) != 0 {
		t.Errorf("defaults weaken nothing and bound handshakes: %+v", c)
	}
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	file := write(t, "proxy:\n  listen: 127.0.0.1:7000\n  passthrough: [{host: '*.github.com', port: 443}]\nupstream:\n  resolve: {'api.example.com:443': '192.0.2.7:8443'}\n")
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("listen", "", "")
	fs.String("unrelated", "", "")
	env := []string{"HOME=" + t.TempDir(), "AILERON_PROXY__IDLE_TIMEOUT=3m", `AILERON_EGRESS__ALLOW_CIDRS=["10.1.0.0/16"]`}
	c, err := Load(Options{File: file, Environ: env, Flags: fs, FlagKeys: map[string]string{"listen": "proxy.listen"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.Listen != "127.0.0.1:7000" || c.Proxy.IdleTimeout != 3*time.Minute {
		t.Errorf("file/env: %+v", c.Proxy)
	}
	if len(c.Egress.AllowCIDRs) != 1 || c.Egress.AllowCIDRs[0] != "10.1.0.0/16" {
		t.Errorf("env list: %v", c.Egress.AllowCIDRs)
	}
	if c.Upstream.Resolve["api.example.com:443"] != "192.0.2.7:8443" || c.Proxy.Passthrough[0].Host != "*.github.com" {
		t.Errorf("file maps/lists: %+v %+v", c.Upstream, c.Proxy.Passthrough)
	}
	if err := fs.Parse([]string{"--listen", "127.0.0.1:7001"}); err != nil {
		t.Fatal(err)
	}
	c, err = Load(Options{File: file, Environ: env, Flags: fs, FlagKeys: map[string]string{"listen": "proxy.listen"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Proxy.Listen != "127.0.0.1:7001" {
		t.Errorf("flag did not win: %s", c.Proxy.Listen)
	}
}

func TestInvalidValuesNameTheKey(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"proxy: {listen: nonsense}", "proxy.listen"},
		{"proxy: {passthrough: [{host: 'https://x.com/', port: 443}]}", "proxy.passthrough[0].host"},
		{"proxy: {passthrough: [{host: 'x.com', port: 70000}]}", "proxy.passthrough[0].port"},
		{"proxy: {handshake_timeout: -1s}", "proxy.handshake_timeout"},
		{"proxy: {max_checked_body: 0}", "proxy.max_checked_body: 0 is out of range"},
		{"proxy: {max_checked_body: 16777217}", "proxy.max_checked_body: 16777217 is out of range"},
		{"proxy: {max_checked_bytes: 5}", `did you mean "proxy.max_checked_body"?`},
		{"upstream: {resolve: {'api.example.com': '1.2.3.4:443'}}", `upstream.resolve["api.example.com"]`},
		{"upstream: {resolve: {'api.example.com:443': 'example.net:443'}}", "is not ip:port"},
		{"upstream: {ca_files: [/nonexistent/root.pem]}", "upstream.ca_files[0]"},
		{"egress: {allow_cidrs: [10.0.0.0]}", "egress.allow_cidrs[0]"},
		{"log: {level: loud}", "log.level"},
		{"sandbox: {link_cidr: 10.0.0.0/29}", "sandbox.link_cidr"},
		{"sandbox: {synthetic_cidr: 'fd00::/64'}", "sandbox.synthetic_cidr"},
		{"sandbox: {synthetic_cidr: 10.237.0.0/24}", "overlaps sandbox.link_cidr"},
		{"sandbox: {synthetic_cidr6: 'fd00:a11e:f00d:1::/64'}", "overlaps sandbox.link_cidr6"},
		{"proxy: [1, 2", "aileron.yaml"},
		{"admin: {metrics_listen: 'localhost:9092'}", "admin.metrics_listen"},
		{"admin: {web_listen: '0.0.0.0:9443'}", "is not loopback: the approvals page decides what leaves"},
		{"admin: {web_tls_cert: /nonexistent.pem}", "go together"},
		{"admin: {web_hosts: ['https://approvals.example']}", "admin.web_hosts[0]"},
		{"admin: {web_hosts: [approvals.example.com]}", "served only over HTTPS"},
		{"approval: {webhooks: [{url: 'http://chat.example/hook', secret_file: /s}]}", "approval.webhooks[0].url"},
		{"approval: {webhooks: [{url: 'ftp://chat.example/', secret_file: /s}]}", "is not an https://host/path URL"},
		{"approval: {webhooks: [{url: 'https://chat.example/hook'}]}", "approval.webhooks[0].secret_file"},
		{"approval: {webhooks: [{url: 'https://chat.example/hook', secret: x}]}", `did you mean "approval.webhooks[0].secret_file"?`},
		{"audit: {checkpoint_every: 1}", "audit.checkpoint_every"},
		{"audit: {checkpoint_interval: 0s}", "audit.checkpoint_interval"},
		{"audit: {witnesses: [{url: 'witness:7380', key: 'w+1+AA'}]}", "audit.witnesses[0].url"},
		{"audit: {witnesses: [{url: 'http://witness:7380', key: 'nokey'}]}", "audit.witnesses[0].key"},
		{"audit: {witnesses: [{url: 'https://ops:s3cret@witness:7380', key: 'w+1+AA'}]}", "carries a user, password or query"},
		{"audit: {witnesses: [{url: 'http://witness:7380', kye: 'w+1+AA'}]}", `did you mean "audit.witnesses[0].key"?`},
		{"state: {backend: mysql}", "state.backend"},
		{"state: {backend: postgres}", "state.dsn: is empty"},
		{"state: {dsn: 'postgres://db/aileron'}", "state.backend is sqlite"},
		{"state: {node: 'Node 1'}", "state.node"},
		{"state: {fleet_key_file: /etc/aileron/fleet.key}", "state.backend is sqlite, which has no fleet"},
		{"state: {backend: postgres, dns: x}", `did you mean "state.dsn"?`},
		{"store: {sources: [{authority: github, base_url: 'http://github.com'}]}", "store.sources[0].base_url: \"http://github.com\" is not an https URL"},
		{"store: {sources: [{authority: github, base_url: 'https://tok@github.com'}]}", "store.sources[0].base_url: carries a user"},
		{"store: {sources: [{authority: githb, base_url: 'https://github.com'}]}", `"githb" is not a source authority; did you mean "github"?`},
		{"store: {sources: [{authority: github}]}", "store.sources[0].base_url"},
		{"store: {sources: [{mirror: relative/dir}]}", "store.sources[0].mirror: \"relative/dir\" is not an absolute path"},
		{"store: {sources: [{mirror: /m, authority: github, base_url: 'https://github.com'}]}", "store.sources[0]: sets mirror and authority/base_url"},
		{"store: {sources: [{}]}", "store.sources[0]: is empty"},
		{"store: {sources: [{authority: github, baseurl: 'https://github.com'}]}", `did you mean "store.sources[0].base_url"?`},
		{"store: {source: []}", `did you mean "store.sources"?`},
	} {
		_, err := Load(Options{File: write(t, c.yaml), Environ: []string{"HOME=" + t.TempDir()}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want mention of %q", c.yaml, err, c.want)
		}
	}
}

func TestYAMLRoundTrips(t *testing.T) {
	home := t.TempDir()
	c, err := Load(Options{Environ: []string{"AILERON_HOME=" + home}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(Options{File: write(t, string(b)), Environ: []string{"HOME=/nonexistent"}})
	if err != nil {
		t.Fatalf("printed config does not load back: %v\n%s", err, b)
	}
	if again.Home != home || again.Proxy.TunnelIdleTimeout != c.Proxy.TunnelIdleTimeout {
		t.Errorf("round trip changed values:\n%s", b)
	}
}

// TestTyposAreErrors: an unknown key in the file or the environment, or a
// duration without a unit, stops Load naming the key and what was meant,
// instead of leaving the setting at its default.
func TestTyposAreErrors(t *testing.T) {
	home := "AILERON_HOME=" + t.TempDir()
	for _, tc := range []struct {
		name, file string
		env        []string
		says       []string
	}{
		{"file key", "proxy:\n  listn: 0.0.0.0:9\n", nil, []string{`unknown key "proxy.listn"`, `did you mean "proxy.listen"?`}},
		{"file nested key", "admin:\n  web_listn: 127.0.0.1:1\n", nil, []string{`"admin.web_listn"`, `did you mean "admin.web_listen"?`}},
		{"file section", "proxi:\n  listen: 127.0.0.1:1\n", nil, []string{`unknown key "proxi"`, `did you mean "proxy"?`}},
		{"file list entry", "proxy:\n  passthrough: [{host: a.example, prot: 443}]\n", nil, []string{`"proxy.passthrough[0].prot"`, `did you mean "proxy.passthrough[0].port"?`}},
		{"bare number duration", "sessions:\n  default_ttl: 5\n", nil, []string{"sessions.default_ttl: 5 has no unit"}},
		{"env key", "", []string{"AILERON_PROXY__LISTN=0.0.0.0:9"}, []string{"AILERON_PROXY__LISTN", "did you mean AILERON_PROXY__LISTEN?"}},
		{"env single underscore", "", []string{"AILERON_PROXY_LISTEN=0.0.0.0:9"}, []string{"did you mean AILERON_PROXY__LISTEN? (a double underscore nests)"}},
		{"env bare number duration", "", []string{"AILERON_APPROVAL__TTL=5"}, []string{"AILERON_APPROVAL__TTL (approval.ttl)", "has no unit", `"5s"`}},
		{"quoted bare duration", "approval:\n  hold: \"30\"\n", nil, []string{"approval.hold", `"30" has no unit`}},
		{"not a duration", "approval:\n  hold: soon\n", nil, []string{"approval.hold", `"soon" is not a duration`}},
		{"action timeout out of range", "actions:\n  default_timeout: 2h\n", nil, []string{"actions.default_timeout: 2h0m0s is out of range", `"1s" and "1h"`}},
		{"action timeout too short", "actions:\n  default_timeout: 10ms\n", nil, []string{"actions.default_timeout", "out of range"}},
		{"size with a unit", "approval:\n  max_held_bytes: 64MiB\n", nil, []string{"approval.max_held_bytes", `"64MiB" is not a whole number`, "8388608"}},
		{"env size with a unit", "", []string{"AILERON_PROXY__BODY_MIN_RATE=1k"}, []string{"AILERON_PROXY__BODY_MIN_RATE (proxy.body_min_rate)", "whole number"}},
		{"env key cut short", "", []string{"AILERON_APPROVAL__MAX_HELD=1"}, []string{"did you mean AILERON_APPROVAL__MAX_HELD_BYTES"}},
		{"env section given a value", "", []string{"AILERON_SESSIONS=1"}, []string{"AILERON_SESSIONS sets the section sessions", "AILERON_SESSIONS__DEFAULT_TTL"}},
		{"env list without brackets", "", []string{"AILERON_EGRESS__ALLOW_CIDRS=10.0.0.0/8,192.0.2.0/24"}, []string{"is a list: write it in brackets"}},
		{"env list with a typo inside", "", []string{"AILERON_PROXY__PASSTHROUGH=[{hots: x.example, port: 443}]"}, []string{`did you mean "proxy.passthrough[0].host"`}},
		{"fraction of a byte", "approval:\n  max_body: 1.5\n", nil, []string{"approval.max_body", "1.5 is not a whole number"}},
		{"max_body too big names only itself", "approval:\n  max_body: 99999999\n", nil, []string{"approval.max_body: 99999999 is out of range"}},
		{"not a boolean", "store:\n  require_signature: \"yes\"\n", nil, []string{"store.require_signature", `"yes" is not a boolean; write true or false`}},
		{"env not a boolean", "", []string{"AILERON_STORE__REQUIRE_SIGNATURE=on-ish"}, []string{"AILERON_STORE__REQUIRE_SIGNATURE (store.require_signature)", "write true or false"}},
		{"store key", "store:\n  require_signatures: true\n", nil, []string{`did you mean "store.require_signature"?`}},
		{"max_body over the per-session budget", "approval:\n  max_body: 16777216\n", nil,
			[]string{"approval.max_held_bytes_per_session: 8388608 is less than approval.max_body (16777216)", "raise it to at least 16777216"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Environ: append([]string{home}, tc.env...)}
			if tc.file != "" {
				opts.File = write(t, tc.file)
			}
			_, err := Load(opts)
			if err == nil {
				t.Fatal("Load accepted it")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	// What is not a typo stays accepted: map keys under upstream.resolve,
	// AILERON_* variables a sandbox receives, durations with units.
	file := write(t, "upstream:\n  resolve: {'api.example.com:443': '192.0.2.7:8443'}\nsessions:\n  default_ttl: 90m\n")
	env := []string{home, "AILERON_API_URL=https://aileron.internal/v1", "AILERON_SESSION_ID=s_x", "AILERON_PROXY__IDLE_TIMEOUT=3m"}
	if _, err := Load(Options{File: file, Environ: env}); err != nil {
		t.Fatalf("Load refused a valid configuration: %v", err)
	}
	c, err := Load(Options{File: write(t, "store:\n  require_signature: true\n"), Environ: []string{home}})
	if err != nil || !c.Store.RequireSignature {
		t.Fatalf("store.require_signature: true = %+v, %v", c.Store, err)
	}
	if c, err := Load(Options{Environ: []string{home, "AILERON_STORE__REQUIRE_SIGNATURE=true"}}); err != nil || !c.Store.RequireSignature {
		t.Fatalf("AILERON_STORE__REQUIRE_SIGNATURE=true = %+v, %v", c.Store, err)
	}
}

func TestChanged(t *testing.T) {
	a, err := Load(Options{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	b := *a
	b.Approval.Hold *= 2
	b.Proxy.Passthrough = []Passthrough{{Host: "x.example", Port: 443}}
	if got := strings.Join(Changed(a, &b), " "); got != "approval.hold proxy.passthrough" {
		t.Errorf("Changed = %q, want the two keys that differ", got)
	}
	if got := Changed(a, a); len(got) != 0 {
		t.Errorf("Changed(a, a) = %v", got)
	}
}

func TestMaskDSN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://aileron:s3cret@db:5432/aileron?sslmode=verify-full", "postgres://aileron:xxxxx@db:5432/aileron?sslmode=verify-full"},
		{"postgres://aileron@db/aileron?password=s3cret", "postgres://aileron@db/aileron?password=xxxxx"},
		{"host=db user=aileron password=s3cret dbname=aileron", "host=db user=aileron password=xxxxx dbname=aileron"},
		{"host=db password = 'with space s3cret' dbname=x", "host=db password=xxxxx dbname=x"},
		{"host=db user=aileron", "host=db user=aileron"},
		{"postgres://u:s3cret#x@db/aileron", "postgres://xxxxx"},
		{"postgres://u:s3c%zzret@db/aileron", "postgres://xxxxx"},
		{"postgres://u:pw@db:bad/x?password=s3cret", "postgres://xxxxx"},
		{"user=aileron password=s3cret host=db application_name=a://b", "user=aileron password=xxxxx host=db application_name=a://b"},
		{"host=db password=s3cret://x dbname=y", "host=db password=xxxxx dbname=y"},
		{"postgres://u@db/aileron?sslpassword=s3cret", "postgres://u@db/aileron?sslpassword=xxxxx"},
		{"host=db sslpassword=s3cret", "host=db sslpassword=xxxxx"},
		{`host=db password=s3c\ ret\ s3cret dbname=x`, "host=db password=xxxxx dbname=x"}, // an escaped space is part of the value
	} {
		if got := MaskDSN(tc.in); got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("MaskDSN(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	c, err := Load(Options{File: write(t, "state: {backend: postgres, dsn: 'postgres://a:s3cret@db/x'}"), Environ: []string{"HOME=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.YAML()
	if err != nil || strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "xxxxx") {
		t.Errorf("config YAML shows the DSN's password or lost it: %v\n%s", err, b)
	}
}

// store.sources takes github and gitlab release sources and mirrors, in
// the order given.
func TestStoreSources(t *testing.T) {
	c, err := Load(Options{File: write(t, "store:\n  sources:\n"+
		"    - {authority: github, base_url: 'https://github.com'}\n"+
		"    - {authority: gitlab, base_url: 'https://gitlab.example.com/'}\n"+
		"    - {mirror: /srv/aileron-mirror}\n"), Environ: []string{"HOME=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	want := []StoreSource{{Authority: "github", BaseURL: "https://github.com"}, {Authority: "gitlab", BaseURL: "https://gitlab.example.com/"}, {Mirror: "/srv/aileron-mirror"}}
	if !reflect.DeepEqual(c.Store.Sources, want) {
		t.Errorf("sources = %+v, want %+v", c.Store.Sources, want)
	}
}
