package postgres_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/internal/sqlstmt"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// releasedSchema is the PostgreSQL schema version of the newest release
// (CHANGELOG.md: its "Schema: SQLite N, PostgreSQL M." line).
func releasedSchema(tb testing.TB) int {
	tb.Helper()
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		tb.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\n## \[\d+\.\d+\.\d+\].*?\nSchema: SQLite \d+, PostgreSQL (\d+)\.`).FindSubmatch(b)
	if m == nil {
		tb.Fatal("CHANGELOG.md: no release with a \"Schema: SQLite N, PostgreSQL M.\" line")
	}
	v, _ := strconv.Atoi(string(m[1]))
	return v
}

// migrateRows is how many done rows the migration cost tests fill the
// outbox with: ACKD_TEST_MIGRATE_ROWS, default 20000 (enough for the
// planner to prefer an index where one serves; 300000 to measure).
func migrateRows(tb testing.TB) int {
	tb.Helper()
	if v := os.Getenv("ACKD_TEST_MIGRATE_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			tb.Fatalf("ACKD_TEST_MIGRATE_ROWS=%q is not a row count", v)
		}
		return n
	}
	return 20000
}

// Issue 29.2: no migration since the last release scans the outbox, the
// receipts or the stored requests while it holds their lock (an ALTER
// TABLE's ACCESS EXCLUSIVE lasts to the section's commit, and every ack of
// a replica still serving waits behind it). On a database at the release's
// schema with ACKD_TEST_MIGRATE_ROWS done rows (analyzed, as autovacuum
// would have), each statement of each later section runs in order in the
// section's transaction; before it runs, PostgreSQL's plan for it must not
// read one of those tables sequentially. A CREATE INDEX on one of them
// (not CONCURRENTLY), a validating ADD CONSTRAINT (CHECK or FOREIGN KEY
// without NOT VALID) and a column type change (a rewrite) are refused by
// name. Each section's time, BEGIN to COMMIT (the time it held its
// locks), is logged: `go test -run TestMigrationsSinceTheReleaseScanNoTable
// -v ./store/postgres/` with ACKD_TEST_MIGRATE_ROWS=300000 measures it.
func TestMigrationsSinceTheReleaseScanNoTable(t *testing.T) {
	u := pgtest.URL(t)
	ms, err := store.Migrations(postgres.Schema)
	if err != nil {
		t.Fatal(err)
	}
	released := releasedSchema(t)
	pgtest.Exec(t, u, `CREATE TABLE ackd_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms[:released] {
		pgtest.Exec(t, u, m.SQL)
		pgtest.Exec(t, u, `INSERT INTO ackd_migrations (version) VALUES ($1)`, m.Version)
	}
	n := migrateRows(t)
	pgtest.Exec(t, u, `INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, completed_at)
		SELECT 'Ev' || i || ':mention-to-app', 'forward', '{"route":"mention-to-app","pad":"' || repeat(md5(i::text), 30) || '"}',
		       'done', 1, 1700000000000 + i * 50, 1700000000000 + i * 50, 1700000000000 + i * 50 + 30
		  FROM generate_series(1, $1::int) AS i`, n)
	pgtest.Exec(t, u, `INSERT INTO slack_event_receipts SELECT 'Ev' || i, 'app_mention', 1700000000000 + i * 50 FROM generate_series(1, $1::int) AS i`, n)
	pgtest.Exec(t, u, `INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, last_error)
		VALUES ('P1:r', 'post', '{"route":"r"}', 'parked', 8, 1, 1, 'x'), ('P2:r', 'post', '{"route":"r"}', 'pending', 3, 1, 1, 'x')`)
	pgtest.Exec(t, u, `ANALYZE outbox`)
	pgtest.Exec(t, u, `ANALYZE slack_event_receipts`)

	big := []string{"outbox", "slack_event_receipts", "slack_requests"}
	named := func(st, pattern string) string {
		for _, tbl := range big {
			if regexp.MustCompile(`(?is)` + fmt.Sprintf(pattern, tbl)).MatchString(st) {
				return tbl
			}
		}
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	planScans := func(t *testing.T, tx pgx.Tx, st string) {
		t.Helper()
		rows, err := tx.Query(ctx, "EXPLAIN "+st)
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", st, err)
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		for _, tbl := range big {
			if strings.Contains(strings.Join(plan, "\n"), "Seq Scan on "+tbl+" ") {
				t.Errorf("scans %s:\n%s\nplan:\n%s", tbl, st, strings.Join(plan, "\n"))
			}
		}
	}
	for _, m := range ms[released:] {
		t.Run(fmt.Sprintf("migration %d", m.Version), func(t *testing.T) {
			sts, err := sqlstmt.Split(m.SQL)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(context.Background())
			if q := m.RowsSQL(); q != "" {
				planScans(t, tx, q)
			}
			for _, st := range sts {
				verb := strings.ToUpper(strings.Fields(st)[0])
				switch {
				case named(st, `^CREATE\s+(UNIQUE\s+)?INDEX\s+(IF\s+NOT\s+EXISTS\s+)?\w+\s+ON\s+%s\b`) != "":
					t.Errorf("builds an index on a large table under its lock (CONCURRENTLY runs outside a transaction):\n%s", st)
				case named(st, `^ALTER\s+TABLE\s+%s\s.*\bADD\s+CONSTRAINT\b`) != "" && !regexp.MustCompile(`(?i)\bNOT\s+VALID\s*$`).MatchString(st):
					t.Errorf("adds a constraint that reads every row (add it NOT VALID):\n%s", st)
				case named(st, `^ALTER\s+TABLE\s+%s\s.*\b(TYPE|SET\s+NOT\s+NULL)\b`) != "":
					t.Errorf("rewrites or reads a large table:\n%s", st)
				case slices.Contains([]string{"UPDATE", "DELETE", "INSERT", "SELECT", "WITH"}, verb):
					planScans(t, tx, st)
				}
				if _, err := tx.Exec(ctx, st); err != nil {
					t.Fatalf("%s: %v", st, err)
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO ackd_migrations (version) VALUES ($1)`, m.Version); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			t.Logf("migration %d on %d done rows: %s from BEGIN to COMMIT (EXPLAINs included)", m.Version, n, time.Since(start).Round(100*time.Microsecond))
		})
	}
	s := mustOpen(t, u, store.Options{})
	if err := s.Discard(ctx, mustGetByKey(t, s, "P1:r").ID); err != nil {
		t.Fatalf("discard after the migrations: %v", err)
	}
}

func mustGetByKey(tb testing.TB, s *postgres.Store, key string) store.Row {
	tb.Helper()
	r, err := s.GetByKey(context.Background(), key)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}
