package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// triageAction is a Linear action that pins the Google connector by HASH
// and looks ENG-7 up.
const triageAction = `+++
name = "triage"
version = "1.0.0"

[[requires.connectors]]
name = "` + toolsLinearFQN + `"
version = "1.0.0"
hash = "self"
capabilities = ["network:api.linear.app:443", "credential:api_key"]

[[requires.connectors]]
name = "` + toolsGoogleFQN + `"
version = "1.0.0"
hash = "HASH"
capabilities = ["network:gmail.googleapis.com:443"]

[[execute]]
id = "issue"
connector = "` + toolsLinearFQN + `"
op = "get-issue"

[execute.inputs]
id = "ENG-7"
+++
Looks ENG-7 up.
`

var installedHash = regexp.MustCompile(`(?m)^installed \S+ sha256:([0-9a-f]{64})$`)

// TestActionPins: with the real daemon and CLI, an action pinning another
// connector by a wrong hash or a placeholder is refused at install (the
// placeholder accepted with --allow-unpinned, and shown so), and once the
// pinned connector is replaced by other bytes under the same version, a
// run is refused with connector_changed and sends nothing.
func TestActionPins(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	hosts := strings.NewReplacer("api.linear.test", "api.linear.app", "gmail.google.test", "gmail.googleapis.com")
	google := copyPackage(t, filepath.Join(theSuite.root, "action", "testdata", "google"), hosts)
	m := installedHash.FindStringSubmatch(d.cli(t, "connector", "install", google))
	if m == nil {
		t.Fatal("connector install printed no hash")
	}
	ghash := m[1]
	linear := func(hash string) string {
		dir := copyPackage(t, filepath.Join(theSuite.root, "action", "testdata", "linear"), hosts)
		if err := os.MkdirAll(filepath.Join(dir, "actions", "triage"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "actions", "triage", "action.md"), []byte(strings.Replace(triageAction, "HASH", hash, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	wrong := strings.Repeat("0", 64)
	if _, errOut, err := d.run(t.Context(), "connector", "install", linear("sha256:"+wrong)); err == nil ||
		!strings.Contains(errOut, "the hash is sha256:"+wrong+" but the installed package's hash is sha256:"+ghash) {
		t.Fatalf("wrong hash: err %v, stderr %s", err, errOut)
	}
	if _, errOut, err := d.run(t.Context(), "connector", "install", linear("sha256:bound-at-release")); err == nil ||
		!strings.Contains(errOut, "--allow-unpinned") {
		t.Fatalf("placeholder: err %v, stderr %s", err, errOut)
	}
	if out := d.cli(t, "connector", "install", "--allow-unpinned", linear("sha256:bound-at-release")); !strings.Contains(out, "triage (UNPINNED: "+toolsGoogleFQN+"@1.0.0") {
		t.Fatalf("--allow-unpinned install does not show the action unpinned:\n%s", out)
	}
	if out := d.cli(t, "connector", "list"); !strings.Contains(out, "UNPINNED: action triage of "+toolsLinearFQN+"@1.0.0") {
		t.Fatalf("connector list:\n%s", out)
	}
	d.cli(t, "connector", "remove", toolsLinearFQN+"@1.0.0")
	d.cli(t, "connector", "install", linear("sha256:"+ghash))
	key := newSecret("pins linear key", "lin_api_", "")
	if out, errOut, err := d.runInput(t.Context(), key, "credential", "set", "pins-linear", "--kind", "api_key"); err != nil {
		t.Fatalf("credential set: %v\n%s%s", err, out, errOut)
	}
	d.cli(t, "credential", "bind", toolsLinearFQN, "--credential", "pins-linear")
	c := goClient(t, d.newSession(t, "--name", "pins"))
	run := func() map[string]any {
		t.Helper()
		st, _, b := goDo(t, c, "POST", "https://aileron.internal/v1/actions/triage/run", `{}`)
		var res map[string]any
		if err := json.Unmarshal(b, &res); err != nil || st != 200 {
			t.Fatalf("run triage: %d %s", st, b)
		}
		return res
	}
	before := theSuite.up.Hits("api.linear.app", "/issues/ENG-7")
	if res := run(); res["status"] != "completed" || theSuite.up.Hits("api.linear.app", "/issues/ENG-7")-before != 1 {
		t.Fatalf("pinned run: %v", res)
	}
	// The pinned connector is replaced: same version, other bytes.
	d.cli(t, "connector", "remove", toolsGoogleFQN+"@1.0.0")
	if err := os.WriteFile(filepath.Join(google, "README.md"), []byte("rebuilt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = installedHash.FindStringSubmatch(d.cli(t, "connector", "install", google))
	if m == nil || m[1] == ghash {
		t.Fatalf("the rebuilt package did not get another hash: %v", m)
	}
	before = theSuite.up.Hits("api.linear.app", "/issues/ENG-7")
	res := run()
	e, _ := res["error"].(map[string]any)
	if res["status"] != "failed" || e["reason"] != "connector_changed" ||
		!strings.Contains(jsonString(e), "pins "+toolsGoogleFQN+"@1.0.0 (sha256:"+ghash+") but "+toolsGoogleFQN+"@1.0.0 (sha256:"+m[1]+") is active") {
		t.Fatalf("run after the pinned connector was replaced: %v", res)
	}
	if theSuite.up.Hits("api.linear.app", "/issues/ENG-7") != before {
		t.Fatal("a refused run reached the upstream")
	}
}
