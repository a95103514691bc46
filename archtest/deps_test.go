package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/aileronhq/aileron"

// allowed lists, per top-level package, the non-standard imports it may
// have: module packages by their short name, third-party modules by prefix.
// cmd, integration, bench, examples and archtest may import anything.
var allowed = map[string][]string{
	"ca":        {},
	"policy":    {"golang.org/x/net/idna", "github.com/santhosh-tekuri/jsonschema/v6", "github.com/santhosh-tekuri/jsonschema/v6/"},
	"inject":    {"policy", "golang.org/x/oauth2", "github.com/aws/"},
	"printable": {},
	"usage":     {},
	"audit":     {"printable", "github.com/rs/zerolog", "golang.org/x/mod/sumdb/", "golang.org/x/sys/"},
	"dataplane": {"ca", "policy", "inject", "audit", "printable", "github.com/elazarl/goproxy", "golang.org/x/net/http2", "golang.org/x/net/http/httpguts", "github.com/rs/zerolog"},
	"action":    {"policy", "github.com/BurntSushi/toml"},
	"manifest":  {"policy", "github.com/BurntSushi/toml"},
	"signing":   {"policy", "github.com/hiddeco/sshsig", "golang.org/x/crypto/ssh"},
	"pkgsource": {"policy", "dataplane"},
	"metrics":   {"dataplane", "audit", "github.com/prometheus/", "github.com/rs/zerolog"},
	"config":    {"policy", "github.com/knadh/koanf/", "github.com/spf13/pflag"},
	// Containment: the policy DNS, and the fence that wires sandboxes.
	"policydns": {"policy", "github.com/miekg/dns", "golang.org/x/time/rate"},
	"fence": {"policydns", "dataplane", "policy", "audit", "github.com/google/nftables", "github.com/google/nftables/", "github.com/vishvananda/",
		"github.com/mdlayher/netlink", "golang.org/x/sys/", "golang.org/x/time/rate", "github.com/rs/zerolog"},
	// The control plane: state at the bottom, one store per job over it
	// (none imports another: small interfaces instead), then the two faces.
	"state":       {"modernc.org/sqlite", "github.com/jackc/pgx/v5", "github.com/jackc/pgx/v5/"},
	"store":       {"state", "policy", "action", "manifest", "signing", "github.com/BurntSushi/toml", "github.com/rs/zerolog"},
	"sessions":    {"state", "ca", "policy", "dataplane", "github.com/rs/zerolog"},
	"credentials": {"state", "policy", "inject", "audit", "dataplane", "filippo.io/age", "golang.org/x/oauth2", "github.com/rs/zerolog"},
	"approvals":   {"state", "audit", "dataplane"},
	"proposals":   {"state", "policy", "audit", "dataplane"},
	"budgets":     {"state", "policy", "dataplane"},
	"actions":     {"state", "policy", "action", "audit", "dataplane", "github.com/rs/zerolog"},
	"sandboxapi":  {"actions", "policy", "action", "state", "dataplane", "github.com/rs/zerolog", "github.com/modelcontextprotocol/go-sdk/"},
	"admin":       {"state", "store", "manifest", "sessions", "budgets", "credentials", "approvals", "proposals", "policy", "action", "audit", "dataplane", "fence", "notify", "printable", "github.com/rs/zerolog", "golang.org/x/sys/"},
	"notify":      {"github.com/rs/zerolog"},
	"witness":     {"golang.org/x/mod/sumdb/"},
	"sandbox":     {"policy", "action", "sessions", "golang.org/x/sys/"},
	// The shipped model providers: packages and their table.
	"providers": {"policy"},
	"internal":  {"state", "audit", "github.com/rs/zerolog", "github.com/vishvananda/", "golang.org/x/sys/", "github.com/jackc/pgx/v5", "github.com/jackc/pgx/v5/"},
	"agents":    {},
}

// stores are the control-plane packages that each own one job over state.
var stores = []string{"store", "sessions", "credentials", "approvals", "proposals", "actions", "budgets"}

func TestPackageDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	used := map[string]bool{} // "top rule" pairs some import needed
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "|")
		top := topLevel(pkg)
		for _, imp := range strings.Fields(imports) {
			if imp == "C" || !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				continue // standard library
			}
			if strings.HasPrefix(imp, "github.com/elazarl/goproxy") && top != "dataplane" && top != "bench" {
				t.Errorf("%s imports goproxy: only dataplane may (it replaces every goproxy default), and bench for its bare goproxy peer", pkg)
			}
			if slices.Contains(stores, top) && slices.Contains(stores, topLevel(imp)) && top != topLevel(imp) {
				t.Errorf("%s imports %s: a store never imports another; declare the small interface it needs instead", pkg, imp)
			}
			if topLevel(imp) == "internal" && top != "internal" && !(top == "bench" && imp == module+"/internal/pgserver") {
				t.Errorf("%s imports %s outside its tests: internal/ is for tests only (and internal/pgserver for the bench too)", pkg, imp)
			}
			rules, ok := allowed[top]
			if !ok {
				continue // cmd, integration, archtest: anything
			}
			seen++
			if !permitted(rules, top, imp) {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow for package %s (allowed: %v)", pkg, imp, top, rules)
			}
			for _, r := range rules {
				if permitted([]string{r}, top, imp) && topLevel(imp) != top {
					used[top+" "+r] = true
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("checked no import at all: the go list output did not parse")
	}
	for top, rules := range allowed {
		for _, r := range rules {
			if !used[top+" "+r] {
				t.Errorf("allowed[%q] permits %q, which it does not import: narrow the rule, and the table in docs/architecture.md, to what the code needs", top, r)
			}
		}
	}
}

// sandboxUnreachable are the packages that decide approvals (approvals)
// or proposals (proposals),
// install connectors (store), bind credentials or read the vault
// (credentials), manage sessions (sessions) or serve the admin side
// (admin): invariant 7 says nothing a sandbox can reach may import
// them.
var sandboxUnreachable = []string{"approvals", "proposals", "store", "credentials", "sessions", "admin", "cmd"}

// TestSandboxReachesNothingThatDecides makes security invariant 7 a
// compile-time rule: sandboxapi, and every package it imports directly or
// not, imports none of sandboxUnreachable. What sandboxapi needs of them it
// gets through small interfaces it (or actions) declares.
func TestSandboxReachesNothingThatDecides(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"/sandboxapi").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"/actions") {
		t.Fatalf("sandboxapi's dependencies do not include actions; the check would pass vacuously: %v", deps)
	}
	for _, d := range deps {
		if slices.Contains(sandboxUnreachable, topLevel(d)) {
			t.Errorf("sandboxapi reaches %s: nothing a sandbox can reach may import what decides approvals, installs connectors, binds credentials or reads the vault (invariant 7)", d)
		}
	}
}

func topLevel(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return ""
	}
	return strings.SplitN(rest, "/", 2)[0]
}

func permitted(rules []string, top, imp string) bool {
	if t := topLevel(imp); t != "" {
		if t == top {
			return true
		}
		for _, r := range rules {
			if r == t {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		if r == "*" || imp == r || (strings.HasSuffix(r, "/") && strings.HasPrefix(imp, r)) {
			return true
		}
	}
	return false
}

func TestPermitted(t *testing.T) {
	for _, c := range []struct {
		rules    []string
		top, imp string
		want     bool
	}{
		{nil, "ca", module + "/policy", false},
		{nil, "ca", module + "/ca/internal", true},
		{[]string{"policy"}, "inject", module + "/policy", true},
		{[]string{"policy"}, "inject", module + "/dataplane", false},
		{[]string{"golang.org/x/net/"}, "dataplane", "golang.org/x/net/idna", true},
		{[]string{"github.com/rs/zerolog"}, "audit", "github.com/rs/zerolog/log", false},
		{[]string{"*"}, "cmd", "modernc.org/sqlite", true},
	} {
		if got := permitted(c.rules, c.top, c.imp); got != c.want {
			t.Errorf("permitted(%v, %s, %s) = %v, want %v", c.rules, c.top, c.imp, got, c.want)
		}
	}
}
