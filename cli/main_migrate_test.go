package cli

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

func fileSum(tb testing.TB, path string) [32]byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return sha256.Sum256(b)
}

// Issue 26: `ackd migrate --dry-run` names the migrations that would run
// and writes nothing; then migrate applies exactly those.
func TestMigrateDryRunSQLite(t *testing.T) {
	t.Parallel()
	ms, err := store.Migrations(schema)
	if err != nil {
		t.Fatal(err)
	}
	latest := ms[len(ms)-1]
	dir := t.TempDir()

	t.Run("no database: every migration, and no file created", func(t *testing.T) {
		db := filepath.Join(dir, "none.db")
		out := procMustRun(t, procEnv(), "migrate", "--dry-run", "--db", db).Stdout
		for _, m := range ms {
			if !strings.Contains(out, fmt.Sprintf("would apply migration %d: %s\n", m.Version, m.Summary())) {
				t.Errorf("dry run on a missing file does not list migration %d:\n%s", m.Version, out)
			}
		}
		if !strings.Contains(out, "no database yet") {
			t.Errorf("dry run does not say there is no database:\n%s", out)
		}
		if m, _ := filepath.Glob(db + "*"); len(m) != 0 {
			t.Errorf("dry run created %v", m)
		}
	})

	t.Run("a database one migration behind: that migration only, nothing written", func(t *testing.T) {
		db := filepath.Join(dir, "behind.db")
		h, err := sql.Open("sqlite", db+"?_pragma=journal_mode(WAL)")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms[:len(ms)-1] {
			if _, err := h.Exec(m.SQL); err != nil {
				t.Fatalf("migration %d: %v", m.Version, err)
			}
			if _, err := h.Exec(fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			t.Fatal(err)
		}
		h.Close()
		before := fileSum(t, db)

		out := procMustRun(t, procEnv(), "migrate", "--dry-run", "--db", db).Stdout
		want := fmt.Sprintf("%s: schema version %d\nwould apply migration %d: %s\n  cost: %s\ndry run: nothing written (migrate would bring it to schema version %d)\n",
			db, latest.Version-1, latest.Version, latest.Summary(), latest.Cost(), latest.Version)
		if out != want {
			t.Errorf("dry run:\n%s\nwant:\n%s", out, want)
		}
		if fileSum(t, db) != before {
			t.Errorf("dry run changed the database file")
		}

		procMustRun(t, procEnv(), "migrate", "--db", db)
		out = procMustRun(t, procEnv(), "migrate", "--dry-run", "--db", db).Stdout
		if want := fmt.Sprintf("%s: schema version %d, up to date: nothing to apply\n", db, latest.Version); out != want {
			t.Errorf("dry run after migrate: %q, want %q", out, want)
		}
	})

	t.Run("a database at the release's schema: each step with its cost, and the rows it would update", func(t *testing.T) {
		db := filepath.Join(dir, "released.db")
		released, _ := schemaLine(t, changelog(t), `\[\d+\.\d+\.\d+\]`)
		h, err := sql.Open("sqlite", db+"?_pragma=journal_mode(WAL)")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms[:released] {
			if _, err := h.Exec(m.SQL); err != nil {
				t.Fatalf("migration %d: %v", m.Version, err)
			}
			if _, err := h.Exec(fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
				t.Fatal(err)
			}
		}
		// Two rows an older ackd attempted (a failed pending one, a parked
		// one), one it did not, one done.
		if _, err := h.Exec(`INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at) VALUES
			('a:r', 'post', '{}', 'pending', 2, 1, 1), ('b:r', 'post', '{}', 'parked', 8, 1, 1),
			('c:r', 'post', '{}', 'pending', 0, 1, 1), ('d:r', 'post', '{}', 'done', 1, 1, 1)`); err != nil {
			t.Fatal(err)
		}
		h.Close()
		out := procMustRun(t, procEnv(), "migrate", "--dry-run", "--db", db).Stdout
		for _, m := range ms[released:] {
			cost := "  cost: " + m.Cost()
			if m.RowsSQL() != "" {
				cost += " (2 rows now)"
			}
			if want := fmt.Sprintf("would apply migration %d: %s\n%s\n", m.Version, m.Summary(), cost); !strings.Contains(out, want) {
				t.Errorf("dry run lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(out, "(2 rows now)") {
			t.Errorf("no migration since the release counts the rows it updates:\n%s", out)
		}
	})

	t.Run("a database newer than this ackd is refused, as migrate refuses it", func(t *testing.T) {
		db := filepath.Join(dir, "newer.db")
		procMustRun(t, procEnv(), "migrate", "--db", db)
		h, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Exec(fmt.Sprintf("PRAGMA user_version = %d", latest.Version+1)); err != nil {
			t.Fatal(err)
		}
		h.Close()
		r := procRun(t, procEnv(), "migrate", "--dry-run", "--db", db)
		if r.Code == 0 || !strings.Contains(r.Stderr, fmt.Sprintf("database schema version %d is newer than this ackd (%d)", latest.Version+1, latest.Version)) {
			t.Errorf("dry run on a newer database: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})
}

func TestMigrateDryRunPostgres(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ms, err := store.Migrations(postgres.Schema)
	if err != nil {
		t.Fatal(err)
	}
	out := procMustRun(t, procEnv(), "migrate", "--dry-run", "--db", url).Stdout
	if !strings.Contains(out, "no database yet") || !strings.Contains(out, fmt.Sprintf("would apply migration %d:", len(ms))) {
		t.Errorf("dry run on an empty schema:\n%s", out)
	}
	if strings.Contains(out, "password") {
		t.Errorf("dry run printed the URL unredacted: %s", out)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("dry run created %d tables", tables)
	}
	procMustRun(t, procEnv(), "migrate", "--db", url)
	out = procMustRun(t, procEnv(), "migrate", "--dry-run", "--db", url).Stdout
	if !strings.Contains(out, fmt.Sprintf("schema version %d, up to date", len(ms))) {
		t.Errorf("dry run after migrate: %s", out)
	}
}

// changelog is CHANGELOG.md's text.
func changelog(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// schemaLine finds the "Schema: SQLite N, PostgreSQL M." line of the
// CHANGELOG section whose heading matches heading.
func schemaLine(tb testing.TB, text, heading string) (sqlite, pg int) {
	tb.Helper()
	m := regexp.MustCompile(`(?s)\n## ` + heading + `[^\n]*\n.*?\nSchema: SQLite (\d+), PostgreSQL (\d+)\.\n`).FindStringSubmatch(text)
	if m == nil {
		tb.Fatalf("CHANGELOG.md: no \"Schema: SQLite N, PostgreSQL M.\" line under ## %s", heading)
	}
	sqlite, _ = strconv.Atoi(m[1])
	pg, _ = strconv.Atoi(m[2])
	return sqlite, pg
}

// Issue 29.2: the CHANGELOG's [Unreleased] section names the schema
// versions this binary migrates to, and its Schema versions table has a
// row for every version of both engines.
func TestChangelogNamesEverySchemaVersion(t *testing.T) {
	text := changelog(t)
	sq, pg := schemaLine(t, text, `\[Unreleased\]`)
	wantSQ, wantPG := strings.Count(schema, "\n-- migrate: "), strings.Count(postgres.Schema, "\n-- migrate: ")
	if sq != wantSQ || pg != wantPG {
		t.Errorf("CHANGELOG [Unreleased] says Schema: SQLite %d, PostgreSQL %d; this binary migrates to SQLite %d, PostgreSQL %d", sq, pg, wantSQ, wantPG)
	}
	for engine, latest := range map[string]int{"SQLite": wantSQ, "PostgreSQL": wantPG} {
		for v := 1; v <= latest; v++ {
			if !regexp.MustCompile(fmt.Sprintf(`(?m)^\| %s \| %d \| [^|]+ \| [^|]+ \| [^|]+ \|$`, engine, v)).MatchString(text) {
				t.Errorf("CHANGELOG's Schema versions table has no row for %s %d", engine, v)
			}
		}
		if regexp.MustCompile(fmt.Sprintf(`(?m)^\| %s \| %d \|`, engine, latest+1)).MatchString(text) {
			t.Errorf("CHANGELOG's Schema versions table names %s %d, which this binary does not have", engine, latest+1)
		}
	}
}

// Issue 29.2: every migration since the last release says what it costs
// (its "-- cost:" line, which `migrate --dry-run` prints): whether it works
// in place and which rows it touches.
func TestMigrationsSinceTheReleaseSayWhatTheyCost(t *testing.T) {
	sq, pg := schemaLine(t, changelog(t), `\[\d+\.\d+\.\d+\]`)
	for engine, c := range map[string]struct {
		text     string
		released int
	}{"SQLite": {schema, sq}, "PostgreSQL": {postgres.Schema, pg}} {
		ms, err := store.Migrations(c.text)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms[c.released:] {
			if m.Cost() == "" {
				t.Errorf("%s migration %d has no \"-- cost:\" line", engine, m.Version)
			}
			if strings.Contains(m.Summary(), "cost:") {
				t.Errorf("%s migration %d: its summary takes in the cost: %q", engine, m.Version, m.Summary())
			}
		}
	}
}
