package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ackd/ackd/internal/sqlstmt"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// schemaThrough is the schema's text up to and including section v.
func schemaThrough(tb testing.TB, full string, v int) string {
	tb.Helper()
	ms, err := store.Migrations(full)
	if err != nil {
		tb.Fatal(err)
	}
	if v == len(ms) {
		return full
	}
	i := strings.Index(full, fmt.Sprintf("\n-- migrate: %d\n", v+1))
	if i < 0 || v > len(ms) {
		tb.Fatalf("the schema has no section %d", v)
	}
	return full[:i+1]
}

// migrateRaw applies sections of schema past the database's version to a
// raw handle, each in a transaction as the store does, without the store.
func migrateRaw(tb testing.TB, db *sql.DB, schema string) {
	tb.Helper()
	ms, err := store.Migrations(schema)
	if err != nil {
		tb.Fatal(err)
	}
	var cur int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&cur); err != nil {
		tb.Fatal(err)
	}
	for _, m := range ms[cur:] {
		tx, err := db.Begin()
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := tx.Exec(m.SQL); err != nil {
			tb.Fatalf("migration %d: %v", m.Version, err)
		}
		if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
			tb.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			tb.Fatal(err)
		}
	}
}

// singleConn is a raw handle on path with one connection, so that what it
// caches (the schema) is that connection's.
func singleConn(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	return db
}

// Issue 29.2: the migration that adds the discarded status changes the
// outbox in place: no row is copied (the file does not grow by the table),
// every row keeps its id and columns, and the new status is accepted at
// once by the migrating connection, by the store's other connections and
// by a connection of another process that had the old schema cached (a
// daemon running beside `ackd migrate`). The discarded rows' index is
// there, used and kept up to date; integrity_check finds nothing wrong.
func TestDiscardedMigrationInPlace(t *testing.T) {
	full := schema(t)
	path := filepath.Join(t.TempDir(), "ackd.db")
	old := singleConn(t, path)
	migrateRaw(t, old, schemaThrough(t, full, 9))
	for _, q := range []string{
		`INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, completed_at)
		 WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
		 SELECT 'Ev' || i || ':r', 'log', '{"route":"r","pad":"' || hex(randomblob(200)) || '"}', 'done', 1, 1, 1, 2 FROM n`,
		`UPDATE outbox SET status = 'parked', last_error = 'e', claim_lease_ms = 7, outcome_unknown = 1, note = 'n', completed_at = NULL WHERE id = 2`,
		`UPDATE outbox SET status = 'parked', completed_at = NULL WHERE id = 3`,
		`DELETE FROM outbox WHERE id = 2000`, // the highest id, pruned
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := old.Exec(`UPDATE outbox SET status = 'discarded' WHERE id = 3`); err == nil {
		t.Fatal("schema 9 accepted status 'discarded'")
	}
	pages := count(t, old, `PRAGMA page_count`)

	// Migrated to 10 only: later sections add tables of their own.
	s := mustOpen(t, path, store.Options{Schema: schemaThrough(t, full, 10)})
	ctx := context.Background()
	if v, _ := s.SchemaVersion(ctx); v != 10 {
		t.Fatalf("schema version %d after migrating, want 10", v)
	}
	// A copy of the outbox would add its ~130 pages; in place adds the
	// index's root page and reuses the scratch table's.
	if after := count(t, singleConn(t, path), `PRAGMA page_count`); after > pages+2 {
		t.Errorf("page count %d → %d: the migration copied rows", pages, after)
	}
	if err := s.Discard(ctx, 2); err != nil {
		t.Fatalf("the migrating store's discard: %v", err)
	}
	if _, err := old.Exec(`UPDATE outbox SET status = 'discarded', completed_at = 3 WHERE id = 3`); err != nil {
		t.Fatalf("a connection that had schema 9 cached: %v", err)
	}
	if q, err := s.Queue(ctx); err != nil || q.Discarded != 2 || q.Parked != 0 || q.Done != 1997 {
		t.Fatalf("queue after two discards: %+v, %v", q, err)
	}
	if n := count(t, old, `SELECT count(*) FROM outbox WHERE id = 2 AND status = 'discarded' AND last_error = 'e' AND claim_lease_ms = 7 AND outcome_unknown = 1 AND note = 'n'`); n != 1 {
		t.Fatal("row 2 lost its columns")
	}
	mustRecord(t, s, intent("EvNew", "r"))
	if n := count(t, old, `SELECT max(id) FROM outbox`); n != 2001 {
		t.Fatalf("the new row got id %d, want 2001 (id 2000 was used before)", n)
	}
	var plan string
	if err := old.QueryRow(`EXPLAIN QUERY PLAN SELECT count(*) FROM outbox WHERE status = 'discarded'`).Scan(new(int), new(int), new(int), &plan); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "outbox_discarded") {
		t.Errorf("counting discarded rows: %s", plan)
	}
	if n := count(t, old, `SELECT count(*) FROM sqlite_schema WHERE name = 'outbox_discarded_build'`); n != 0 {
		t.Error("the scratch table is left")
	}
	if v, err := s.IntegrityCheck(ctx); err != nil || v != "ok" {
		t.Fatalf("integrity_check = %q, %v", v, err)
	}
}

// describeSchema is what later code depends on in a database's schema:
// every table's columns (name, type, not null, default, key), its indexes
// (columns, uniqueness, partial predicate), the views' definitions, and
// which status values the outbox accepts, in a text two schemas can be
// compared by.
func describeSchema(tb testing.TB, db *sql.DB) string {
	tb.Helper()
	var b strings.Builder
	rows, err := db.Query(`SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema
	                        WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		tb.Fatal(err)
	}
	type obj struct{ typ, name, table, sql string }
	var objs []obj
	for rows.Next() {
		var o obj
		if err := rows.Scan(&o.typ, &o.name, &o.table, &o.sql); err != nil {
			tb.Fatal(err)
		}
		objs = append(objs, o)
	}
	rows.Close()
	space := regexp.MustCompile(`\s+`)
	for _, o := range objs {
		switch o.typ {
		case "table":
			fmt.Fprintf(&b, "table %s\n", o.name)
			cols, err := db.Query(`SELECT name, type, "notnull", coalesce(dflt_value, 'NULL'), pk FROM pragma_table_info(?)`, o.name)
			if err != nil {
				tb.Fatal(err)
			}
			for cols.Next() {
				var name, typ, dflt string
				var notnull, pk int
				if err := cols.Scan(&name, &typ, &notnull, &dflt, &pk); err != nil {
					tb.Fatal(err)
				}
				fmt.Fprintf(&b, "  column %s %s notnull=%d default=%s pk=%d\n", name, typ, notnull, dflt, pk)
			}
			cols.Close()
		case "index":
			where := ""
			if i := strings.Index(o.sql, " WHERE "); i >= 0 {
				where = space.ReplaceAllString(o.sql[i:], " ")
			}
			cols := []string{}
			ic, err := db.Query(`SELECT coalesce(name, '') FROM pragma_index_info(?) ORDER BY seqno`, o.name)
			if err != nil {
				tb.Fatal(err)
			}
			for ic.Next() {
				var c string
				if err := ic.Scan(&c); err != nil {
					tb.Fatal(err)
				}
				cols = append(cols, c)
			}
			ic.Close()
			fmt.Fprintf(&b, "index %s on %s (%s)%s\n", o.name, o.table, strings.Join(cols, ", "), where)
		case "view":
			fmt.Fprintf(&b, "view %s: %s\n", o.name, space.ReplaceAllString(o.sql, " "))
		default:
			fmt.Fprintf(&b, "%s %s on %s: %s\n", o.typ, o.name, o.table, space.ReplaceAllString(o.sql, " "))
		}
	}
	// The CHECKs, by what they accept.
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback()
	for _, st := range []string{"pending", "done", "parked", "discarded", "lost"} {
		_, err := tx.Exec(`INSERT INTO outbox (idempotency_key, effect, payload, status, next_attempt_at, created_at) VALUES (?, 'log', '{}', ?, 1, 1)`, "check:"+st, st)
		fmt.Fprintf(&b, "outbox accepts status %s: %v\n", st, err == nil)
	}
	_, err = tx.Exec(`INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at) VALUES ('check:effect', '', '{}', 1, 1)`)
	fmt.Fprintf(&b, "outbox accepts an empty effect: %v\n", err == nil)
	return b.String()
}

// Issue 29.2: a database migrated by a main build before the in-place
// migration 10 (the outbox rebuilt, testdata/migration10_rebuild.sql) and
// one migrated by today's have the same schema in everything later code
// depends on, so a database already at 10 needs nothing; today's binary
// opens such a database without migrating and works on it.
func TestDiscardedMigrationMatchesTheRebuild(t *testing.T) {
	full := schema(t)
	rebuild, err := os.ReadFile("testdata/migration10_rebuild.sql")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	inPlace, rebuilt := singleConn(t, filepath.Join(dir, "inplace.db")), singleConn(t, filepath.Join(dir, "rebuilt.db"))
	migrateRaw(t, inPlace, schemaThrough(t, full, 10))
	migrateRaw(t, rebuilt, schemaThrough(t, full, 9)+string(rebuild))
	a, b := describeSchema(t, inPlace), describeSchema(t, rebuilt)
	if a != b {
		t.Fatalf("in place:\n%s\nrebuilt:\n%s", a, b)
	}
	if !strings.Contains(a, "index outbox_discarded on outbox (completed_at) WHERE status = 'discarded'") ||
		!strings.Contains(a, "outbox accepts status discarded: true") || !strings.Contains(a, "outbox accepts status lost: false") {
		t.Fatalf("the schema compared lacks what it should show:\n%s", a)
	}

	// A database at 10 from a main build: opened as it is, and it works.
	if _, err := rebuilt.Exec(`INSERT INTO outbox (idempotency_key, effect, payload, status, next_attempt_at, created_at) VALUES ('Ev1:r', 'log', '{"route":"r"}', 'parked', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	rebuilt.Close()
	s := mustOpen(t, filepath.Join(dir, "rebuilt.db"), store.Options{Schema: full})
	ctx := context.Background()
	if n, err := s.DiscardParked(ctx, store.ParkedFilter{Route: "r"}); err != nil || n != 1 {
		t.Fatalf("discard on a rebuilt schema 10: %d, %v", n, err)
	}
	if q, err := s.Queue(ctx); err != nil || q.Discarded != 1 {
		t.Fatalf("queue: %+v, %v", q, err)
	}
}

// The in-place edit checks itself: on an outbox whose CHECK is not written
// as the schema wrote it (the edit would not take), migration 10 stops
// with the check's name and changes nothing.
func TestDiscardedMigrationStopsOnAnUnexpectedOutbox(t *testing.T) {
	full := schema(t)
	path := filepath.Join(t.TempDir(), "ackd.db")
	db := singleConn(t, path)
	migrateRaw(t, db, schemaThrough(t, full, 9))
	for _, q := range []string{
		`PRAGMA writable_schema = ON`,
		`UPDATE sqlite_schema SET sql = replace(sql, '''pending'', ''done'', ''parked''', '''pending'',''done'',''parked''') WHERE name = 'outbox'`,
		`PRAGMA writable_schema = RESET`,
		`INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at) VALUES ('Ev1:r', 'log', '{}', 1, 1)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	before := describeSchema(t, db)
	db.Close()
	_, err := sqlite.Open(context.Background(), path, store.Options{Schema: full})
	if err == nil || !strings.Contains(err.Error(), "migration 10") || !strings.Contains(err.Error(), "outbox_edited_in_place") {
		t.Fatalf("open: %v, want migration 10 stopped by outbox_edited_in_place", err)
	}
	db = singleConn(t, path)
	if v := count(t, db, `PRAGMA user_version`); v != 9 {
		t.Errorf("user_version %d after the stopped migration, want 9", v)
	}
	if after := describeSchema(t, db); after != before {
		t.Errorf("the stopped migration changed the schema:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if v := count(t, db, `SELECT count(*) FROM outbox`); v != 1 {
		t.Errorf("%d rows after the stopped migration", v)
	}
}

// releasedSchema is the SQLite schema version of the newest release
// (CHANGELOG.md: its "Schema: SQLite N, …" line).
func releasedSchema(tb testing.TB) int {
	tb.Helper()
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\n## \[\d+\.\d+\.\d+\].*?\nSchema: SQLite (\d+),`).FindSubmatch(b)
	if m == nil {
		tb.Fatal("CHANGELOG.md: no release with a \"Schema: SQLite N, …\" line")
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// Issue 29.2: no migration since the last release reads or copies a large
// table in full while it holds the write lock (an older daemon beside
// `ackd migrate` waits that long for its acks). Each statement of each
// such section is run in order on a database at the version before it;
// before it runs, SQLite's own plan for it must read the outbox, the
// receipts and the stored requests only through an index. A CREATE INDEX
// on one of them (it reads every row), a rebuild (DROP or RENAME of one),
// and an ADD COLUMN with a CHECK (SQLite checks every row) are refused by
// name. The sections' "-- rows:" queries, which the dry run runs, are held
// to the same plan rule.
func TestMigrationsSinceTheReleaseReadNoTableInFull(t *testing.T) {
	full := schema(t)
	ms, err := store.Migrations(full)
	if err != nil {
		t.Fatal(err)
	}
	released := releasedSchema(t)
	big := []string{"outbox", "slack_event_receipts", "slack_requests"}
	named := func(st, pattern string) string {
		for _, tbl := range big {
			if regexp.MustCompile(`(?is)` + fmt.Sprintf(pattern, tbl)).MatchString(st) {
				return tbl
			}
		}
		return ""
	}
	planReadsInFull := func(t *testing.T, conn *sql.Conn, st string) {
		t.Helper()
		res, err := conn.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+st)
		if err != nil {
			t.Fatalf("EXPLAIN QUERY PLAN %s: %v", st, err)
		}
		defer res.Close()
		for res.Next() {
			var id, parent, unused int
			var detail string
			if err := res.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			for _, tbl := range big {
				if regexp.MustCompile(`^SCAN `+tbl+`\b`).MatchString(detail) && !strings.Contains(detail, "INDEX") {
					t.Errorf("reads %s in full (%s):\n%s", tbl, detail, st)
				}
			}
		}
	}
	path := filepath.Join(t.TempDir(), "ackd.db")
	db := singleConn(t, path)
	migrateRaw(t, db, schemaThrough(t, full, released))
	ctx := context.Background()
	for _, m := range ms[released:] {
		t.Run(fmt.Sprintf("migration %d", m.Version), func(t *testing.T) {
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if q := m.RowsSQL(); q != "" {
				planReadsInFull(t, conn, q)
			}
			if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}
			sts, err := sqlstmt.Split(m.SQL)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range sts {
				verb := strings.ToUpper(strings.Fields(st)[0])
				switch {
				case named(st, `^CREATE\s+(UNIQUE\s+)?INDEX\s+.*\sON\s+%s\b`) != "":
					t.Errorf("builds an index on %s, reading every row:\n%s", named(st, `\sON\s+%s\b`), st)
				case named(st, `^DROP\s+TABLE\s+(IF\s+EXISTS\s+)?%s\b`) != "" || named(st, `^ALTER\s+TABLE\s+%s\s+RENAME\b`) != "":
					t.Errorf("rebuilds a large table:\n%s", st)
				case named(st, `^ALTER\s+TABLE\s+%s\s+ADD\s.*\b(CHECK|GENERATED|REFERENCES)\b`) != "":
					t.Errorf("adds a column SQLite checks every row for:\n%s", st)
				case slices.Contains([]string{"UPDATE", "DELETE", "INSERT", "SELECT", "WITH", "REPLACE"}, verb):
					planReadsInFull(t, conn, st)
				}
				if _, err := conn.ExecContext(ctx, st); err != nil {
					t.Fatalf("%s: %v", st, err)
				}
			}
			if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Issue 29.2: each migration Open applies is logged with the time it held
// the write lock, and reported to Options.OnMigrate as it begins and ends;
// a reopen applies (and reports) nothing.
func TestMigrationsReportTheirLockTime(t *testing.T) {
	full := schema(t)
	ms, _ := store.Migrations(full)
	path := filepath.Join(t.TempDir(), "ackd.db")
	migrateRaw(t, singleConn(t, path), schemaThrough(t, full, len(ms)-1))
	var logs bytes.Buffer
	var steps []store.MigrationStep
	opts := store.Options{Schema: full, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnMigrate: func(s store.MigrationStep) { steps = append(steps, s) }}
	s, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	last := ms[len(ms)-1].Version
	if len(steps) != 2 || steps[0].Version != last || steps[0].Done || !steps[1].Done || steps[1].Err != nil || steps[1].Took <= 0 ||
		steps[0].Summary != ms[len(ms)-1].Summary() {
		t.Fatalf("OnMigrate got %+v; want migration %d begun and done", steps, last)
	}
	if !regexp.MustCompile(fmt.Sprintf(`msg="schema migration applied" version=%d lock_ms=[0-9.]+ summary=`, last)).MatchString(logs.String()) {
		t.Errorf("log:\n%s", logs.String())
	}
	steps = nil
	mustOpen(t, path, opts)
	if len(steps) != 0 {
		t.Errorf("a reopen reported %+v", steps)
	}
}
