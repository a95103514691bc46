package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
)

// TestAskFleet: on a two-node Postgres fleet, an unknown request of a
// session in ask mode held on node A is seen on node B (its approval and
// its proposal), approved through B's admin socket, and released on A:
// sent once, byte for byte.
func TestAskFleet(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	keys := t.TempDir()
	a := fleetNode(t, dsn, keys, "node-a")
	b := fleetNode(t, dsn, keys, "node-b")
	installSpecText(t, a, askSpec)
	sess := a.newSession(t, "--unknown", "ask")
	tag := randHex(6)
	path := "/v1/fleet/" + tag
	body := `{"fleet":"` + tag + `"}`
	held := startHeld(sess.via(t, a), "https://api.us.example.com"+path, body)
	ap := waitPendingFor(t, b, sess.ID) // read on B: the shared state
	shown := b.cli(t, "approvals", "show", ap.ID)
	if !strings.Contains(shown, "no operation matches this request") {
		t.Errorf("approvals show on B does not say that no operation matches:\n%s", shown)
	}
	var props struct {
		Proposals []struct {
			ID, Template string
		}
	}
	if out := b.cli(t, "proposals", "list", "--session", sess.ID, "--json"); json.Unmarshal([]byte(out), &props) != nil ||
		len(props.Proposals) != 1 || !strings.Contains(shown, props.Proposals[0].ID) {
		t.Errorf("proposals on B: %s; want the one the held request was learned into, named by its approval", out)
	}
	b.cli(t, "approvals", "approve", ap.ID)
	r := waitHeld(t, held)
	var echo echoReply
	if r.err != nil || r.status != http.StatusOK || json.Unmarshal(r.body, &echo) != nil {
		t.Fatalf("held on A, approved on B: %d %s %v; want the upstream's answer", r.status, r.body, r.err)
	}
	if echo.BodySHA256 != sha256Hex(body) || echo.RequestURI != path {
		t.Errorf("the upstream saw %s with body sha256 %s; want exactly the previewed request", echo.RequestURI, echo.BodySHA256)
	}
	if n := theSuite.up.Hits("api.us.example.com", path); n != 1 {
		t.Errorf("the upstream received the request %d times, want once", n)
	}
}
