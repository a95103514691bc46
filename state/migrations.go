package state

import "strings"

// migration is one step of the schema. Versions start at 1 and are
// consecutive; a released migration is never edited, only followed by a new
// one.
type migration struct {
	version int
	name    string
	// sql is the step in SQLite's dialect; For derives Postgres's from it.
	sql string
}

// For returns the migration's SQL for backend. One list serves both: the
// SQLite text is the source, and Postgres's differs only in what SQLite
// alone has (STRICT tables, GLOB, 64-bit INTEGER).
func (m migration) For(backend Backend) string {
	if backend != Postgres {
		return m.sql
	}
	return pgDialect().Replace(m.sql)
}

// pgDialect turns the SQLite schema into Postgres's.
func pgDialect() *strings.Replacer {
	return strings.NewReplacer(
		") STRICT;", ");",
		"INTEGER", "BIGINT",
		"BLOB", "BYTEA",
		"hash NOT GLOB '*[^0-9a-f]*'", "hash ~ '^[0-9a-f]*$'",
	)
}

// migrations returns the schema steps in order. Migration N is applied, in
// its own transaction, to a database at version N-1.
func migrations() []migration {
	return append([]migration{
		{version: 1, name: "approvals", sql: `
CREATE TABLE approvals (
	id          TEXT PRIMARY KEY,
	session     TEXT NOT NULL,
	digest      TEXT NOT NULL,
	state       TEXT NOT NULL CHECK (state IN ('pending','approved','denied','expired','consumed')),
	preview     TEXT NOT NULL,
	created_at  TEXT NOT NULL,
	expires_at  TEXT NOT NULL,
	decided_at  TEXT,
	decided_by  TEXT NOT NULL DEFAULT '',
	reason      TEXT NOT NULL DEFAULT '',
	consumed_at TEXT
) STRICT;
CREATE INDEX approvals_session_digest_state ON approvals (session, digest, state);
CREATE INDEX approvals_state_expires ON approvals (state, expires_at);
-- At most one live (pending or approved) approval per session and digest:
-- a retry joins it instead of asking twice.
CREATE UNIQUE INDEX approvals_live ON approvals (session, digest)
	WHERE state IN ('pending','approved');
`},
		{version: 2, name: "action_runs", sql: `
CREATE TABLE action_runs (
	id          TEXT PRIMARY KEY,          -- the approval id when one is involved, else "ar_…"
	session     TEXT NOT NULL,
	action      TEXT NOT NULL,             -- action name
	version     TEXT NOT NULL,
	connector   TEXT NOT NULL,             -- FQN of the package the action came from
	args        TEXT NOT NULL,             -- canonical JSON
	status      TEXT NOT NULL CHECK (status IN ('pending_approval','running','completed','denied','failed')),
	approval_id TEXT NOT NULL DEFAULT '',  -- approval the run currently waits on
	next_step   INTEGER NOT NULL DEFAULT 0,
	outputs     TEXT NOT NULL DEFAULT '{}',-- step id → decoded output
	result      TEXT NOT NULL DEFAULT '',  -- JSON actions.Result, at every state
	created_at  TEXT NOT NULL,
	updated_at  TEXT NOT NULL
) STRICT;
CREATE INDEX action_runs_approval ON action_runs (approval_id);
`},
	}, stateMigrations()...)
}

// stateMigrations are the steps that moved the file-based state (store
// index, sessions, bindings) into the database.
func stateMigrations() []migration {
	return []migration{
		{version: 3, name: "state_imports", sql: `
-- Unused: meant for a one-time import of pre-SQLite state files, a format
-- no release ever had (the import is gone; the table stays, since a
-- released migration is never edited).
CREATE TABLE state_imports (
	kind        TEXT PRIMARY KEY,          -- 'store_index' or 'bindings'
	file        TEXT NOT NULL,             -- the file imported, now renamed file + '.imported'
	imported_at TEXT NOT NULL
) STRICT;
`},
		{version: 4, name: "store_versions", sql: `
-- The connector store index; package bytes stay content-addressed on disk
-- under store/connectors/sha256/<hash>/.
CREATE TABLE store_versions (
	fqn          TEXT NOT NULL,
	version      TEXT NOT NULL,            -- strict SemVer
	hash         TEXT NOT NULL CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'),
	active       INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
	installed_at TEXT NOT NULL,
	PRIMARY KEY (fqn, version)
) STRICT;
-- At most one active version per connector (the store keeps exactly one).
CREATE UNIQUE INDEX store_versions_active ON store_versions (fqn) WHERE active = 1;
CREATE INDEX store_versions_hash ON store_versions (hash);
`},
		{version: 5, name: "sessions", sql: `
-- Session metadata; each session's CA (private key mode 0600) stays in
-- sessions/<id>/ on disk.
CREATE TABLE sessions (
	id           TEXT PRIMARY KEY,
	name         TEXT NOT NULL DEFAULT '',
	token_sha256 TEXT NOT NULL,            -- hex SHA-256 of the token; the token is never stored
	connectors   TEXT NOT NULL DEFAULT '[]', -- JSON array of FQNs; empty means every installed connector
	created_at   TEXT NOT NULL,
	expires_at   TEXT NOT NULL
) STRICT;
CREATE INDEX sessions_expires ON sessions (expires_at);
`},
		{version: 6, name: "bindings", sql: `
-- Credential bindings metadata; secrets stay in the age-encrypted vault.
CREATE TABLE bindings (
	connector  TEXT PRIMARY KEY,           -- connector FQN
	credential TEXT NOT NULL,              -- vault entry name
	header     TEXT NOT NULL DEFAULT '',
	format     TEXT NOT NULL DEFAULT '',
	query      TEXT NOT NULL DEFAULT '',
	env        TEXT NOT NULL DEFAULT '',
	updated_at TEXT NOT NULL
) STRICT;
`},
		{version: 7, name: "audit_mark", sql: `
-- The last checkpoint the daemon signed of its audit trail (one row,
-- kept by cmd/aileron for audit.Anchor): at start the trail must still
-- hold that checkpoint line, unchanged, under the same origin.
CREATE TABLE audit_mark (
	id        INTEGER PRIMARY KEY CHECK (id = 1),
	origin    TEXT NOT NULL,
	size      INTEGER NOT NULL CHECK (size >= 0),
	root      TEXT NOT NULL,               -- base64 RFC 6962 root
	seq       INTEGER NOT NULL CHECK (seq >= 1),
	line_hash TEXT NOT NULL,               -- hex SHA-256 of the checkpoint line
	file      TEXT NOT NULL,               -- base name of the file holding it
	at        TEXT NOT NULL,
	end_seq   INTEGER NOT NULL DEFAULT 0 CHECK (end_seq >= 0), -- the daemon's last line as it stopped (0: running, or crashed)
	end_hash  TEXT NOT NULL DEFAULT ''
) STRICT;
`},
		{version: 8, name: "fleet", sql: `
-- The fleet key's id (an HMAC of a constant under the key, never the key):
-- every node sharing this database must hold the same fleet key file, and
-- a node with another key refuses to start.
CREATE TABLE fleet (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	key_id     TEXT NOT NULL,
	created_at TEXT NOT NULL
) STRICT;
`},
		{version: 9, name: "store_packages", sql: `
-- A fleet's connector packages (Postgres only; a single node keeps them on
-- disk alone): each the canonical byte stream its hash covers, from which
-- every node rebuilds store/connectors/sha256/<hash>/.
CREATE TABLE store_packages (
	hash         TEXT PRIMARY KEY CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'),
	stream       BLOB NOT NULL,
	installed_at TEXT NOT NULL
) STRICT;
`},
		{version: 10, name: "audit_marks_per_node", sql: `
-- The audit Mark of each node's trail (audit_mark held one): a single node
-- keeps its row under node '', each node of a fleet under its name.
CREATE TABLE audit_marks (
	node      TEXT PRIMARY KEY,
	origin    TEXT NOT NULL,
	size      INTEGER NOT NULL CHECK (size >= 0),
	root      TEXT NOT NULL,
	seq       INTEGER NOT NULL CHECK (seq >= 1),
	line_hash TEXT NOT NULL,
	file      TEXT NOT NULL,
	at        TEXT NOT NULL,
	end_seq   INTEGER NOT NULL DEFAULT 0 CHECK (end_seq >= 0),
	end_hash  TEXT NOT NULL DEFAULT ''
) STRICT;
INSERT INTO audit_marks (node, origin, size, root, seq, line_hash, file, at, end_seq, end_hash)
	SELECT '', origin, size, root, seq, line_hash, file, at, end_seq, end_hash FROM audit_mark;
DROP TABLE audit_mark;
-- The nodes of a fleet: a node refuses to start under the name of another
-- that is alive (seen within a minute) with another instance id.
CREATE TABLE fleet_nodes (
	node       TEXT PRIMARY KEY,
	instance   TEXT NOT NULL,
	version    TEXT NOT NULL DEFAULT '',
	proxy      TEXT NOT NULL DEFAULT '',
	started_at TEXT NOT NULL,
	seen_at    TEXT NOT NULL
) STRICT;
`},
		{version: 11, name: "vault", sql: `
-- A fleet's credential vault (Postgres only; a single node keeps
-- vault/vault.age): the same age-encrypted document, sealed to the
-- operator's vault key that every node holds; never in the clear.
CREATE TABLE vault (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	recipient  TEXT NOT NULL,              -- the age recipient it is sealed to (public)
	sealed     BLOB NOT NULL,
	revision   INTEGER NOT NULL CHECK (revision >= 1),
	updated_at TEXT NOT NULL
) STRICT;
`},
		{version: 12, name: "locks", sql: `
-- Named locks between the nodes of a fleet (DB.Lock: an OAuth refresh):
-- a row held FOR UPDATE, which only a role that may write this table can
-- take (unlike an advisory lock, which any role that connects can).
CREATE TABLE locks (
	name TEXT PRIMARY KEY
) STRICT;
`},
		{version: 13, name: "budgets", sql: `
-- A session's limits (policy.Limits as JSON; '' for none), kept by
-- sessions with the rest of its row.
ALTER TABLE sessions ADD COLUMN limits TEXT NOT NULL DEFAULT '';
-- What each session with a budget has used in its current window (package
-- budgets): one row per session, moved to a new window by the statement
-- that first counts in it. Each change is one conditional upsert.
CREATE TABLE budget_usage (
	session  TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
	win      INTEGER NOT NULL CHECK (win >= 0),  -- the window's index since the session's creation (0 for its life)
	requests INTEGER NOT NULL DEFAULT 0 CHECK (requests >= 0),
	tokens   INTEGER NOT NULL DEFAULT 0 CHECK (tokens >= 0),
	bytes    INTEGER NOT NULL DEFAULT 0 CHECK (bytes >= 0)
) STRICT;
`},
		{version: 14, name: "trust", sql: `
-- The trust store (package store): each publisher authority
-- (scheme://owner) and its allowed signers, the allowed_signers text as the
-- operator gave it, checked when it was added.
CREATE TABLE trust_signers (
	authority  TEXT PRIMARY KEY,
	signers    TEXT NOT NULL,
	updated_at TEXT NOT NULL
) STRICT;
-- The publisher signature (armored SSH signature) each installed package
-- came with, by package hash, which the signature does not change; judged
-- against trust_signers whenever the store lists the package.
CREATE TABLE store_signatures (
	hash        TEXT PRIMARY KEY CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'),
	signature   TEXT NOT NULL,
	recorded_at TEXT NOT NULL
) STRICT;
`},
		{version: 15, name: "store_consents", sql: `
-- A version installed but not served: it asks for more than the consent of
-- its connector's active version, and waits for aileron connector approve.
ALTER TABLE store_versions ADD COLUMN quarantined INTEGER NOT NULL DEFAULT 0 CHECK (quarantined IN (0, 1));
-- The consent each installed version was installed under: what the package
-- asked (store.Request as JSON), its hash, who consented, how and when, and
-- whether a daemon wrote its store.consented audit line yet (not for one
-- given with the daemon stopped, until a daemon claims it).
-- One row per version; an approval replaces its row.
CREATE TABLE store_consents (
	fqn        TEXT NOT NULL,
	version    TEXT NOT NULL,
	hash       TEXT NOT NULL CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'),
	request    TEXT NOT NULL,
	granted_by TEXT NOT NULL,
	via        TEXT NOT NULL,
	granted_at TEXT NOT NULL,
	audited    INTEGER NOT NULL DEFAULT 0 CHECK (audited IN (0, 1)),
	PRIMARY KEY (fqn, version)
) STRICT;
`},
		{version: 16, name: "action_run_trees", sql: `
-- Action runs as call trees, with a deadline and cancellation: a run may
-- end cancelled (the status check is rebuilt with the table), audit_id is
-- its action.started line (the parent of its steps' lines), deadline when
-- it must end while running, time_left_ms what is left of its timeout
-- while it waits on a step's approval.
CREATE TABLE action_runs_v16 (
	id           TEXT PRIMARY KEY,
	session      TEXT NOT NULL,
	action       TEXT NOT NULL,
	version      TEXT NOT NULL,
	connector    TEXT NOT NULL,
	args         TEXT NOT NULL,
	status       TEXT NOT NULL CHECK (status IN ('pending_approval','running','completed','denied','failed','cancelled')),
	approval_id  TEXT NOT NULL DEFAULT '',
	next_step    INTEGER NOT NULL DEFAULT 0,
	outputs      TEXT NOT NULL DEFAULT '{}',
	result       TEXT NOT NULL DEFAULT '',
	created_at   TEXT NOT NULL,
	updated_at   TEXT NOT NULL,
	audit_id     TEXT NOT NULL DEFAULT '',
	deadline     TEXT NOT NULL DEFAULT '',
	time_left_ms INTEGER NOT NULL DEFAULT 0
) STRICT;
INSERT INTO action_runs_v16 (id, session, action, version, connector, args, status, approval_id, next_step, outputs,
	result, created_at, updated_at)
	SELECT id, session, action, version, connector, args, status, approval_id, next_step, outputs,
	result, created_at, updated_at FROM action_runs;
DROP TABLE action_runs;
ALTER TABLE action_runs_v16 RENAME TO action_runs;
CREATE INDEX action_runs_approval ON action_runs (approval_id);
CREATE INDEX action_runs_status ON action_runs (status);
`},
		{version: 17, name: "session_unknown", sql: `
-- What a session does with a request no operation matches: deny (refuse
-- it) or learn (refuse it and record it as a proposal).
ALTER TABLE sessions ADD COLUMN unknown TEXT NOT NULL DEFAULT 'deny' CHECK (unknown IN ('deny', 'learn'));
`},
		{version: 18, name: "proposals", sql: `
-- Unknown requests of sessions in learn mode, one row per session, method,
-- host, port and path template: how often and when they were seen, up to
-- five example audit ids (space-separated), whether any carried a
-- credential, and whether a human rejected the proposal.
CREATE TABLE proposals (
	id          TEXT PRIMARY KEY,
	session     TEXT NOT NULL,
	method      TEXT NOT NULL,
	host        TEXT NOT NULL,
	port        INTEGER NOT NULL,
	template    TEXT NOT NULL,
	state       TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open','rejected')),
	seen        INTEGER NOT NULL,
	first_seen  TEXT NOT NULL,
	last_seen   TEXT NOT NULL,
	examples    TEXT NOT NULL,
	examples_n  INTEGER NOT NULL,
	credential  INTEGER NOT NULL CHECK (credential IN (0, 1)),
	reason      TEXT NOT NULL DEFAULT '',
	decided_by  TEXT NOT NULL DEFAULT '',
	decided_at  TEXT NOT NULL DEFAULT '',
	UNIQUE (session, method, host, port, template)
) STRICT;
CREATE INDEX proposals_session ON proposals (session, last_seen);
`},
		{version: 19, name: "unknown_ask", sql: `
-- A session may also ask a human about an unknown request (ask). The
-- column is re-added to change its check: sessions keeps its rows, and the
-- tables that refer to it are untouched.
ALTER TABLE sessions ADD COLUMN unknown_v19 TEXT NOT NULL DEFAULT 'deny';
UPDATE sessions SET unknown_v19 = unknown;
ALTER TABLE sessions DROP COLUMN unknown;
ALTER TABLE sessions ADD COLUMN unknown TEXT NOT NULL DEFAULT 'deny' CHECK (unknown IN ('deny', 'ask', 'learn'));
UPDATE sessions SET unknown = unknown_v19;
ALTER TABLE sessions DROP COLUMN unknown_v19;
-- A proposal may be accepted as a rule (rule: the method, template and
-- approval as accepted, JSON; connector: the learned connector version it
-- went into, FQN@VERSION), and may have been asked for by an agent
-- (justification: what it said, the latest).
CREATE TABLE proposals_v19 (
	id            TEXT PRIMARY KEY,
	session       TEXT NOT NULL,
	method        TEXT NOT NULL,
	host          TEXT NOT NULL,
	port          INTEGER NOT NULL,
	template      TEXT NOT NULL,
	state         TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open','accepted','rejected')),
	seen          INTEGER NOT NULL,
	first_seen    TEXT NOT NULL,
	last_seen     TEXT NOT NULL,
	examples      TEXT NOT NULL,
	examples_n    INTEGER NOT NULL,
	credential    INTEGER NOT NULL CHECK (credential IN (0, 1)),
	reason        TEXT NOT NULL DEFAULT '',
	decided_by    TEXT NOT NULL DEFAULT '',
	decided_at    TEXT NOT NULL DEFAULT '',
	justification TEXT NOT NULL DEFAULT '',
	rule          TEXT NOT NULL DEFAULT '',
	connector     TEXT NOT NULL DEFAULT '',
	UNIQUE (session, method, host, port, template)
) STRICT;
INSERT INTO proposals_v19 (id, session, method, host, port, template, state, seen, first_seen, last_seen, examples,
	examples_n, credential, reason, decided_by, decided_at)
	SELECT id, session, method, host, port, template, state, seen, first_seen, last_seen, examples,
	examples_n, credential, reason, decided_by, decided_at FROM proposals;
DROP TABLE proposals;
ALTER TABLE proposals_v19 RENAME TO proposals;
CREATE INDEX proposals_session ON proposals (session, last_seen);
`},
	}
}
