package state

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Channel names a kind of object whose changes nodes tell each other
// about: Tx.Notify sends, DB.Subscribe receives. The set is closed.
type Channel string

// The channels, one per store that other nodes cache or wait on.
const (
	// ChannelApprovals carries an approval id when it is decided, expired or
	// consumed.
	ChannelApprovals Channel = "aileron_approvals"
	// ChannelSessions carries a session id when it is created or deleted.
	ChannelSessions Channel = "aileron_sessions"
	// ChannelStore carries a connector FQN when its active version changes.
	ChannelStore Channel = "aileron_store"
	// ChannelCredentials carries a vault entry name or a connector FQN when
	// a credential or binding changes.
	ChannelCredentials Channel = "aileron_credentials"
)

// allChannels is every Channel, all of which the listener listens on.
func allChannels() []Channel {
	return []Channel{ChannelApprovals, ChannelSessions, ChannelStore, ChannelCredentials}
}

// Listener connection settings.
const (
	listenAppName    = "aileron-listen"
	listenRetryFirst = 100 * time.Millisecond
	listenRetryMax   = 5 * time.Second
)

// Subscription receives one channel's notifications. Both functions run on
// the listener's goroutine and must return quickly (wake a waiter, mark a
// cache stale), never block on the database.
type Subscription struct {
	// Changed receives each notification's payload.
	Changed func(payload string)
	// Resync runs each time the listener has (re)connected and listens
	// again: notifications sent while it was away are lost, so whatever it
	// guards must be read again. Nil means nothing to do.
	Resync func()
}

// Subscribe registers sub for channel's notifications and returns the
// function that removes it. On Postgres, the first Subscribe starts the
// DB's one listening connection, which listens on every channel, reconnects
// on its own (listening first, then calling every Resync) and ends at Close.
// On SQLite nothing is ever delivered (one node owns the file; stores wake
// their own waiters and poll for other processes' changes).
func (d *DB) Subscribe(channel Channel, sub Subscription) (cancel func()) {
	if d.backend != Postgres {
		return func() {}
	}
	return d.pg.hub.add(channel, sub)
}

// followTimeout bounds one re-read that Follow runs.
const followTimeout = 10 * time.Second

// Follow keeps a cache in step with the other nodes: refresh runs (on a
// goroutine of its own, one run at a time, coalesced, each bounded by
// followTimeout) whenever channel carries the payload what, and whenever
// the listener (re)connects. Its errors are dropped: the cache stays as it
// was until the next notification or the caller's backstop re-read. The
// returned function stops following. On SQLite it does nothing.
func (d *DB) Follow(channel Channel, what string, refresh func(context.Context) error) (stop func()) {
	if !d.Shared() {
		return func() {}
	}
	c := &Coalescer{Run: func() {
		ctx, cancel := context.WithTimeout(context.Background(), followTimeout)
		defer cancel()
		_ = refresh(ctx)
	}}
	cancel := d.Subscribe(channel, Subscription{
		Changed: func(payload string) {
			if payload == what {
				c.Trigger()
			}
		},
		Resync: c.Trigger,
	})
	return func() { cancel(); c.Stop() }
}

// Listening reports whether the listening connection is up (always true
// on SQLite, which needs none).
func (d *DB) Listening() bool {
	return d.backend != Postgres || d.pg.hub.connected.Load()
}

// hub is a Postgres DB's one LISTEN connection and its subscribers.
type hub struct {
	db        *DB
	connected atomic.Bool

	mu      sync.Mutex
	subs    map[Channel]map[int]Subscription
	next    int
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func newHub(d *DB) *hub { return &hub{db: d, subs: map[Channel]map[int]Subscription{}} }

// add registers sub, starting the listener at the first subscription.
func (h *hub) add(ch Channel, sub Subscription) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[ch] == nil {
		h.subs[ch] = map[int]Subscription{}
	}
	h.next++
	id := h.next
	h.subs[ch][id] = sub
	if !h.started && !h.stopped {
		h.started = true
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done = cancel, make(chan struct{})
		go h.run(ctx)
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[ch], id)
	}
}

// stop ends the listener and waits for it.
func (h *hub) stop() {
	h.mu.Lock()
	h.stopped = true
	cancel, done := h.cancel, h.done
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// run keeps a listening connection up until ctx ends, retrying with a
// backoff from 100ms to 5s while the server cannot be reached.
func (h *hub) run(ctx context.Context) {
	defer close(h.done)
	wait := listenRetryFirst
	for ctx.Err() == nil {
		if h.listen(ctx) {
			wait = listenRetryFirst
		}
		h.connected.Store(false)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// listen runs one listening connection until it fails or ctx ends,
// reporting whether it got as far as listening.
func (h *hub) listen(ctx context.Context) bool {
	cfg := h.db.pg.cfg.Copy()
	cfg.RuntimeParams["application_name"] = listenAppName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range allChannels() {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{string(ch)}.Sanitize()); err != nil {
			return false
		}
	}
	h.connected.Store(true)
	for _, sub := range h.snapshot("") {
		if sub.Resync != nil {
			sub.Resync()
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		for _, sub := range h.snapshot(Channel(n.Channel)) {
			if sub.Changed != nil {
				sub.Changed(n.Payload)
			}
		}
	}
}

// snapshot returns ch's subscriptions, or every one when ch is "".
func (h *hub) snapshot(ch Channel) []Subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Subscription
	for c, m := range h.subs {
		if ch != "" && c != ch {
			continue
		}
		for _, s := range m {
			out = append(out, s)
		}
	}
	return out
}

// Lock takes the lock named key, shared by every node of a fleet, waiting
// for it (within ctx) while another node holds it, and returns the
// function that releases it. On Postgres it is the row key of the locks
// table, held FOR UPDATE by a transaction of its own (only a role that may
// write that table can take it; it is released if the node dies); on
// SQLite, whose one node serialises its own work, it is taken at once.
// Failures to reach the server wrap ErrUnavailable.
func (d *DB) Lock(ctx context.Context, key string) (unlock func(), err error) {
	if d.backend != Postgres {
		return func() {}, nil
	}
	// The transaction is the lock: it must end at unlock, not when ctx
	// (which bounds only the wait) does.
	tx, err := d.sql.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return nil, d.Unavailable(fmt.Errorf("locking %q on %s: %w", key, d.path, err))
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO locks (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, key)
	if err == nil {
		_, err = tx.ExecContext(ctx, `SELECT name FROM locks WHERE name = $1 FOR UPDATE`, key)
	}
	if err != nil {
		tx.Rollback()
		return nil, d.Unavailable(fmt.Errorf("locking %q on %s: %w", key, d.path, err))
	}
	return func() { tx.Rollback() }, nil
}

// Coalescer runs a function on a goroutine of its own each time Trigger
// is called, never two at once, and at most once more for all the Triggers
// that arrive while it runs: however many notifications arrive, the work
// they ask for is done by one goroutine.
type Coalescer struct {
	// Run is the work. Required.
	Run     func()
	mu      sync.Mutex
	running bool
	again   bool
	stopped bool
	wg      sync.WaitGroup
}

// Trigger asks for a run; after Stop it does nothing.
func (c *Coalescer) Trigger() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	if c.running {
		c.again = true
		return
	}
	c.running = true
	c.wg.Add(1)
	go c.loop()
}

// Stop refuses further runs and waits for the one in progress.
func (c *Coalescer) Stop() {
	c.mu.Lock()
	c.stopped, c.again = true, false
	c.mu.Unlock()
	c.wg.Wait()
}

func (c *Coalescer) loop() {
	defer c.wg.Done()
	for {
		c.Run()
		c.mu.Lock()
		if !c.again {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.again = false
		c.mu.Unlock()
	}
}
