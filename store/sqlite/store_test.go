package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/testreq"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
	_ "modernc.org/sqlite"
)

// TestMain lets the test binary act as a separate OS process racing on the
// same database file (see runChildren).
func TestMain(m *testing.M) {
	switch mode := os.Getenv("ACKD_STORE_CHILD"); mode {
	case "":
	case "eio":
		os.Exit(eioChild())
	default:
		os.Exit(child(mode))
	}
	os.Exit(testreq.Main(m)) // then what skipped, and why, without -v too
}

func schema(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("../../schema.sql")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_800_000_000_000)} }
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustOpen(tb testing.TB, path string, opts store.Options) *sqlite.Store {
	tb.Helper()
	if opts.Schema == "" {
		opts.Schema = schema(tb)
	}
	s, err := sqlite.Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return s
}

func newStore(tb testing.TB, c *clock) (*sqlite.Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "ackd.db")
	opts := store.Options{}
	if c != nil {
		opts.Now = c.Now
	}
	return mustOpen(tb, path, opts), path
}

// rawDB opens a second, independent handle on the file for assertions.
func rawDB(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func count(tb testing.TB, db *sql.DB, q string, args ...any) int {
	tb.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", q, err)
	}
	return n
}

func intent(eventID string, routes ...string) store.Intent {
	in := store.Intent{EventID: eventID, EventType: "app_mention"}
	for _, r := range routes {
		in.Rows = append(in.Rows, store.NewRow{
			Key: eventID + ":" + r, Effect: "log", Payload: fmt.Sprintf(`{"route":%q}`, r),
		})
	}
	return in
}

func mustRecord(tb testing.TB, s *sqlite.Store, in store.Intent) bool {
	tb.Helper()
	first, err := s.RecordIntent(context.Background(), in)
	if err != nil {
		tb.Fatal(err)
	}
	return first
}

func mustClaim(tb testing.TB, s *sqlite.Store, token string, limit int, lease time.Duration) []store.Row {
	tb.Helper()
	rows, err := s.Claim(context.Background(), token, limit, lease, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

func ids(rows []store.Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// withNextMigration appends a migration section after the schema's last one
// and returns the schema and the new section's version.
func withNextMigration(schema, sql string) (string, int) {
	n := strings.Count(schema, "\n-- migrate: ") + 1
	return fmt.Sprintf("%s\n-- migrate: %d\n%s\n", schema, n, sql), n
}

func TestMigrate(t *testing.T) {
	t.Run("reopening applies nothing twice and keeps rows; a new section is applied", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ackd.db")
		sch := schema(t)
		s, err := sqlite.Open(context.Background(), path, store.Options{Schema: sch})
		if err != nil {
			t.Fatal(err)
		}
		mustRecord(t, s, intent("Ev1", "r"))
		s.Close()
		next, n := withNextMigration(sch, "ALTER TABLE outbox ADD COLUMN migrated_note TEXT;")
		s2 := mustOpen(t, path, store.Options{Schema: next})
		v, _ := s2.SchemaVersion(context.Background())
		if v != n {
			t.Fatalf("user_version = %d", v)
		}
		if n := count(t, rawDB(t, path), `SELECT count(*) FROM outbox WHERE migrated_note IS NULL`); n != 1 {
			t.Fatalf("rows after migration = %d", n)
		}
	})

	t.Run("a database newer than the binary is refused", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ackd.db")
		next, _ := withNextMigration(schema(t), "SELECT 1;")
		s := mustOpen(t, path, store.Options{Schema: next})
		s.Close()
		_, err := sqlite.Open(context.Background(), path, store.Options{Schema: schema(t)})
		if err == nil || !strings.Contains(err.Error(), "newer than this ackd") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestOpenBadInput(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	os.WriteFile(notDB, []byte(strings.Repeat("this is not a database\n", 100)), 0o600)
	cases := []struct {
		name, path, want string
	}{
		{"missing directory", filepath.Join(dir, "nope", "ackd.db"), "no such file or directory"},
		{"not an SQLite file", notDB, "not an SQLite database"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sqlite.Open(context.Background(), tc.path, store.Options{Schema: schema(t)})
			if err == nil {
				t.Fatal("opened")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.path) || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line naming %s and %q", msg, tc.path, tc.want)
			}
		})
	}
}

func TestFileMode(t *testing.T) {
	// SQLite would create the file 0644 under umask 022; ackd creates it 0600
	// and the -wal/-shm files inherit that.
	s, path := newStore(t, nil)
	mustRecord(t, s, intent("Ev1", "r"))
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", p, st.Mode().Perm())
		}
	}
}

// --- separate OS processes on one file ---------------------------------

// child runs in a re-executed test binary. It waits for the start file, then
// performs one operation and prints its verdict.
func child(mode string) int {
	path, startFile := os.Getenv("ACKD_DB"), os.Getenv("ACKD_START")
	sch, err := os.ReadFile(os.Getenv("ACKD_SCHEMA"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := sqlite.Open(context.Background(), path, store.Options{Schema: string(sch), BusyTimeout: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	for {
		if _, err := os.Stat(startFile); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	switch mode {
	case "record":
		first, err := s.RecordIntent(context.Background(), intent("EvProc", "a", "b"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Println(first)
	case "claim":
		tok := os.Getenv("ACKD_TOKEN")
		var got []string
		for {
			rows, err := s.Claim(context.Background(), tok, 3, time.Hour, nil)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 2
			}
			if len(rows) == 0 {
				break
			}
			for _, r := range rows {
				got = append(got, fmt.Sprint(r.ID))
				if _, err := s.Complete(context.Background(), r.ID, tok, "", nil); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 2
				}
			}
		}
		fmt.Println(strings.Join(got, " "))
	}
	return 0
}

// runChildren starts n processes of the test binary in mode on path, lets
// them go at once, and returns each one's output.
func runChildren(t *testing.T, mode, path string, n int) []string {
	t.Helper()
	startFile := filepath.Join(t.TempDir(), "go")
	schemaPath, _ := filepath.Abs("../../schema.sql")
	outs := make([]strings.Builder, n)
	cmds := make([]*exec.Cmd, n)
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "ACKD_STORE_CHILD="+mode, "ACKD_DB="+path,
			"ACKD_START="+startFile, "ACKD_SCHEMA="+schemaPath, fmt.Sprintf("ACKD_TOKEN=P%d", i))
		cmd.Stdout = &outs[i]
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	time.Sleep(200 * time.Millisecond) // let them open the file; correctness does not depend on it
	os.WriteFile(startFile, nil, 0o600)
	res := make([]string, n)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		res[i] = strings.TrimSpace(outs[i].String())
	}
	return res
}

func TestSeparateProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Run("6 processes record one event_id: exactly one is first", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ackd.db")
		mustOpen(t, path, store.Options{}).Close()
		outs := runChildren(t, "record", path, 6)
		firsts := 0
		for _, o := range outs {
			switch o {
			case "true":
				firsts++
			case "false":
			default:
				t.Fatalf("child said %q", o)
			}
		}
		if firsts != 1 {
			t.Fatalf("%d processes told first: %v", firsts, outs)
		}
		db := rawDB(t, path)
		if n := count(t, db, `SELECT count(*) FROM slack_event_receipts`); n != 1 {
			t.Fatalf("receipts = %d", n)
		}
		if n := count(t, db, `SELECT count(*) FROM outbox`); n != 2 {
			t.Fatalf("outbox = %d", n)
		}
	})

	t.Run("4 processes claim and complete: every row exactly once", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "ackd.db")
		s := mustOpen(t, path, store.Options{})
		for i := range 60 {
			mustRecord(t, s, intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		s.Close()
		outs := runChildren(t, "claim", path, 4)
		seen := map[string]int{}
		for _, o := range outs {
			for _, id := range strings.Fields(o) {
				seen[id]++
			}
		}
		if len(seen) != 60 {
			t.Fatalf("%d distinct rows processed, want 60", len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("row %s processed %d times", id, n)
			}
		}
		if n := count(t, rawDB(t, path), `SELECT count(*) FROM outbox WHERE status='done'`); n != 60 {
			t.Fatalf("done = %d", n)
		}
	})
}

func TestAbandonedIntent(t *testing.T) {
	t.Run("a caller that gives up before its intent reaches a transaction leaves nothing behind", func(t *testing.T) {
		s, path := newStore(t, nil)
		// A second connection holds the write lock, as another process would.
		locker := rawDB(t, path)
		conn, err := locker.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := s.RecordIntent(ctx, intent("EvLate", "r")); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		// Release the lock while the committer is still waiting for it: it
		// must skip the abandoned intent rather than commit it late.
		if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
			t.Fatal(err)
		}
		if !mustRecord(t, s, intent("EvAfter", "r")) {
			t.Fatal("later intent not first")
		}
		db := rawDB(t, path)
		if n := count(t, db, `SELECT count(*) FROM slack_event_receipts WHERE event_id = 'EvLate'`); n != 0 {
			t.Fatal("an intent answered as not recorded was committed later")
		}
		if !mustRecord(t, s, intent("EvLate", "r")) {
			t.Fatal("Slack's retry of the abandoned intent must be first")
		}
	})
}

func TestPruneInterleaves(t *testing.T) {
	t.Run("an intent commits while a long prune runs: the prune is sliced, never one long transaction", func(t *testing.T) {
		c := newClock()
		s, path := newStore(t, c)
		ctx := context.Background()
		mustRecord(t, s, intent("Ev0", "r")) // the schema exists; now 1000 old receipts in one transaction
		db := rawDB(t, path)
		insertOldReceipts(t, db, 1000, c.Now())
		c.Advance(72 * time.Hour)
		pruned := make(chan error, 1)
		go func() {
			_, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 1) // one row per slice: 1000 group commits
			pruned <- err
		}()
		for count(t, db, `SELECT count(*) FROM slack_event_receipts WHERE event_id LIKE 'Old%'`) == 1000 {
			time.Sleep(time.Millisecond) // wait for the prune to begin
		}
		mustRecord(t, s, intent("EvDuring", "r"))
		if left := count(t, db, `SELECT count(*) FROM slack_event_receipts WHERE event_id LIKE 'Old%'`); left == 0 {
			t.Fatal("the intent waited for the whole prune")
		}
		if err := <-pruned; err != nil {
			t.Fatal(err)
		}
		if left := count(t, db, `SELECT count(*) FROM slack_event_receipts WHERE event_id LIKE 'Old%'`); left != 0 {
			t.Fatalf("%d old receipts left after the prune", left)
		}
	})
}

// TestQueryPlans checks that the hot statements read the outbox through its
// indexes: a scan of the table would read every payload of a large outbox.
func TestQueryPlans(t *testing.T) {
	_, path := newStore(t, nil)
	db := rawDB(t, path)
	cases := []struct {
		name string
		sql  string
		args []any
	}{
		{"claim", sqlite.ClaimSQL, []any{"T", 2, 1, 25, nil, 8}},
		{"claim with an effect filter", sqlite.ClaimSQL, []any{"T", 2, 1, 25, `["log"]`, 8}},
		{"complete a batch", sqlite.CompleteBatchSQL, []any{1, "T", "[1,2]", `[[1,"{}"]]`, `[[2,"note"]]`}},
		{"queue counts", sqlite.QueueCountsSQL, nil},
		{"due rows by effect", sqlite.DueSQL, []any{1}},
		{"console search", sqlite.SearchSQL, []any{7, "Ev1", `:"Ev1"`, 50}},
		{"console search of the newest rows", sqlite.SearchWindowSQL, []any{`:"Ev1"`, 50}},
		{"console counts by route", sqlite.RouteCountsSQL, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := db.Query(`EXPLAIN QUERY PLAN `+tc.sql, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			var plan []string
			tableScan := false
			for res.Next() {
				var id, parent, unused int
				var detail string
				if err := res.Scan(&id, &parent, &unused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
				// "SCAN outbox USING … INDEX" reads an index; a bare
				// "SCAN outbox" reads the table.
				tableScan = tableScan || strings.HasPrefix(detail, "SCAN outbox") && !strings.Contains(detail, "INDEX")
			}
			if joined := strings.Join(plan, " | "); tableScan || !strings.Contains(joined, "outbox USING") {
				t.Fatalf("plan reads the outbox table without an index: %s", joined)
			}
		})
	}
}

// insertOldReceipts writes n receipts "Old0"… received at at, in one
// transaction of db (a second handle on the file), for the prune tests.
func insertOldReceipts(tb testing.TB, db *sql.DB, n int, at time.Time) {
	tb.Helper()
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if _, err := tx.Exec(`INSERT INTO slack_event_receipts VALUES (?, 'message', ?)`,
			fmt.Sprint("Old", i), at.UnixMilli()); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}
