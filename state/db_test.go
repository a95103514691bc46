package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func openTestDB(t *testing.T, path string) *DB {
	t.Helper()
	d, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOpenDBFresh(t *testing.T) {
	path := filepath.Join(t.TempDir(), "home", FileName)
	d := openTestDB(t, path)
	ctx := context.Background()

	v, err := d.SchemaVersion(ctx)
	if err != nil || v != len(migrations()) {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, len(migrations()))
	}
	var mode string
	if err := d.sql.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	var fk, busy int
	if err := d.sql.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil || fk != 1 {
		t.Errorf("foreign_keys = %d, %v; want 1", fk, err)
	}
	if err := d.sql.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil || busy <= 0 {
		t.Errorf("busy_timeout = %d, %v; want > 0", busy, err)
	}
	var n int
	if err := d.sql.QueryRowContext(ctx, "SELECT COUNT(*) FROM approvals").Scan(&n); err != nil {
		t.Errorf("approvals table missing: %v", err)
	}
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %04o, want 0600", p, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("database directory mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
}

func TestOpenDBReopenIsIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	ctx := context.Background()
	applied := func(d *DB) []string {
		rows, err := d.sql.QueryContext(ctx, "SELECT version || '@' || applied_at FROM schema_migrations ORDER BY version")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	d, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	first := applied(d)
	if len(first) != len(migrations()) {
		t.Fatalf("applied %v, want %d migrations", first, len(migrations()))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2 := openTestDB(t, path)
	if again := applied(d2); strings.Join(again, ",") != strings.Join(first, ",") {
		t.Errorf("reopen changed schema_migrations: %v -> %v", first, again)
	}
}

func TestOpenDBMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	ctx := context.Background()
	v1 := migrations()
	next := len(v1) + 1
	v2 := append(migrations(), migration{version: next, name: "widgets", sql: `CREATE TABLE widgets (id INTEGER PRIMARY KEY) STRICT`})
	broken := append(migrations(), migration{version: next, name: "broken",
		sql: `CREATE TABLE half (id INTEGER); INSERT INTO no_such_table VALUES (1)`})

	d, err := open(t.Context(), path, v1)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()

	// A failing migration is rolled back whole and the version stays.
	if _, err := open(t.Context(), path, broken); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("migration %d (broken)", next)) {
		t.Fatalf("broken migration: err = %v, want one naming migration %d", err, next)
	}
	d, err = open(t.Context(), path, v1)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.sql.QueryRowContext(ctx, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'half'").Scan(&n); err != nil || n != 0 {
		t.Errorf("failed migration left table half behind (count %d, %v)", n, err)
	}
	d.Close()

	d, err = open(t.Context(), path, v2)
	if err != nil {
		t.Fatalf("upgrade to version %d: %v", next, err)
	}
	if v, err := d.SchemaVersion(ctx); err != nil || v != next {
		t.Errorf("after upgrade SchemaVersion = %d, %v; want %d", v, err, next)
	}
	if _, err := d.sql.ExecContext(ctx, "INSERT INTO widgets (id) VALUES (1)"); err != nil {
		t.Errorf("migration %d table unusable: %v", next, err)
	}
	d.Close()

	// The older binary must refuse the newer database.
	_, err = open(t.Context(), path, v1)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", next)) {
		t.Fatalf("old binary on new schema: err = %v, want ErrSchemaTooNew naming version %d", err, next)
	}
}

func TestOpenDBRejects(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  error
	}{
		{"group readable", func(t *testing.T, p string) {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, ErrInsecureFile},
		{"symlink", func(t *testing.T, p string) {
			target := filepath.Join(filepath.Dir(p), "elsewhere.db")
			if err := os.WriteFile(target, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, ErrInsecureFile},
		{"directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, ErrInsecureFile},
		{"not sqlite", func(t *testing.T, p string) {
			if err := os.WriteFile(p, []byte(strings.Repeat("this is not a database\n", 200)), 0o600); err != nil {
				t.Fatal(err)
			}
		}, ErrCorruptState},
		{"bad migration list", nil, ErrCorruptState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			migs := migrations()
			if tt.setup != nil {
				tt.setup(t, path)
			} else {
				migs = append(migs, migration{version: len(migs) + 2, name: "gap", sql: "SELECT 1"})
			}
			d, err := open(t.Context(), path, migs)
			if err == nil {
				d.Close()
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("openDB: err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := Open(t.Context(), ""); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Open(\"\"): err = %v, want ErrInvalidArgument", err)
	}
}

func TestOpenDBSchemaVersionFromFuture(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	d, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.sql.Exec("INSERT INTO schema_migrations (version, applied_at) VALUES (99, 'later')"); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err = Open(t.Context(), path)
	if !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), "newer aileron") {
		t.Fatalf("err = %v, want ErrSchemaTooNew naming version 99 and the fix", err)
	}
}

func TestRebind(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`WHERE a = ? AND b = ?`, `WHERE a = $1 AND b = $2`},
		{`WHERE a = '?' AND b = ?`, `WHERE a = '?' AND b = $1`},
		{"-- why?\nWHERE a = ?", "-- why?\nWHERE a = $1"},
		{`WHERE "odd?" = ? -- trailing?`, `WHERE "odd?" = $1 -- trailing?`},
		{`VALUES (?, ?, ?)`, `VALUES ($1, $2, $3)`},
		{`WHERE a = 'unterminated ?`, `WHERE a = 'unterminated ?`},
	} {
		if got := rebind(tc.in); got != tc.want {
			t.Errorf("rebind(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// Every migration's Postgres form is free of SQLite-only syntax.
func TestMigrationsForPostgres(t *testing.T) {
	for _, m := range migrations() {
		pg := m.For(Postgres)
		for _, bad := range []string{"STRICT", "GLOB", "INTEGER"} {
			if strings.Contains(pg, bad) {
				t.Errorf("migration %d (%s) for Postgres still says %s", m.version, m.name, bad)
			}
		}
		if m.For(SQLite) != m.sql {
			t.Errorf("migration %d changed for SQLite", m.version)
		}
	}
}

// Migration 10 keeps a single node's audit record: the audit_mark row moves
// to audit_marks under node "".
func TestMigrationKeepsTheAuditMark(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	ctx := t.Context()
	old, err := open(ctx, path, migrations()[:9])
	if err != nil {
		t.Fatal(err)
	}
	err = old.Write(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO audit_mark (id, origin, size, root, seq, line_hash, file, at, end_seq, end_hash)
			VALUES (1, 'host/aileron-audit/0a0b0c0d', 41, 'cm9vdA==', 42, 'ab', 'audit-1.jsonl', 'x', 50, 'cd')`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	d := openTestDB(t, path)
	var node, origin string
	var seq, end int64
	if err := d.QueryRowContext(ctx, `SELECT node, origin, seq, end_seq FROM audit_marks`).Scan(&node, &origin, &seq, &end); err != nil {
		t.Fatal(err)
	}
	if node != "" || origin != "host/aileron-audit/0a0b0c0d" || seq != 42 || end != 50 {
		t.Fatalf("audit_marks row = %q %q %d %d; want the old mark under node \"\"", node, origin, seq, end)
	}
}
