package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/state"
)

// fleetSyncEvery is how often a fleet node re-reads what other nodes may
// have changed without a notification reaching it: sessions, and the store
// index (recompiling the policy only when the index changed).
const fleetSyncEvery = 5 * time.Second

// fleetSyncTimeout bounds each step of a backstop re-read.
const fleetSyncTimeout = 10 * time.Second

// fleetMarker is the file a fleet node keeps in its home, so that a
// command run there without the node's configuration does not quietly use
// a SQLite state of its own.
const fleetMarker = "fleet-node.json"

// openState opens the control-plane database the configuration names:
// $home/aileron.db, or the Postgres server of state.dsn. A home that a
// fleet node uses is refused with SQLite: the command lacks the node's
// configuration.
func openState(ctx context.Context, cfg *config.Config) (*state.DB, error) {
	if cfg.State.Backend == "postgres" {
		return state.OpenPostgres(ctx, cfg.State.DSN)
	}
	marker := filepath.Join(cfg.Home, fleetMarker)
	if b, err := os.ReadFile(marker); err == nil {
		var m struct{ Node, State string }
		_ = json.Unmarshal(b, &m)
		return nil, fmt.Errorf("%s is the home of node %q of a fleet whose state is %s, but this configuration says state.backend sqlite: "+
			"pass the node's --config (or AILERON_STATE__BACKEND=postgres and AILERON_STATE__DSN); "+
			"to use this home on its own again, remove %s", cfg.Home, m.Node, m.State, marker)
	}
	return state.Open(ctx, filepath.Join(cfg.Home, state.FileName))
}

// markFleetHome writes the fleet marker into a fleet node's home.
func (d *daemon) markFleetHome() error {
	b, err := json.Marshal(map[string]string{"node": d.cfg.State.Node, "state": d.db.Path()})
	if err != nil {
		return err
	}
	return state.WriteFileAtomic(filepath.Join(d.cfg.Home, fleetMarker), append(b, '\n'))
}

// fleetTrailHint is what a fleet node adds to an audit trail problem: its
// record is kept in the shared state under its node name.
func (d *daemon) fleetTrailHint() string {
	if !d.fleet() {
		return ""
	}
	return fmt.Sprintf(".\n\nIn a fleet, the record this trail is checked against is node %q's, in the shared state: if this home is not "+
		"that node's (a new home under an old name), give it a name of its own (state.node), or start its new trail with "+
		"`aileron audit new-trail --config FILE --reason \"...\"`", d.cfg.State.Node)
}

// fleet reports whether this daemon is a node of a fleet (Postgres state).
func (d *daemon) fleet() bool { return d.db.Shared() }

// openFleet loads the fleet key of a fleet node (nil on a single node).
func (d *daemon) openFleet(ctx context.Context) (*state.FleetKey, error) {
	if !d.fleet() {
		return nil, nil
	}
	fk, err := state.LoadFleetKey(ctx, d.db, d.cfg.State.FleetKeyFile)
	if err != nil {
		return nil, err
	}
	if err := d.registerNode(ctx); err != nil {
		return nil, err
	}
	if err := d.markFleetHome(); err != nil {
		return nil, err
	}
	if fk.Created {
		d.log.Warn().Str("event", "fleet.key_created").Str("file", d.cfg.State.FleetKeyFile).Str("fleet_key_id", fk.ID()).
			Msg("this is the fleet's first node: it made the fleet key; back it up, and copy it (and state.vault_key_file) to every other node (mode 0600)")
	}
	d.log.Info().Str("event", "fleet.joined").Str("node", d.cfg.State.Node).Str("state", d.db.Path()).
		Str("fleet_key_id", fk.ID()).Msg("this daemon is a node of a fleet")
	return fk, nil
}

// syncFleet keeps a fleet node in step with the others until ctx ends:
// another node's connector install or removal recompiles the policy at
// once (notification), and every fleetSyncEvery the sessions and the store
// index are read again as the backstop. It returns at once on a single node.
func (d *daemon) syncFleet(ctx context.Context) {
	if !d.fleet() {
		return
	}
	changed := make(chan struct{}, 1)
	cancel := d.db.Subscribe(state.ChannelStore, state.Subscription{
		Changed: func(string) { poke(changed) },
		Resync: func() {
			d.log.Info().Str("event", "fleet.listening").Msg("listening for the other nodes' changes (again); re-reading what may have been missed")
			poke(changed)
		},
	})
	defer cancel()
	tick := time.NewTicker(fleetSyncEvery)
	defer tick.Stop()
	last := d.storeFingerprint(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
			d.syncOnce(ctx)
		}
		step, cancel := context.WithTimeout(ctx, fleetSyncTimeout)
		fp := d.storeFingerprint(step)
		cancel()
		if fp != "" && fp != last {
			last = fp
			_ = d.reload()
		}
	}
}

// syncOnce is one backstop re-read, each step bounded: a database that
// stopped answering (a black-holed network) costs a step its timeout, not
// the kernel's.
func (d *daemon) syncOnce(ctx context.Context) {
	step := func(f func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, fleetSyncTimeout)
		defer cancel()
		return f(ctx)
	}
	_ = step(func(ctx context.Context) error { d.nodeSeen(ctx); return nil })
	if err := errors.Join(step(d.sessions.Refresh), step(d.vault.Refresh), step(d.bindings.Refresh)); err != nil {
		d.log.Warn().Str("event", "fleet.sync_failed").Err(err).Msg("could not re-read sessions and credentials; retrying")
	}
}

// poke signals ch without blocking (a pending signal is enough).
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// storeFingerprint summarises the store index ("" when it cannot be read).
func (d *daemon) storeFingerprint(ctx context.Context) string {
	rows, err := d.db.QueryContext(ctx, `SELECT fqn, version, hash, active FROM store_versions ORDER BY fqn, version`)
	if err != nil {
		return ""
	}
	defer rows.Close()
	h := sha256.New()
	for rows.Next() {
		var fqn, version, hash string
		var active int
		if rows.Scan(&fqn, &version, &hash, &active) != nil {
			return ""
		}
		_, _ = h.Write([]byte(fqn + "\x00" + version + "\x00" + hash + "\x00" + string(rune('0'+active)) + "\n"))
	}
	if rows.Err() != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// serveHealth adds GET /healthz (the process answers) and GET /readyz
// (this node can decide requests: its state answers within a second and
// its audit trail takes lines; 503 with the reasons otherwise) to mux.
func (d *daemon) serveHealth(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"alive":true}` + "\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		rd := d.ready(r.Context())
		w.Header().Set("Content-Type", "application/json")
		if !rd.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rd)
	})
}

// ready checks this node. A shared state that does not answer leaves the
// node ready (it decides from memory what needs no state, and refuses the
// rest) until its sessions go stale; reasons are short, the details are
// in the log.
func (d *daemon) ready(ctx context.Context) admin.Readiness {
	rd := admin.Readiness{Node: d.cfg.State.Node, State: d.stateHealth(ctx), Audit: "off"}
	stale := d.sessions.Stale()
	if stale != nil {
		rd.State = stale.Error()
	}
	if d.fleet() {
		l := d.db.Listening()
		rd.Notifications = &l
	}
	if d.audit != nil {
		rd.Audit = "ok"
		if err := d.audit.Healthy(); err != nil {
			rd.Audit = "cannot write: nothing is forwarded"
		}
	}
	rd.Ready = stale == nil && (rd.Audit == "ok" || rd.Audit == "off")
	return rd
}

// Node registration: a name is held by one home at a time.
const (
	// nodeAlive is how recently a node must have been seen to hold its
	// name against a daemon from another home.
	nodeAlive = time.Minute
	// nodeIDFile holds this home's instance id, which a restart keeps.
	nodeIDFile = "node.id"
)

// registerNode records this daemon as node state.node of the fleet. It
// refuses when a daemon from another home (another instance id) holds the
// name and was seen within a minute: two nodes with one name would write
// one audit Mark.
func (d *daemon) registerNode(ctx context.Context) error {
	id, err := state.LoadOrCreateKey(filepath.Join(d.cfg.Home, "keys", nodeIDFile), "node id")
	if err != nil {
		return err
	}
	d.nodeID = hex.EncodeToString(id[:8])
	node, now := d.cfg.State.Node, time.Now()
	return d.db.Write(ctx, func(tx *state.Tx) error {
		var inst, seen string
		err := tx.QueryRowContext(ctx, `SELECT instance, seen_at FROM fleet_nodes WHERE node = ?`, node).Scan(&inst, &seen)
		if err == nil && inst != d.nodeID {
			if t, perr := d.db.ParseTime("fleet_nodes.seen_at", seen); perr == nil && now.Sub(t) < nodeAlive {
				return fmt.Errorf("%w: node %q of this fleet runs from another home (instance %s, seen %s ago); give this one its own "+
					"state.node (AILERON_STATE__NODE), or, if that node is gone, start this one in %s", state.ErrConflict, node, inst,
					now.Sub(t).Round(time.Second), (nodeAlive - now.Sub(t)).Round(time.Second))
			}
		} else if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO fleet_nodes (node, instance, version, proxy, started_at, seen_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (node) DO UPDATE SET instance = excluded.instance, version = excluded.version, proxy = excluded.proxy,
			started_at = excluded.started_at, seen_at = excluded.seen_at`,
			node, d.nodeID, readVersion().Version, d.cfg.Proxy.Listen, state.FormatTime(now), state.FormatTime(now))
		return err
	})
}

// leaveFleet forgets this node's registration (a clean stop, or a start
// that failed), so that its name is free at once.
func (d *daemon) leaveFleet() {
	if d.nodeID == "" || d.db == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.db.Write(ctx, func(tx *state.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM fleet_nodes WHERE node = ? AND instance = ?`, d.cfg.State.Node, d.nodeID)
		return err
	})
}

// nodeSeen refreshes this node's seen_at; a name another home took while
// this node could not reach the state is logged as an error.
func (d *daemon) nodeSeen(ctx context.Context) {
	var n int64
	err := d.db.Write(ctx, func(tx *state.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE fleet_nodes SET seen_at = ? WHERE node = ? AND instance = ?`,
			state.FormatTime(time.Now()), d.cfg.State.Node, d.nodeID)
		if err == nil {
			n, err = res.RowsAffected()
		}
		return err
	})
	if err == nil && n == 0 {
		d.log.Error().Str("event", "fleet.name_taken").Str("node", d.cfg.State.Node).
			Msg("another home took this node's name while it could not reach the shared state: two nodes now share one audit record; stop one and give it its own state.node")
		return
	}
	if err != nil {
		d.log.Warn().Str("event", "fleet.sync_failed").Err(err).Msg("could not record that this node is alive; retrying")
	}
}

// readyPingEvery is how long one ping of the state answers /readyz: a
// load balancer (or anyone reaching admin.metrics_listen) asking often
// costs the database one ping a second at most.
const readyPingEvery = time.Second

// stateHealth is "ok" or, in short words, why the state does not answer.
func (d *daemon) stateHealth(ctx context.Context) string {
	d.readyMu.Lock()
	defer d.readyMu.Unlock()
	if time.Since(d.readyAt) < readyPingEvery {
		return d.readyState
	}
	// Not the asker's context: a client hanging up must not be cached as
	// a failing state for everyone else.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	d.readyState = "ok"
	if err := d.db.Ping(ctx); err != nil {
		d.readyState = "unreachable: what needs the shared state is refused"
		if !errors.Is(err, state.ErrUnavailable) {
			d.readyState = "failing: what needs the shared state is refused"
		}
	}
	d.readyAt = time.Now()
	return d.readyState
}
