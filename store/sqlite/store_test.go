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
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
	_ "modernc.org/sqlite"
)

// TestMain lets the test binary act as a separate OS process racing on the
// same database file (see runChildren).
func TestMain(m *testing.M) {
	if mode := os.Getenv("ACKD_STORE_CHILD"); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
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

func TestRecordIntent(t *testing.T) {
	t.Run("first delivery is first, redelivery is not and adds nothing", func(t *testing.T) {
		s, path := newStore(t, nil)
		if !mustRecord(t, s, intent("Ev1", "a", "b")) {
			t.Fatal("first delivery not reported first")
		}
		if mustRecord(t, s, intent("Ev1", "a", "b")) {
			t.Fatal("redelivery reported first")
		}
		db := rawDB(t, path)
		if n := count(t, db, `SELECT count(*) FROM slack_event_receipts`); n != 1 {
			t.Fatalf("receipts = %d, want 1", n)
		}
		if n := count(t, db, `SELECT count(*) FROM outbox`); n != 2 {
			t.Fatalf("outbox rows = %d, want 2", n)
		}
	})

	t.Run("64 goroutines racing on one event_id: one first, one receipt, rows once", func(t *testing.T) {
		s, path := newStore(t, nil)
		var firsts atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				first, err := s.RecordIntent(context.Background(), intent("EvRace", "a", "b"))
				if err != nil {
					t.Error(err)
				}
				if first {
					firsts.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if n := firsts.Load(); n != 1 {
			t.Fatalf("%d callers told first, want 1", n)
		}
		db := rawDB(t, path)
		if n := count(t, db, `SELECT count(*) FROM slack_event_receipts WHERE event_id='EvRace'`); n != 1 {
			t.Fatalf("receipts = %d", n)
		}
		if n := count(t, db, `SELECT count(*) FROM outbox`); n != 2 {
			t.Fatalf("outbox rows = %d, want 2", n)
		}
	})

	t.Run("message-keyed rows from two events enqueue one row", func(t *testing.T) {
		s, path := newStore(t, nil)
		row := store.NewRow{Key: "C1:1.0:eyes", Effect: "react", Payload: `{}`}
		a := store.Intent{EventID: "EvMsg", EventType: "message", Rows: []store.NewRow{row}}
		b := store.Intent{EventID: "EvMention", EventType: "app_mention", Rows: []store.NewRow{row}}
		if !mustRecord(t, s, a) || !mustRecord(t, s, b) {
			t.Fatal("distinct event ids must both be first")
		}
		if n := count(t, rawDB(t, path), `SELECT count(*) FROM outbox`); n != 1 {
			t.Fatalf("outbox rows = %d, want 1", n)
		}
	})

	t.Run("expired context returns an error and a retry still records", func(t *testing.T) {
		s, path := newStore(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.RecordIntent(ctx, intent("EvCtx", "a")); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if !mustRecord(t, s, intent("EvCtx", "a")) {
			t.Fatal("retry after a cancelled attempt must be first (nothing was committed)")
		}
		if n := count(t, rawDB(t, path), `SELECT count(*) FROM outbox`); n != 1 {
			t.Fatalf("outbox rows = %d", n)
		}
	})
}

// TestGroupCommit checks that batching keeps every caller's verdict exact.
func TestGroupCommit(t *testing.T) {
	t.Run("mixed concurrent firsts and duplicates: each verdict matches the database", func(t *testing.T) {
		s, path := newStore(t, nil)
		const events, copies = 200, 4
		type verdict struct {
			id    string
			first bool
		}
		results := make(chan verdict, events*copies)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for e := range events {
			for range copies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					id := fmt.Sprintf("EvG%d", e)
					first, err := s.RecordIntent(context.Background(), intent(id, "r"))
					if err != nil {
						t.Error(err)
						return
					}
					results <- verdict{id, first}
				}()
			}
		}
		close(start)
		wg.Wait()
		close(results)
		firsts := map[string]int{}
		for v := range results {
			if v.first {
				firsts[v.id]++
			}
		}
		for e := range events {
			if n := firsts[fmt.Sprintf("EvG%d", e)]; n != 1 {
				t.Errorf("EvG%d told first %d times", e, n)
			}
		}
		db := rawDB(t, path)
		if n := count(t, db, `SELECT count(*) FROM slack_event_receipts`); n != events {
			t.Fatalf("receipts = %d, want %d", n, events)
		}
		if n := count(t, db, `SELECT count(*) FROM outbox`); n != events {
			t.Fatalf("outbox = %d, want %d", n, events)
		}
	})

	t.Run("one failing intent in a group fails alone", func(t *testing.T) {
		s, path := newStore(t, nil)
		var wg sync.WaitGroup
		errs := make([]error, 50)
		start := make(chan struct{})
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				in := intent(fmt.Sprintf("EvF%d", i), "r")
				if i == 25 {
					in.Rows[0].Effect = "" // violates CHECK (effect <> '')
				}
				_, errs[i] = s.RecordIntent(context.Background(), in)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if (i == 25) != (err != nil) {
				t.Errorf("intent %d: err = %v", i, err)
			}
		}
		db := rawDB(t, path)
		if n := count(t, db, `SELECT count(*) FROM slack_event_receipts WHERE event_id = 'EvF25'`); n != 0 {
			t.Fatal("the failed intent's receipt was committed without its rows")
		}
		if n := count(t, db, `SELECT count(*) FROM slack_event_receipts`); n != 49 {
			t.Fatalf("receipts = %d, want 49", n)
		}
		if n := count(t, db, `SELECT count(*) FROM outbox`); n != 49 {
			t.Fatalf("outbox = %d, want 49", n)
		}
	})
}

func TestClaim(t *testing.T) {
	t.Run("same token re-claims the same rows, never more than the limit", func(t *testing.T) {
		c := newClock()
		s, _ := newStore(t, c)
		for i := range 10 {
			mustRecord(t, s, intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		a := mustClaim(t, s, "A", 3, time.Minute)
		b := mustClaim(t, s, "B", 3, time.Minute)
		c.Advance(59 * time.Second) // A's rows still leased, B's too
		again := mustClaim(t, s, "A", 3, time.Minute)
		if fmt.Sprint(ids(a)) != fmt.Sprint(ids(again)) {
			t.Fatalf("re-claim got %v, first claim %v", ids(again), ids(a))
		}
		c.Advance(30 * time.Second) // B's lease has expired now; A's was renewed
		again = mustClaim(t, s, "A", 3, time.Minute)
		if fmt.Sprint(ids(a)) != fmt.Sprint(ids(again)) {
			t.Fatalf("re-claim after others expired got %v, want %v (own rows first)", ids(again), ids(a))
		}
		if overlap(a, b) {
			t.Fatalf("A %v and B %v overlap", ids(a), ids(b))
		}
	})

	t.Run("an expired lease is claimable by a new token; a live one is not", func(t *testing.T) {
		c := newClock()
		s, _ := newStore(t, c)
		mustRecord(t, s, intent("Ev1", "r"))
		if rows := mustClaim(t, s, "A", 10, time.Minute); len(rows) != 1 {
			t.Fatalf("A claimed %d rows", len(rows))
		}
		if rows := mustClaim(t, s, "B", 10, time.Minute); len(rows) != 0 {
			t.Fatalf("B claimed a leased row: %v", ids(rows))
		}
		c.Advance(time.Minute)
		rows := mustClaim(t, s, "B", 10, time.Minute)
		if len(rows) != 1 || rows[0].ClaimToken != "B" {
			t.Fatalf("B after expiry: %+v", rows)
		}
	})

	t.Run("rows not yet due are not claimed", func(t *testing.T) {
		c := newClock()
		s, _ := newStore(t, c)
		mustRecord(t, s, intent("Ev1", "r"))
		rows := mustClaim(t, s, "A", 10, time.Minute)
		res, err := s.Fail(context.Background(), rows[0].ID, "A", store.FailRetryable, "boom", 0)
		if err != nil || !res.Held {
			t.Fatal(res, err)
		}
		if rows := mustClaim(t, s, "B", 10, time.Minute); len(rows) != 0 {
			t.Fatalf("claimed a row before its next_attempt_at: %v", ids(rows))
		}
		c.Advance(res.NextAttemptAt.Sub(c.Now()))
		if rows := mustClaim(t, s, "B", 10, time.Minute); len(rows) != 1 {
			t.Fatal("row not claimable once due")
		}
	})

	t.Run("8 concurrent claimers get disjoint rows", func(t *testing.T) {
		s, _ := newStore(t, nil)
		for i := range 100 {
			mustRecord(t, s, intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		var mu sync.Mutex
		owner := map[int64]string{}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := 0; ; round++ {
					rows, err := s.Claim(context.Background(), fmt.Sprintf("T%d-%d", w, round), 5, time.Hour, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if len(rows) == 0 {
						return
					}
					mu.Lock()
					for _, r := range rows {
						if prev, ok := owner[r.ID]; ok {
							t.Errorf("row %d claimed by %s and %s", r.ID, prev, r.ClaimToken)
						}
						owner[r.ID] = r.ClaimToken
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(owner) != 100 {
			t.Fatalf("%d rows claimed, want 100", len(owner))
		}
	})
}

func overlap(a, b []store.Row) bool {
	seen := map[int64]bool{}
	for _, r := range a {
		seen[r.ID] = true
	}
	for _, r := range b {
		if seen[r.ID] {
			return true
		}
	}
	return false
}

func TestFence(t *testing.T) {
	t.Run("a lost lease cannot complete or fail; the new holder can", func(t *testing.T) {
		c := newClock()
		s, path := newStore(t, c)
		mustRecord(t, s, intent("Ev1", "r"))
		a := mustClaim(t, s, "A", 1, time.Minute)
		c.Advance(2 * time.Minute)
		b := mustClaim(t, s, "B", 1, time.Minute)
		if len(a) != 1 || len(b) != 1 || a[0].ID != b[0].ID {
			t.Fatalf("A %v B %v", ids(a), ids(b))
		}
		ctx := context.Background()
		follow := []store.NewRow{{Key: "Ev1:r:reply", Effect: "post", Payload: `{}`}}
		held, err := s.Complete(ctx, a[0].ID, "A", `{"by":"A"}`, follow)
		if err != nil || held {
			t.Fatalf("stale Complete: held=%v err=%v", held, err)
		}
		if res, err := s.Fail(ctx, a[0].ID, "A", store.FailPermanent, "x", 0); err != nil || res.Held {
			t.Fatalf("stale Fail: %+v %v", res, err)
		}
		row, _ := s.Get(ctx, a[0].ID)
		if row.Status != store.StatusPending || row.ClaimToken != "B" || row.Result != "" {
			t.Fatalf("row after stale writes: %+v", row)
		}
		if n := count(t, rawDB(t, path), `SELECT count(*) FROM outbox`); n != 1 {
			t.Fatal("stale completion enqueued its follow-up")
		}
		held, err = s.Complete(ctx, b[0].ID, "B", `{"by":"B"}`, follow)
		if err != nil || !held {
			t.Fatalf("B Complete: held=%v err=%v", held, err)
		}
		row, _ = s.Get(ctx, b[0].ID)
		if row.Status != store.StatusDone || row.Result != `{"by":"B"}` {
			t.Fatalf("row after B: %+v", row)
		}
		if _, err := s.GetByKey(ctx, "Ev1:r:reply"); err != nil {
			t.Fatalf("follow-up not enqueued with the completion: %v", err)
		}
		// Completing twice is also a lost fence: the row is no longer pending.
		if held, _ := s.Complete(ctx, b[0].ID, "B", "", nil); held {
			t.Fatal("second Complete held")
		}
	})
}

func TestFail(t *testing.T) {
	ctx := context.Background()
	claimOne := func(t *testing.T, s *sqlite.Store, tok string) store.Row {
		t.Helper()
		rows := mustClaim(t, s, tok, 1, time.Minute)
		if len(rows) != 1 {
			t.Fatalf("claimed %d rows", len(rows))
		}
		return rows[0]
	}

	t.Run("backoff grows within its jitter band and parks after max attempts", func(t *testing.T) {
		c := newClock()
		path := filepath.Join(t.TempDir(), "ackd.db")
		s := mustOpen(t, path, store.Options{Now: c.Now, MaxAttempts: 5, BackoffBase: 10 * time.Second, BackoffMax: time.Hour})
		mustRecord(t, s, intent("Ev1", "r"))
		var last time.Duration
		for attempt := 1; attempt <= 4; attempt++ {
			row := claimOne(t, s, fmt.Sprint("T", attempt))
			res, err := s.Fail(ctx, row.ID, row.ClaimToken, store.FailRetryable, "http_503", 0)
			if err != nil || !res.Held || res.Status != store.StatusPending || res.Attempts != attempt {
				t.Fatalf("attempt %d: %+v %v", attempt, res, err)
			}
			delay := res.NextAttemptAt.Sub(c.Now())
			full := 10 * time.Second << (attempt - 1)
			if delay < full/2 || delay > full {
				t.Fatalf("attempt %d: delay %s outside [%s, %s]", attempt, delay, full/2, full)
			}
			if delay < last {
				t.Fatalf("attempt %d: delay %s shrank from %s", attempt, delay, last)
			}
			last = delay
			c.Advance(delay)
		}
		row := claimOne(t, s, "T5")
		res, err := s.Fail(ctx, row.ID, row.ClaimToken, store.FailRetryable, "http_503", 0)
		if err != nil || res.Status != store.StatusParked || res.Attempts != 5 {
			t.Fatalf("fifth failure: %+v %v", res, err)
		}
		got, _ := s.Get(ctx, row.ID)
		if got.Status != store.StatusParked || got.LastError != "http_503" {
			t.Fatalf("parked row: %+v", got)
		}
	})

	t.Run("backoff is capped", func(t *testing.T) {
		c := newClock()
		path := filepath.Join(t.TempDir(), "ackd.db")
		s := mustOpen(t, path, store.Options{Now: c.Now, MaxAttempts: 50, BackoffBase: time.Second, BackoffMax: 8 * time.Second})
		mustRecord(t, s, intent("Ev1", "r"))
		for attempt := 1; attempt <= 10; attempt++ {
			row := claimOne(t, s, fmt.Sprint("T", attempt))
			res, _ := s.Fail(ctx, row.ID, row.ClaimToken, store.FailRetryable, "x", 0)
			if d := res.NextAttemptAt.Sub(c.Now()); d > 8*time.Second {
				t.Fatalf("attempt %d: delay %s over the cap", attempt, d)
			}
			c.Advance(time.Hour)
		}
	})

	t.Run("a permanent error parks at once", func(t *testing.T) {
		s, _ := newStore(t, newClock())
		mustRecord(t, s, intent("Ev1", "r"))
		row := claimOne(t, s, "A")
		res, err := s.Fail(ctx, row.ID, "A", store.FailPermanent, "channel_not_found", 0)
		if err != nil || res.Status != store.StatusParked || res.Attempts != 1 {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("a rate-limit failure reschedules without spending an attempt", func(t *testing.T) {
		c := newClock()
		s, _ := newStore(t, c)
		mustRecord(t, s, intent("Ev1", "r"))
		row := claimOne(t, s, "A")
		res, err := s.Fail(ctx, row.ID, "A", store.FailRateLimited, "ratelimited", 7*time.Second)
		if err != nil || res.Status != store.StatusPending || res.Attempts != 0 {
			t.Fatalf("%+v %v", res, err)
		}
		if got := res.NextAttemptAt.Sub(c.Now()); got != 7*time.Second {
			t.Fatalf("rescheduled %s later, want 7s", got)
		}
		got, _ := s.Get(ctx, row.ID)
		if got.Attempts != 0 || got.ClaimToken != "" || got.LastError != "ratelimited" {
			t.Fatalf("row: %+v", got)
		}
	})

	t.Run("requeue puts parked rows back with a fresh budget", func(t *testing.T) {
		s, _ := newStore(t, newClock())
		mustRecord(t, s, intent("Ev1", "r"))
		row := claimOne(t, s, "A")
		s.Fail(ctx, row.ID, "A", store.FailPermanent, "invalid_auth", 0)
		if err := s.Requeue(ctx, row.ID+100); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("requeue of a missing row: %v", err)
		}
		if err := s.Requeue(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(ctx, row.ID)
		if got.Status != store.StatusPending || got.Attempts != 0 {
			t.Fatalf("requeued row: %+v", got)
		}
		if len(mustClaim(t, s, "B", 1, time.Minute)) != 1 {
			t.Fatal("requeued row not claimable")
		}
	})
}

func TestPrune(t *testing.T) {
	t.Run("old receipts and done rows go; pending and parked stay", func(t *testing.T) {
		c := newClock()
		s, path := newStore(t, c)
		ctx := context.Background()
		for i := range 5 {
			mustRecord(t, s, intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		rows := mustClaim(t, s, "A", 3, time.Minute)
		s.Complete(ctx, rows[0].ID, "A", "", nil)
		s.Fail(ctx, rows[1].ID, "A", store.FailPermanent, "x", 0)
		// rows[2] stays pending under lease; two more rows stay pending unclaimed.
		c.Advance(30 * 24 * time.Hour)
		mustRecord(t, s, intent("EvNew", "r")) // a fresh receipt must survive
		res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 2)
		if err != nil {
			t.Fatal(err)
		}
		if res.Receipts != 5 || res.Done != 1 {
			t.Fatalf("pruned %+v, want 5 receipts and 1 done row", res)
		}
		db := rawDB(t, path)
		if n := count(t, db, `SELECT count(*) FROM outbox WHERE status='pending'`); n != 4 {
			t.Fatalf("pending rows = %d, want 4", n)
		}
		if n := count(t, db, `SELECT count(*) FROM outbox WHERE status='parked'`); n != 1 {
			t.Fatalf("parked rows = %d, want 1", n)
		}
		if n := count(t, db, `SELECT count(*) FROM slack_event_receipts`); n != 1 {
			t.Fatalf("receipts = %d, want 1", n)
		}
	})
}

func TestStats(t *testing.T) {
	c := newClock()
	s, _ := newStore(t, c)
	ctx := context.Background()
	mustRecord(t, s, intent("Ev1", "a", "b", "c"))
	rows := mustClaim(t, s, "A", 2, time.Minute)
	s.Complete(ctx, rows[0].ID, "A", "", nil)
	s.Fail(ctx, rows[1].ID, "A", store.FailPermanent, "x", 0)
	c.Advance(90 * time.Second)
	st, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := store.Stats{Queue: store.Queue{Pending: 1, Done: 1, Parked: 1, OldestPending: 90 * time.Second},
		Receipts: 1, Leased: 0, SchemaVersion: strings.Count(schema(t), "\n-- migrate: ")}
	if st != want {
		t.Fatalf("stats = %+v, want %+v", st, want)
	}
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
		next, n := withNextMigration(sch, "ALTER TABLE outbox ADD COLUMN note TEXT;")
		s2 := mustOpen(t, path, store.Options{Schema: next})
		v, _ := s2.SchemaVersion(context.Background())
		if v != n {
			t.Fatalf("user_version = %d", v)
		}
		if n := count(t, rawDB(t, path), `SELECT count(*) FROM outbox WHERE note IS NULL`); n != 1 {
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
