package state_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

func openPG(t *testing.T, dsn string) *state.DB {
	t.Helper()
	d, err := state.OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Two nodes starting together on an empty database both come up on the
// full schema, each migration applied once.
func TestPostgresMigratesOnceUnderConcurrentStarts(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	var wg sync.WaitGroup
	dbs := make([]*state.DB, 4)
	errs := make([]error, 4)
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = state.OpenPostgres(t.Context(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		defer dbs[i].Close()
	}
	v, err := dbs[0].SchemaVersion(t.Context())
	if err != nil || v < 7 {
		t.Fatalf("SchemaVersion = %d, %v", v, err)
	}
	var n int
	if err := dbs[1].QueryRowContext(t.Context(), `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil || n != v {
		t.Fatalf("%d migrations recorded, %v; want %d", n, err, v)
	}
	if got := dbs[0].Backend(); got != state.Postgres {
		t.Errorf("Backend = %q", got)
	}
	if p := dbs[0].Path(); !strings.HasPrefix(p, "postgres://postgres@") {
		t.Errorf("Path = %q", p)
	}
}

// The schema's constraints hold on Postgres as on SQLite: one live
// approval per session and digest, a hash of 64 lower-case hex digits.
func TestPostgresSchemaConstraints(t *testing.T) {
	pg := testkit.StartPostgres(t)
	d := openPG(t, pg.NewDatabase())
	ctx := t.Context()
	ins := func(id, st string) error {
		return d.Write(ctx, func(tx *state.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO approvals (id, session, digest, state, preview, created_at, expires_at)
				VALUES (?, 's', 'd', ?, '{}', 'x', 'y')`, id, st)
			return err
		})
	}
	if err := ins("a1", "pending"); err != nil {
		t.Fatal(err)
	}
	if err := ins("a2", "approved"); err == nil {
		t.Error("a second live approval for one session and digest was accepted")
	}
	if err := ins("a3", "bogus"); err == nil {
		t.Error("an unknown approval state was accepted")
	}
	for _, h := range []string{strings.Repeat("A", 64), strings.Repeat("a", 63), strings.Repeat("g", 64)} {
		err := d.Write(ctx, func(tx *state.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO store_versions (fqn, version, hash, installed_at) VALUES ('f', ?, ?, 'x')`, h, h)
			return err
		})
		if err == nil {
			t.Errorf("hash %q accepted", h)
		}
	}
}

// A compare-and-swap raced by many writers on two nodes succeeds once;
// the losers' serialization failures are retried, not returned.
func TestPostgresCompareAndSwapOnce(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	a, b := openPG(t, dsn), openPG(t, dsn)
	ctx := t.Context()
	err := a.Write(ctx, func(tx *state.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO approvals (id, session, digest, state, preview, created_at, expires_at)
			VALUES ('ap', 's', 'd', 'approved', '{}', 'x', 'y')`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	won := 0
	var wg sync.WaitGroup
	for i := range 20 {
		d := a
		if i%2 == 1 {
			d = b
		}
		wg.Go(func() {
			var n int64
			err := d.Write(ctx, func(tx *state.Tx) error {
				n = 0
				var st string
				if err := tx.QueryRowContext(ctx, `SELECT state FROM approvals WHERE id = ?`, "ap").Scan(&st); err != nil {
					return err
				}
				if st != "approved" {
					return nil
				}
				res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = 'consumed' WHERE id = ? AND state = 'approved'`, "ap")
				if err != nil {
					return err
				}
				n, err = res.RowsAffected()
				return err
			})
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
			mu.Lock()
			won += int(n)
			mu.Unlock()
		})
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d writers consumed the approval; want exactly 1", won)
	}
}

// A notification sent in a transaction reaches the other node's
// subscriber only once it commits; after the listening connection is
// killed, the listener reconnects, listens and then resyncs, and what is
// sent afterwards arrives again.
func TestPostgresNotifyAndResync(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	a, b := openPG(t, dsn), openPG(t, dsn)
	ctx := t.Context()
	got := make(chan string, 16)
	resynced := make(chan struct{}, 16)
	cancel := b.Subscribe(state.ChannelApprovals, state.Subscription{
		Changed: func(p string) { got <- p },
		Resync:  func() { resynced <- struct{}{} },
	})
	defer cancel()
	waitFor(t, resynced, "first listen")
	send := func(payload string, commit bool) {
		err := a.Write(ctx, func(tx *state.Tx) error {
			if err := tx.Notify(ctx, state.ChannelApprovals, payload); err != nil {
				return err
			}
			if !commit {
				return errors.New("roll back")
			}
			return nil
		})
		if commit && err != nil {
			t.Fatal(err)
		}
	}
	send("rolled-back", false)
	send("ap_1", true)
	if p := waitFor(t, got, "notification"); p != "ap_1" {
		t.Fatalf("got %q; want ap_1 (a rolled-back transaction must not notify)", p)
	}
	pg.Exec("postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'aileron-listen'`)
	waitFor(t, resynced, "resync after the listener was killed")
	if !b.Listening() {
		t.Error("Listening() = false after the resync")
	}
	send("ap_2", true)
	if p := waitFor(t, got, "notification after reconnect"); p != "ap_2" {
		t.Fatalf("got %q; want ap_2", p)
	}
}

// With the server stopped, writes and reads fail with ErrUnavailable; once
// it is back, the same DB works again without reopening.
func TestPostgresUnavailableAndRecovers(t *testing.T) {
	pg := testkit.StartPostgres(t)
	d := openPG(t, pg.NewDatabase())
	ctx := t.Context()
	pg.Stop()
	err := d.Write(ctx, func(tx *state.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM approvals`)
		return err
	})
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("Write with the server down = %v; want ErrUnavailable", err)
	}
	if err := d.Ping(ctx); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("Ping with the server down = %v; want ErrUnavailable", err)
	}
	pg.Start()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err = d.Ping(ctx); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Ping after restart: %v", err)
	}
}

func TestOpenPostgresBadDSN(t *testing.T) {
	for _, dsn := range []string{"postgres://u:s3cret@[::1", "host=/nonexistent port=notaport password=s3cret"} {
		_, err := state.OpenPostgres(t.Context(), dsn)
		if !errors.Is(err, state.ErrInvalidArgument) {
			t.Errorf("OpenPostgres(%q) = %v; want ErrInvalidArgument", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := state.OpenPostgres(ctx, "host="+t.TempDir()+" user=x dbname=y password=s3cret")
	if !errors.Is(err, state.ErrUnavailable) || strings.Contains(fmt.Sprint(err), "s3cret") {
		t.Errorf("OpenPostgres of a server that is not there = %v; want ErrUnavailable without the password", err)
	}
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

// A lock is held until its unlock, however short the context that bounded
// the wait for it: another node cannot take it meanwhile.
func TestPostgresLockOutlivesItsContext(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	a, b := openPG(t, dsn), openPG(t, dsn)
	short, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	unlock, err := a.Lock(short, "k")
	if err != nil {
		t.Fatal(err)
	}
	<-short.Done()
	cancel()
	try, cancelTry := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancelTry()
	if _, err := b.Lock(try, "k"); err == nil {
		t.Fatal("a second node took the lock while the first, whose context ended, still holds it")
	}
	unlock()
	unlockB, err := b.Lock(t.Context(), "k")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlockB()
}
