// Package storetest is the store contract's test suite: every engine runs
// it from its own test package (the shape of River's riverdrivertest),
//
//	func TestContract(t *testing.T) { storetest.Run(t, newDB) }
//
// and passes only by keeping the rules of package store: one receipt and one
// "first" per event id however many deliveries race, idempotent outbox rows,
// disjoint and idempotent claims, release only by expiry (and the rules for
// times from the future), stored Slack requests (kept once, returned by
// Claim, rows written already leased, pruned only when unneeded), fenced Complete and Fail, follow-ups only under a held fence, a
// completion counting its attempt, backoff, parking and rate limits,
// requeue, pruning that never touches pending or parked rows, the
// inspection calls, the instances table, installations (fenced secret
// updates, oauth states used once with their installation, uninstalls in
// their receipt's transaction and judged against the install, named leases,
// parking an installation's rows), catch-up's marks and recovered
// messages, workflow steps (delayed rows, a reply saved under the fence),
// an effect's saved progress (fenced like Complete), and the attempts'
// history (recorded by the fenced calls and by claims that take a row from
// an expired lease, pruned with the row).
//
// Time. SQLite judges leases on the process's clock (store.Options.Now);
// PostgreSQL on the database's. The suite controls time through DB: Now is
// the time the engine stamps rows with right now, and Advance moves every
// store opened on the database forward (a fake clock for SQLite, an offset
// added to the database clock for PostgreSQL). No test sleeps; where an
// engine's clock also runs on its own (PostgreSQL's), an assertion on a time
// brackets the call between two readings of Now.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// DB is one fresh, empty database of an engine.
type DB interface {
	// Open opens a store on the database (the suite fills only the options
	// it tests; the engine adds its schema and clock). The engine closes it
	// at the end of the test; closing it earlier is allowed.
	Open(t *testing.T, opts store.Options) store.Store
	// Now is the time the engine would stamp a row with now.
	Now(t *testing.T) time.Time
	// Advance moves the clock of every store opened on the database by d
	// (d may be negative: a clock set back).
	Advance(d time.Duration)
	// StoredRequests lists the event ids in slack_requests, read past the
	// store (the contract has no call that lists them), in byte order.
	StoredRequests(t *testing.T) []string
	// TryOpen is Open that returns the error instead of failing t.
	TryOpen(t *testing.T, opts store.Options) (store.Store, error)
	// SetSchemaVersion records v as the database's schema version, past
	// the store, as if another ackd had migrated it that far.
	SetSchemaVersion(t *testing.T, v int)
}

// NewDB makes a fresh database for one test.
type NewDB func(t *testing.T) DB

// Run runs the whole contract suite against an engine.
func Run(t *testing.T, newDB NewDB) {
	t.Run("RecordIntent", func(t *testing.T) { testRecordIntent(t, newDB) })
	t.Run("Claim", func(t *testing.T) { testClaim(t, newDB) })
	t.Run("Fence", func(t *testing.T) { testFence(t, newDB) })
	t.Run("CompleteBatch", func(t *testing.T) { testCompleteBatch(t, newDB) })
	t.Run("Fail", func(t *testing.T) { testFail(t, newDB) })
	t.Run("OutcomeUnknown", func(t *testing.T) { testOutcomeUnknown(t, newDB) })
	t.Run("Prune", func(t *testing.T) { testPrune(t, newDB) })
	t.Run("Discard", func(t *testing.T) { testDiscard(t, newDB) })
	t.Run("StoredRequest", func(t *testing.T) { testStoredRequest(t, newDB) })
	t.Run("Inspect", func(t *testing.T) { testInspect(t, newDB) })
	t.Run("Instances", func(t *testing.T) { testInstances(t, newDB) })
	t.Run("Installations", func(t *testing.T) { testInstallations(t, newDB) })
	t.Run("OpenModes", func(t *testing.T) { testOpenModes(t, newDB) })
	t.Run("Marks", func(t *testing.T) { testMarks(t, newDB) })
	t.Run("Steps", func(t *testing.T) { testSteps(t, newDB) })
	t.Run("Progress", func(t *testing.T) { testProgress(t, newDB) })
	t.Run("Search", func(t *testing.T) { testSearch(t, newDB) })
	t.Run("Attempts", func(t *testing.T) { testAttempts(t, newDB) })
	t.Run("AttemptsAcrossCrashes", func(t *testing.T) { testAttemptsAcrossCrashes(t, newDB) })
	t.Run("RoutePauses", func(t *testing.T) { testRoutePauses(t, newDB) })
	t.Run("Replay", func(t *testing.T) { testReplay(t, newDB) })
	t.Run("StreamStops", func(t *testing.T) { testStreamStops(t, newDB) })
	t.Run("ReplayOnce", func(t *testing.T) { testReplayOnce(t, newDB) })
}

var ctx = context.Background()

func intent(eventID string, routes ...string) store.Intent {
	in := store.Intent{EventID: eventID, EventType: "app_mention"}
	for _, r := range routes {
		in.Rows = append(in.Rows, store.NewRow{
			Key: eventID + ":" + r, Effect: "log", Payload: fmt.Sprintf(`{"route":%q}`, r),
		})
	}
	return in
}

func mustRecord(tb testing.TB, s store.Store, in store.Intent) bool {
	tb.Helper()
	first, err := s.RecordIntent(ctx, in)
	if err != nil {
		tb.Fatal(err)
	}
	return first
}

func mustClaim(tb testing.TB, s store.Store, token string, limit int, lease time.Duration) []store.Row {
	tb.Helper()
	rows, err := s.Claim(ctx, token, limit, lease, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

func claimOne(tb testing.TB, s store.Store, token string) store.Row {
	tb.Helper()
	rows := mustClaim(tb, s, token, 1, time.Minute)
	if len(rows) != 1 {
		tb.Fatalf("%s claimed %d rows, want 1", token, len(rows))
	}
	return rows[0]
}

func ids(rows []store.Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// all lists every outbox row, oldest first.
func all(tb testing.TB, s store.Store) []store.Row {
	tb.Helper()
	rows, err := s.List(ctx, "", 100000)
	if err != nil {
		tb.Fatal(err)
	}
	slices.Reverse(rows)
	return rows
}

func countStatus(tb testing.TB, s store.Store, status string) int {
	tb.Helper()
	rows, err := s.List(ctx, status, 100000)
	if err != nil {
		tb.Fatal(err)
	}
	return len(rows)
}

func receipts(tb testing.TB, s store.Store) int64 {
	tb.Helper()
	st, err := s.Stats(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return st.Receipts
}

func mustGet(tb testing.TB, s store.Store, id int64) store.Row {
	tb.Helper()
	r, err := s.Get(ctx, id)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// within fails unless lo <= got <= hi.
func within(tb testing.TB, what string, got, lo, hi time.Duration) {
	tb.Helper()
	if got < lo || got > hi {
		tb.Fatalf("%s = %s, want within [%s, %s]", what, got, lo, hi)
	}
}

func testRecordIntent(t *testing.T, newDB NewDB) {
	t.Run("first delivery is first, redelivery is not and adds nothing", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if !mustRecord(t, s, intent("Ev1", "a", "b")) {
			t.Fatal("first delivery not reported first")
		}
		if mustRecord(t, s, intent("Ev1", "a", "b")) {
			t.Fatal("redelivery reported first")
		}
		if n := receipts(t, s); n != 1 {
			t.Fatalf("receipts = %d, want 1", n)
		}
		if n := len(all(t, s)); n != 2 {
			t.Fatalf("outbox rows = %d, want 2", n)
		}
		if ok, err := s.HasReceipt(ctx, "Ev1"); err != nil || !ok {
			t.Fatalf("HasReceipt(Ev1) = %v, %v", ok, err)
		}
		if ok, err := s.HasReceipt(ctx, "Ev2"); err != nil || ok {
			t.Fatalf("HasReceipt(Ev2) = %v, %v", ok, err)
		}
	})

	t.Run("64 goroutines on two stores racing on one event_id: one first, one receipt, rows once", func(t *testing.T) {
		db := newDB(t)
		stores := []store.Store{db.Open(t, store.Options{}), db.Open(t, store.Options{})}
		var firsts atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 64 {
			wg.Go(func() {
				<-start
				first, err := stores[i%2].RecordIntent(ctx, intent("EvRace", "a", "b"))
				if err != nil {
					t.Error(err)
				}
				if first {
					firsts.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := firsts.Load(); n != 1 {
			t.Fatalf("%d callers told first, want 1", n)
		}
		if n := receipts(t, stores[0]); n != 1 {
			t.Fatalf("receipts = %d", n)
		}
		if n := len(all(t, stores[1])); n != 2 {
			t.Fatalf("outbox rows = %d, want 2", n)
		}
	})

	t.Run("mixed concurrent firsts and duplicates: each verdict matches the database", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		const events, copies = 100, 4
		var mu sync.Mutex
		firsts := map[string]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for e := range events {
			for range copies {
				wg.Go(func() {
					<-start
					id := fmt.Sprintf("EvG%d", e)
					first, err := s.RecordIntent(ctx, intent(id, "r"))
					if err != nil {
						t.Error(err)
						return
					}
					if first {
						mu.Lock()
						firsts[id]++
						mu.Unlock()
					}
				})
			}
		}
		close(start)
		wg.Wait()
		for e := range events {
			if n := firsts[fmt.Sprintf("EvG%d", e)]; n != 1 {
				t.Errorf("EvG%d told first %d times", e, n)
			}
		}
		if n := receipts(t, s); n != events {
			t.Fatalf("receipts = %d, want %d", n, events)
		}
		if n := len(all(t, s)); n != events {
			t.Fatalf("outbox = %d, want %d", n, events)
		}
	})

	t.Run("one failing intent among concurrent ones fails alone and writes nothing", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		var wg sync.WaitGroup
		errs := make([]error, 30)
		start := make(chan struct{})
		for i := range errs {
			wg.Go(func() {
				<-start
				in := intent(fmt.Sprintf("EvF%d", i), "r", "s")
				if i == 15 {
					in.Rows[1].Effect = "" // violates CHECK (effect <> '')
				}
				_, errs[i] = s.RecordIntent(ctx, in)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if (i == 15) != (err != nil) {
				t.Errorf("intent %d: err = %v", i, err)
			}
		}
		if ok, _ := s.HasReceipt(ctx, "EvF15"); ok {
			t.Fatal("the failed intent's receipt was committed without its rows")
		}
		if _, err := s.GetByKey(ctx, "EvF15:r"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the failed intent's first row: %v, want ErrNotFound", err)
		}
		if n := receipts(t, s); n != 29 {
			t.Fatalf("receipts = %d, want 29", n)
		}
		if n := len(all(t, s)); n != 58 {
			t.Fatalf("outbox = %d, want 58", n)
		}
	})

	t.Run("outbox rows are idempotent by key: message-keyed rows from two events enqueue one", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		row := store.NewRow{Key: "C1:1.0:eyes", Effect: "react", Payload: `{"n":1}`}
		a := store.Intent{EventID: "EvMsg", EventType: "message", Rows: []store.NewRow{row}}
		row.Payload = `{"n":2}`
		b := store.Intent{EventID: "EvMention", EventType: "app_mention", Rows: []store.NewRow{row}}
		if !mustRecord(t, s, a) || !mustRecord(t, s, b) {
			t.Fatal("distinct event ids must both be first")
		}
		rows := all(t, s)
		if len(rows) != 1 || rows[0].Payload != `{"n":1}` || rows[0].Effect != "react" {
			t.Fatalf("rows = %+v, want the first one only", rows)
		}
	})

	t.Run("a new row is pending, due now, unclaimed, with zero attempts", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		before := db.Now(t)
		mustRecord(t, s, intent("Ev1", "r"))
		after := db.Now(t)
		r, err := s.GetByKey(ctx, "Ev1:r")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != store.StatusPending || r.Attempts != 0 || r.ClaimToken != "" || !r.ClaimExpiresAt.IsZero() ||
			!r.CompletedAt.IsZero() || r.Effect != "log" || r.Payload != `{"route":"r"}` {
			t.Fatalf("new row: %+v", r)
		}
		within(t, "created_at - before", r.CreatedAt.Sub(before), 0, after.Sub(before))
		if !r.NextAttemptAt.Equal(r.CreatedAt) {
			t.Fatalf("next_attempt_at %v != created_at %v", r.NextAttemptAt, r.CreatedAt)
		}
	})

	t.Run("a cancelled context returns its error and a retry still records", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		c, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.RecordIntent(c, intent("EvCtx", "a")); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if !mustRecord(t, s, intent("EvCtx", "a")) {
			t.Fatal("retry after a cancelled attempt must be first (nothing was committed)")
		}
		if n := len(all(t, s)); n != 1 {
			t.Fatalf("outbox rows = %d", n)
		}
	})

	t.Run("an empty event id is refused", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if _, err := s.RecordIntent(ctx, intent("", "r")); err == nil {
			t.Fatal("recorded an intent without an event id")
		}
	})

	t.Run("a closed store refuses writes with ErrClosed", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.RecordIntent(ctx, intent("Ev1", "r")); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("RecordIntent after Close: %v", err)
		}
		if err := s.CheckWrite(ctx); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("CheckWrite after Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
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

func testClaim(t *testing.T, newDB NewDB) {
	t.Run("a claim stamps the token and a lease of now+lease", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		before := db.Now(t)
		rows := mustClaim(t, s, "A", 10, time.Minute)
		after := db.Now(t)
		if len(rows) != 1 || rows[0].ClaimToken != "A" || rows[0].Status != store.StatusPending {
			t.Fatalf("claimed %+v", rows)
		}
		within(t, "lease end - before", rows[0].ClaimExpiresAt.Sub(before), time.Minute, time.Minute+after.Sub(before))
		if got := mustGet(t, s, rows[0].ID); got.ClaimToken != "A" || !got.ClaimExpiresAt.Equal(rows[0].ClaimExpiresAt) {
			t.Fatalf("stored row %+v, claim returned %+v", got, rows[0])
		}
	})

	t.Run("same token re-claims the same rows, never more than the limit", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		for i := range 10 {
			mustRecord(t, s, intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		a := mustClaim(t, s, "A", 3, time.Hour)
		b := mustClaim(t, s, "B", 3, time.Hour)
		db.Advance(40 * time.Minute) // A's rows still leased, B's too
		again := mustClaim(t, s, "A", 3, time.Hour)
		if fmt.Sprint(ids(a)) != fmt.Sprint(ids(again)) {
			t.Fatalf("re-claim got %v, first claim %v", ids(again), ids(a))
		}
		db.Advance(40 * time.Minute) // B's lease has expired now; A's was renewed
		again = mustClaim(t, s, "A", 3, time.Hour)
		if fmt.Sprint(ids(a)) != fmt.Sprint(ids(again)) {
			t.Fatalf("re-claim after others expired got %v, want %v (own rows first)", ids(again), ids(a))
		}
		if len(a) != 3 || len(b) != 3 || overlap(a, b) {
			t.Fatalf("A %v and B %v: want 3 rows each, disjoint", ids(a), ids(b))
		}
	})

	t.Run("release only by expiry: a live lease is not claimable, an expired one is", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		if rows := mustClaim(t, s, "A", 10, time.Hour); len(rows) != 1 {
			t.Fatalf("A claimed %d rows", len(rows))
		}
		if rows := mustClaim(t, s, "B", 10, time.Hour); len(rows) != 0 {
			t.Fatalf("B claimed a leased row: %v", ids(rows))
		}
		db.Advance(30 * time.Minute)
		if rows := mustClaim(t, s, "B", 10, time.Hour); len(rows) != 0 {
			t.Fatalf("B claimed a row half-way through A's lease: %v", ids(rows))
		}
		db.Advance(31 * time.Minute)
		rows := mustClaim(t, s, "B", 10, time.Hour)
		if len(rows) != 1 || rows[0].ClaimToken != "B" {
			t.Fatalf("B after expiry: %+v", rows)
		}
	})

	t.Run("times from the future: a lease ending beyond twice its own length from now counts as expired, others hold", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		// One row per claimer, told apart by effect so each claim takes its
		// own: Ev1 leased for 90 s by C and Ev2 for an hour by D, with a
		// right clock (D's is a longer lease setting than B's, not a lease
		// from the future); then Ev0 for an hour by A while the clock runs a
		// year ahead, and the clock is set right again.
		for i, e := range []string{"a", "c", "d"} {
			id := fmt.Sprintf("Ev%d", i)
			mustRecord(t, s, store.Intent{EventID: id, EventType: "x",
				Rows: []store.NewRow{{Key: id + ":r", Effect: e, Payload: `{"route":"r"}`}}})
		}
		claim := func(token, effect string, lease time.Duration) []store.Row {
			t.Helper()
			rows, err := s.Claim(ctx, token, 1, lease, &store.ClaimFilter{Effects: []string{effect}})
			if err != nil {
				t.Fatal(err)
			}
			return rows
		}
		c := claim("C", "c", 90*time.Second)
		d := claim("D", "d", time.Hour)
		db.Advance(365 * 24 * time.Hour)
		a := claim("A", "a", time.Hour)
		db.Advance(-365 * 24 * time.Hour)
		// A lease period later (an engine may look for such leases only
		// that often), B, with a one-minute lease, takes Ev1 only.
		db.Advance(65 * time.Second)
		b := mustClaim(t, s, "B", 10, time.Minute)
		if len(a) != 1 || len(c) != 1 || len(d) != 1 || len(b) != 1 || b[0].ID != a[0].ID {
			t.Fatalf("C %v, A %v, D %v, B %v: B must take A's lease from the future and leave C's and D's", ids(c), ids(a), ids(d), ids(b))
		}
		// The stale holder is fenced out; the longer live lease still holds.
		if held, err := s.Complete(ctx, a[0].ID, "A", "", nil); err != nil || held {
			t.Fatalf("A's Complete after its lease from the future was taken: held=%v err=%v", held, err)
		}
		if held, err := s.Complete(ctx, d[0].ID, "D", "", nil); err != nil || !held {
			t.Fatalf("D's Complete under its live hour-long lease: held=%v err=%v", held, err)
		}
	})

	t.Run("times from the future: a row due beyond now+lease+BackoffMax is made due", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{BackoffBase: time.Hour, BackoffMax: time.Hour})
		mustRecord(t, s, intent("Ev1", "r"))
		mustRecord(t, s, intent("Ev2", "r"))
		for _, tok := range []string{"A1", "A2"} {
			row := claimOne(t, s, tok)
			if res, err := s.Fail(ctx, row.ID, tok, store.Failure{Kind: store.FailRetryable, Msg: "boom"}); err != nil || !res.Held {
				t.Fatal(res, err)
			}
		}
		if rows := mustClaim(t, s, "early", 10, time.Minute); len(rows) != 0 {
			t.Fatalf("rows in backoff claimed: %v", ids(rows))
		}
		// The clock is set back 3 hours: both rows are now due 3.5–4 hours
		// away, beyond anything a 1-minute lease and 1-hour backoff can set.
		db.Advance(-3 * time.Hour)
		rows := mustClaim(t, s, "B", 10, time.Minute)
		if len(rows) != 2 {
			t.Fatalf("claimed %v after the clock was set back, want both rows", ids(rows))
		}
	})

	t.Run("rows not yet due are not claimed", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{BackoffBase: time.Hour, BackoffMax: time.Hour})
		mustRecord(t, s, intent("Ev1", "r"))
		row := claimOne(t, s, "A")
		res, err := s.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailRetryable, Msg: "boom"})
		if err != nil || !res.Held {
			t.Fatal(res, err)
		}
		if rows := mustClaim(t, s, "B", 10, time.Minute); len(rows) != 0 {
			t.Fatalf("claimed a row before its next_attempt_at: %v", ids(rows))
		}
		db.Advance(res.NextAttemptAt.Sub(db.Now(t)) + time.Millisecond)
		if rows := mustClaim(t, s, "B", 10, time.Minute); len(rows) != 1 {
			t.Fatal("row not claimable once due")
		}
	})

	t.Run("a filter claims only the effects it lists", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		in := store.Intent{EventID: "Ev1", EventType: "message", Rows: []store.NewRow{
			{Key: "Ev1:log", Effect: "log", Payload: `{}`},
			{Key: "Ev1:post", Effect: "post", Payload: `{}`},
			{Key: "Ev1:react", Effect: "react", Payload: `{}`},
		}}
		mustRecord(t, s, in)
		none, err := s.Claim(ctx, "N", 10, time.Minute, &store.ClaimFilter{Effects: []string{}})
		if err != nil || len(none) != 0 {
			t.Fatalf("an empty effect list claimed %v, %v", ids(none), err)
		}
		got, err := s.Claim(ctx, "F", 10, time.Minute, &store.ClaimFilter{Effects: []string{"log", "react"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Effect != "log" || got[1].Effect != "react" {
			t.Fatalf("filtered claim got %+v", got)
		}
		rest := mustClaim(t, s, "G", 10, time.Minute)
		if len(rest) != 1 || rest[0].Effect != "post" {
			t.Fatalf("unfiltered claim got %+v, want the post row", rest)
		}
	})

	t.Run("bad arguments are refused", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		for _, c := range []struct {
			tok   string
			limit int
			lease time.Duration
		}{{"", 1, time.Minute}, {"A", 0, time.Minute}, {"A", 1, 0}} {
			if _, err := s.Claim(ctx, c.tok, c.limit, c.lease, nil); err == nil {
				t.Errorf("Claim(%q, %d, %s) accepted", c.tok, c.limit, c.lease)
			}
		}
	})

	t.Run("8 concurrent claimers on two stores get disjoint rows", func(t *testing.T) {
		db := newDB(t)
		stores := []store.Store{db.Open(t, store.Options{}), db.Open(t, store.Options{})}
		for i := range 100 {
			mustRecord(t, stores[0], intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		var mu sync.Mutex
		owner := map[int64]string{}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for round := 0; ; round++ {
					rows, err := stores[w%2].Claim(ctx, fmt.Sprintf("T%d-%d", w, round), 5, time.Hour, nil)
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
			})
		}
		wg.Wait()
		if len(owner) != 100 {
			t.Fatalf("%d rows claimed, want 100", len(owner))
		}
	})

	t.Run("competing claimers and completers: every row done exactly once", func(t *testing.T) {
		db := newDB(t)
		stores := []store.Store{db.Open(t, store.Options{}), db.Open(t, store.Options{})}
		for i := range 60 {
			mustRecord(t, stores[1], intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		var done sync.Map
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				s, tok := stores[w%2], fmt.Sprintf("W%d", w)
				for {
					rows, err := s.Claim(ctx, tok, 3, time.Hour, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if len(rows) == 0 {
						return
					}
					for _, r := range rows {
						held, err := s.Complete(ctx, r.ID, tok, "", nil)
						if err != nil || !held {
							t.Errorf("complete %d by %s: held=%v err=%v", r.ID, tok, held, err)
						}
						if _, dup := done.LoadOrStore(r.ID, tok); dup {
							t.Errorf("row %d completed twice", r.ID)
						}
					}
				}
			})
		}
		wg.Wait()
		if n := countStatus(t, stores[0], store.StatusDone); n != 60 {
			t.Fatalf("done = %d, want 60", n)
		}
	})
}

func testCompleteBatch(t *testing.T, newDB NewDB) {
	t.Run("each row is fenced on its own; follow-ups only for rows whose fence held", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		for _, ev := range []string{"Ev1", "Ev2", "Ev3"} {
			mustRecord(t, s, intent(ev, "r"))
		}
		a := mustClaim(t, s, "A", 3, time.Minute)
		db.Advance(2 * time.Minute)
		b := mustClaim(t, s, "B", 1, time.Minute) // takes Ev1's row over
		if len(a) != 3 || len(b) != 1 || b[0].ID != a[0].ID {
			t.Fatalf("A %v B %v", ids(a), ids(b))
		}
		taken := mustGet(t, s, a[0].ID)
		follow := func(ev string) []store.NewRow {
			return []store.NewRow{{Key: ev + ":r:reply", Effect: "post", Payload: `{}`}}
		}
		// A's lease has expired too, but only B's claim took a row over:
		// the fence is the token, as in Complete.
		held, err := s.CompleteBatch(ctx, "A", []store.Completion{
			{ID: a[0].ID, Result: `{"by":"A"}`, FollowUps: follow("Ev1")},
			{ID: a[1].ID, Result: `{"ts":"1.2","q":"\"x\""}`},
			{ID: a[2].ID, FollowUps: follow("Ev3")},
			{ID: 1 << 40},
		})
		if err != nil || fmt.Sprint(held) != "[false true true false]" {
			t.Fatalf("CompleteBatch = %v, %v; want [false true true false]", held, err)
		}
		if row := mustGet(t, s, a[0].ID); row != taken {
			t.Fatalf("taken-over row was written:\n%+v\nwant unchanged:\n%+v", row, taken)
		}
		r1 := mustGet(t, s, a[1].ID)
		if r1.Status != store.StatusDone || r1.Result != `{"ts":"1.2","q":"\"x\""}` || r1.CompletedAt.IsZero() ||
			!r1.ClaimExpiresAt.IsZero() || r1.Attempts != 1 {
			t.Fatalf("held row with a result: %+v", r1)
		}
		if r2 := mustGet(t, s, a[2].ID); r2.Status != store.StatusDone || r2.Result != "" || r2.Attempts != 1 {
			t.Fatalf("held row without a result: %+v", r2)
		}
		if f, err := s.GetByKey(ctx, "Ev3:r:reply"); err != nil || f.Status != store.StatusPending {
			t.Fatalf("held row's follow-up not enqueued: %+v %v", f, err)
		}
		if _, err := s.GetByKey(ctx, "Ev1:r:reply"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the lost row's follow-up was enqueued: %v", err)
		}
		// Completing again is a lost fence for every row.
		if held, err := s.CompleteBatch(ctx, "A", []store.Completion{{ID: a[1].ID}, {ID: a[2].ID}}); err != nil || fmt.Sprint(held) != "[false false]" {
			t.Fatalf("second CompleteBatch = %v, %v", held, err)
		}
		if held, err := s.CompleteBatch(ctx, "B", []store.Completion{{ID: b[0].ID}}); err != nil || fmt.Sprint(held) != "[true]" {
			t.Fatalf("B's CompleteBatch = %v, %v", held, err)
		}
		if held, err := s.CompleteBatch(ctx, "B", nil); err != nil || len(held) != 0 {
			t.Fatalf("empty CompleteBatch = %v, %v", held, err)
		}
	})
}

func testFence(t *testing.T, newDB NewDB) {
	t.Run("a lost lease cannot complete or fail and enqueues nothing; the new holder can", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		a := mustClaim(t, s, "A", 1, time.Minute)
		db.Advance(2 * time.Minute)
		b := mustClaim(t, s, "B", 1, time.Minute)
		if len(a) != 1 || len(b) != 1 || a[0].ID != b[0].ID {
			t.Fatalf("A %v B %v", ids(a), ids(b))
		}
		before := mustGet(t, s, a[0].ID)
		follow := []store.NewRow{{Key: "Ev1:r:reply", Effect: "post", Payload: `{}`}}
		held, err := s.Complete(ctx, a[0].ID, "A", `{"by":"A"}`, follow)
		if err != nil || held {
			t.Fatalf("stale Complete: held=%v err=%v", held, err)
		}
		for _, kind := range []store.FailKind{store.FailPermanent, store.FailRetryable, store.FailRateLimited} {
			if res, err := s.Fail(ctx, a[0].ID, "A", store.Failure{Kind: kind, Msg: "x", RetryAfter: time.Minute}); err != nil || res.Held {
				t.Fatalf("stale Fail(%d): %+v %v", kind, res, err)
			}
		}
		if row := mustGet(t, s, a[0].ID); row != before {
			t.Fatalf("row after stale writes:\n%+v\nwant unchanged:\n%+v", row, before)
		}
		if _, err := s.GetByKey(ctx, "Ev1:r:reply"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("stale completion enqueued its follow-up: %v", err)
		}
		held, err = s.Complete(ctx, b[0].ID, "B", `{"by":"B"}`, follow)
		if err != nil || !held {
			t.Fatalf("B Complete: held=%v err=%v", held, err)
		}
		row := mustGet(t, s, b[0].ID)
		if row.Status != store.StatusDone || row.Result != `{"by":"B"}` || row.CompletedAt.IsZero() {
			t.Fatalf("row after B: %+v", row)
		}
		f, err := s.GetByKey(ctx, "Ev1:r:reply")
		if err != nil || f.Status != store.StatusPending || f.Effect != "post" {
			t.Fatalf("follow-up not enqueued with the completion: %+v %v", f, err)
		}
		// Completing or failing twice is also a lost fence: the row is no longer pending.
		if held, _ := s.Complete(ctx, b[0].ID, "B", "", nil); held {
			t.Fatal("second Complete held")
		}
		if res, _ := s.Fail(ctx, b[0].ID, "B", store.Failure{Kind: store.FailPermanent, Msg: "x"}); res.Held {
			t.Fatal("Fail after Complete held")
		}
		if got := mustGet(t, s, b[0].ID); got.Status != store.StatusDone || got.Result != `{"by":"B"}` {
			t.Fatalf("done row changed: %+v", got)
		}
	})

	t.Run("a completion counts its attempt and keeps the last failure", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{BackoffBase: time.Second, BackoffMax: time.Second})
		mustRecord(t, s, intent("Ev1", "a", "b"))
		rows := mustClaim(t, s, "A", 2, time.Minute)
		if held, err := s.Complete(ctx, rows[0].ID, "A", "", nil); err != nil || !held {
			t.Fatalf("complete: %v %v", held, err)
		}
		if res, err := s.Fail(ctx, rows[1].ID, "A", store.Failure{Kind: store.FailRetryable, Msg: "boom"}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		db.Advance(time.Hour)
		again := mustClaim(t, s, "B", 2, time.Minute)
		if len(again) != 1 || again[0].ID != rows[1].ID {
			t.Fatalf("claimed %v, want the failed row", ids(again))
		}
		if held, err := s.Complete(ctx, again[0].ID, "B", "", nil); err != nil || !held {
			t.Fatalf("complete: %v %v", held, err)
		}
		if r := mustGet(t, s, rows[0].ID); r.Attempts != 1 || r.LastError != "" {
			t.Errorf("done on the first attempt: attempts %d last_error %q, want 1 and none", r.Attempts, r.LastError)
		}
		if r := mustGet(t, s, rows[1].ID); r.Attempts != 2 || r.LastError != "boom" {
			t.Errorf("done on the second attempt: attempts %d last_error %q, want 2 and the failure", r.Attempts, r.LastError)
		}
	})

	t.Run("a stale token replayed concurrently with the holder's completion never wins", func(t *testing.T) {
		db := newDB(t)
		stores := []store.Store{db.Open(t, store.Options{}), db.Open(t, store.Options{})}
		for i := range 20 {
			mustRecord(t, stores[0], intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		old := mustClaim(t, stores[0], "OLD", 20, time.Minute)
		db.Advance(2 * time.Minute)
		cur := mustClaim(t, stores[1], "NEW", 20, time.Minute)
		if len(old) != 20 || len(cur) != 20 {
			t.Fatalf("claims: %d %d", len(old), len(cur))
		}
		var wg sync.WaitGroup
		var staleHeld atomic.Int32
		for _, r := range old {
			wg.Go(func() {
				held, err := stores[0].Complete(ctx, r.ID, "OLD", "stale",
					[]store.NewRow{{Key: r.Key + ":stale", Effect: "post", Payload: `{}`}})
				if err != nil {
					t.Error(err)
				}
				if held {
					staleHeld.Add(1)
				}
			})
			wg.Go(func() {
				if held, err := stores[1].Complete(ctx, r.ID, "NEW", "fresh", nil); err != nil || !held {
					t.Errorf("holder's Complete of %d: held=%v err=%v", r.ID, held, err)
				}
			})
		}
		wg.Wait()
		if n := staleHeld.Load(); n != 0 {
			t.Fatalf("%d stale completions held", n)
		}
		for _, r := range all(t, stores[0]) {
			if r.Result != "fresh" {
				t.Errorf("row %s: %+v", r.Key, r)
			}
		}
	})
}

func testFail(t *testing.T, newDB NewDB) {
	t.Run("backoff grows within its jitter band and parks after max attempts", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{MaxAttempts: 5, BackoffBase: 10 * time.Second, BackoffMax: time.Hour})
		mustRecord(t, s, intent("Ev1", "r"))
		for attempt := 1; attempt <= 4; attempt++ {
			row := claimOne(t, s, fmt.Sprint("T", attempt))
			before := db.Now(t)
			res, err := s.Fail(ctx, row.ID, row.ClaimToken, store.Failure{Kind: store.FailRetryable, Msg: "http_503"})
			after := db.Now(t)
			if err != nil || !res.Held || res.Status != store.StatusPending || res.Attempts != attempt {
				t.Fatalf("attempt %d: %+v %v", attempt, res, err)
			}
			// The delay from the moment of the failure, which lies in [before, after].
			full := 10 * time.Second << (attempt - 1)
			if hi, lo := res.NextAttemptAt.Sub(before), res.NextAttemptAt.Sub(after); hi < full/2 || lo > full {
				t.Fatalf("attempt %d: delay in [%s, %s], outside [%s, %s]", attempt, lo, hi, full/2, full)
			}
			got := mustGet(t, s, row.ID)
			if got.ClaimToken != "" || !got.ClaimExpiresAt.IsZero() || got.Attempts != attempt ||
				got.NextAttemptAt.UnixMilli() != res.NextAttemptAt.UnixMilli() || got.LastError != "http_503" {
				t.Fatalf("attempt %d: row %+v, result %+v", attempt, got, res)
			}
			db.Advance(res.NextAttemptAt.Sub(db.Now(t)) + time.Millisecond)
		}
		row := claimOne(t, s, "T5")
		res, err := s.Fail(ctx, row.ID, row.ClaimToken, store.Failure{Kind: store.FailRetryable, Msg: "http_503"})
		if err != nil || res.Status != store.StatusParked || res.Attempts != 5 {
			t.Fatalf("fifth failure: %+v %v", res, err)
		}
		got := mustGet(t, s, row.ID)
		if got.Status != store.StatusParked || got.LastError != "http_503" || got.ClaimToken != "" {
			t.Fatalf("parked row: %+v", got)
		}
		db.Advance(24 * time.Hour)
		if rows := mustClaim(t, s, "T6", 10, time.Minute); len(rows) != 0 {
			t.Fatalf("a parked row was claimed: %v", ids(rows))
		}
	})

	t.Run("backoff is capped", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{MaxAttempts: 50, BackoffBase: time.Second, BackoffMax: 8 * time.Second})
		mustRecord(t, s, intent("Ev1", "r"))
		for attempt := 1; attempt <= 10; attempt++ {
			row := claimOne(t, s, fmt.Sprint("T", attempt))
			res, err := s.Fail(ctx, row.ID, row.ClaimToken, store.Failure{Kind: store.FailRetryable, Msg: "x"})
			after := db.Now(t)
			if err != nil {
				t.Fatal(err)
			}
			if d := res.NextAttemptAt.Sub(after); d > 8*time.Second {
				t.Fatalf("attempt %d: delay %s over the cap", attempt, d)
			}
			db.Advance(time.Hour)
		}
	})

	t.Run("a permanent error parks at once", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		row := claimOne(t, s, "A")
		res, err := s.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "channel_not_found"})
		if err != nil || res.Status != store.StatusParked || res.Attempts != 1 || !res.Held {
			t.Fatalf("%+v %v", res, err)
		}
		if got := mustGet(t, s, row.ID); got.Status != store.StatusParked || got.LastError != "channel_not_found" {
			t.Fatalf("row: %+v", got)
		}
	})

	t.Run("a rate-limit failure reschedules at Retry-After without spending an attempt", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{MaxAttempts: 2})
		mustRecord(t, s, intent("Ev1", "r"))
		for i := range 3 { // more 429s than MaxAttempts: none of them parks
			row := claimOne(t, s, fmt.Sprint("A", i))
			before := db.Now(t)
			res, err := s.Fail(ctx, row.ID, row.ClaimToken, store.Failure{Kind: store.FailRateLimited, Msg: "ratelimited", RetryAfter: 7 * time.Second})
			after := db.Now(t)
			if err != nil || res.Status != store.StatusPending || res.Attempts != 0 {
				t.Fatalf("429 #%d: %+v %v", i, res, err)
			}
			within(t, "next attempt - 7s - before", res.NextAttemptAt.Add(-7*time.Second).Sub(before), 0, after.Sub(before))
			got := mustGet(t, s, row.ID)
			if got.Attempts != 0 || got.ClaimToken != "" || got.LastError != "ratelimited" {
				t.Fatalf("row: %+v", got)
			}
			if rows := mustClaim(t, s, "early", 1, time.Minute); len(rows) != 0 {
				t.Fatal("claimed before Retry-After")
			}
			db.Advance(8 * time.Second)
		}
	})

	t.Run("Retry-After is capped at the longest backoff", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{BackoffBase: time.Second, BackoffMax: time.Minute})
		mustRecord(t, s, intent("Ev1", "r"))
		row := claimOne(t, s, "A")
		res, err := s.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailRateLimited, Msg: "ratelimited", RetryAfter: 24 * time.Hour})
		after := db.Now(t)
		if err != nil {
			t.Fatal(err)
		}
		if d := res.NextAttemptAt.Sub(after); d > time.Minute {
			t.Fatalf("a 24h Retry-After held the row %s", d)
		}
	})

	t.Run("requeue puts parked rows back with a fresh budget, due now", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "a", "b", "c"))
		for _, tok := range []string{"A", "B", "C"} {
			row := claimOne(t, s, tok)
			if res, err := s.Fail(ctx, row.ID, tok, store.Failure{Kind: store.FailPermanent, Msg: "invalid_auth"}); err != nil || !res.Held {
				t.Fatal(res, err)
			}
		}
		parked := all(t, s)
		if err := s.Requeue(ctx, parked[2].ID+100); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("requeue of a missing row: %v", err)
		}
		if err := s.Requeue(ctx, parked[0].ID); err != nil {
			t.Fatal(err)
		}
		if err := s.Requeue(ctx, parked[0].ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("requeue of a row no longer parked: %v", err)
		}
		got := mustGet(t, s, parked[0].ID)
		if got.Status != store.StatusPending || got.Attempts != 0 || got.ClaimToken != "" {
			t.Fatalf("requeued row: %+v", got)
		}
		if n, err := s.RequeueParked(ctx, store.ParkedFilter{}); err != nil || n != 2 {
			t.Fatalf("RequeueParked = %d, %v; want 2", n, err)
		}
		if rows := mustClaim(t, s, "D", 10, time.Minute); len(rows) != 3 {
			t.Fatalf("requeued rows claimable: %d, want 3", len(rows))
		}
	})
}

// parkAll records one event with a row per route (effect "log", or the
// effect after a "=" in the name: "b=post"), and parks every row.
func parkAll(t *testing.T, s store.Store, eventID string, routes ...string) []store.Row {
	t.Helper()
	in := store.Intent{EventID: eventID, EventType: "app_mention"}
	for _, r := range routes {
		name, effect, ok := strings.Cut(r, "=")
		if !ok {
			effect = "log"
		}
		in.Rows = append(in.Rows, store.NewRow{Key: eventID + ":" + name, Effect: effect, Payload: fmt.Sprintf(`{"route":%q}`, name)})
	}
	mustRecord(t, s, in)
	var out []store.Row
	for range routes {
		row := claimOne(t, s, "park-"+eventID)
		if res, err := s.Fail(ctx, row.ID, row.ClaimToken, store.Failure{Kind: store.FailPermanent, Msg: "404"}); err != nil || res.Status != store.StatusParked {
			t.Fatal(res, err)
		}
		out = append(out, mustGet(t, s, row.ID))
	}
	return out
}

func testDiscard(t *testing.T, newDB NewDB) {
	t.Run("discard moves one parked row to discarded, never claimed again; other statuses are refused", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		parked := parkAll(t, s, "Ev1", "a", "b")
		mustRecord(t, s, intent("Ev2", "pending"))
		before := db.Now(t)
		if err := s.Discard(ctx, parked[0].ID); err != nil {
			t.Fatal(err)
		}
		after := db.Now(t)
		got := mustGet(t, s, parked[0].ID)
		if got.Status != store.StatusDiscarded || got.ClaimToken != "" || got.LastError != "404" {
			t.Fatalf("discarded row: %+v", got)
		}
		within(t, "completed_at - before", got.CompletedAt.Sub(before), 0, after.Sub(before))
		if err := s.Discard(ctx, parked[0].ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("discard of a discarded row: %v", err)
		}
		pending := all(t, s)[2]
		if err := s.Discard(ctx, pending.ID+100); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("discard of a missing row: %v", err)
		}
		q, err := s.Queue(ctx)
		if err != nil || q.Discarded != 1 || q.Parked != 1 || q.Pending != 1 {
			t.Fatalf("queue = %+v, %v", q, err)
		}
		if n := countStatus(t, s, store.StatusDiscarded); n != 1 {
			t.Fatalf("list --status discarded: %d rows", n)
		}
		if n, err := s.RequeueParked(ctx, store.ParkedFilter{}); err != nil || n != 1 {
			t.Fatalf("RequeueParked = %d, %v; want 1 (the discarded row stays)", n, err)
		}
		rows := mustClaim(t, s, "C", 10, time.Minute)
		if slices.Contains(ids(rows), parked[0].ID) || len(rows) != 2 {
			t.Fatalf("claimed %v; the discarded row %d must not be", ids(rows), parked[0].ID)
		}
	})

	t.Run("a discarded row is put back by Requeue while it exists, and is claimed again", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		parked := parkAll(t, s, "Ev1", "a", "b")
		for _, r := range parked {
			if err := s.Discard(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Requeue(ctx, parked[0].ID); err != nil {
			t.Fatalf("requeue of a discarded row: %v", err)
		}
		got := mustGet(t, s, parked[0].ID)
		if got.Status != store.StatusPending || got.Attempts != 0 || !got.CompletedAt.IsZero() || got.LastError != "404" {
			t.Fatalf("the row put back: %+v", got)
		}
		if err := s.Requeue(ctx, parked[0].ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("requeue of a pending row: %v", err)
		}
		if n, err := s.RequeueParked(ctx, store.ParkedFilter{Discarded: true, Route: "b"}); err != nil || n != 1 {
			t.Fatalf("RequeueParked of the discarded rows of route b = %d, %v; want 1", n, err)
		}
		if n, err := s.DiscardParked(ctx, store.ParkedFilter{Discarded: true}); !errors.Is(err, store.ErrFilter) || n != 0 {
			t.Fatalf("DiscardParked of discarded rows = %d, %v; want ErrFilter", n, err)
		}
		if rows := mustClaim(t, s, "C", 10, time.Minute); !slices.Equal(ids(rows), ids(parked)) {
			t.Fatalf("claimed %v, want the rows put back %v", ids(rows), ids(parked))
		}
	})

	t.Run("a pending row is discarded unless a sweep holds it; a sweep whose lease ran out is fenced out", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "waiting", "leased"))
		rows := all(t, s)
		waiting, leased := rows[0], rows[1]
		if err := s.Discard(ctx, waiting.ID); err != nil {
			t.Fatalf("discard of a pending row nobody holds: %v", err)
		}
		if got := mustGet(t, s, waiting.ID); got.Status != store.StatusDiscarded {
			t.Fatalf("the waiting row is %s", got.Status)
		}
		// A sweep holds the other one: refused, untouched.
		held := mustClaim(t, s, "A", 10, time.Minute)
		if len(held) != 1 || held[0].ID != leased.ID {
			t.Fatalf("claimed %v, want only %d", ids(held), leased.ID)
		}
		if err := s.Discard(ctx, leased.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("discard of a leased row: %v", err)
		}
		if got := mustGet(t, s, leased.ID); got.Status != store.StatusPending || got.ClaimToken != "A" {
			t.Fatalf("the leased row after a refused discard: %+v", got)
		}
		// Its lease runs out while the sweep still performs it; the
		// discard then wins, and the sweep's late writes change nothing.
		db.Advance(2 * time.Minute)
		if err := s.Discard(ctx, leased.ID); err != nil {
			t.Fatalf("discard after the lease ran out: %v", err)
		}
		if ok, err := s.Complete(ctx, leased.ID, "A", `{"late":true}`, []store.NewRow{{Key: "late:follow", Effect: "log", Payload: "{}"}}); err != nil || ok {
			t.Fatalf("the sweep's Complete after the discard: held %v, %v", ok, err)
		}
		if res, err := s.Fail(ctx, leased.ID, "A", store.Failure{Kind: store.FailRetryable, Msg: "late"}); err != nil || res.Held {
			t.Fatalf("the sweep's Fail after the discard: %+v, %v", res, err)
		}
		if held, err := s.CompleteBatch(ctx, "A", []store.Completion{{ID: leased.ID, Result: "{}"}}); err != nil || held[0] {
			t.Fatalf("the sweep's CompleteBatch after the discard: %v, %v", held, err)
		}
		got := mustGet(t, s, leased.ID)
		if got.Status != store.StatusDiscarded || got.Result != "" || got.ClaimToken != "" {
			t.Fatalf("the discarded row after the late writes: %+v", got)
		}
		if _, err := s.GetByKey(ctx, "late:follow"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a fenced completion enqueued its follow-up: %v", err)
		}
		if rows := mustClaim(t, s, "B", 10, time.Minute); len(rows) != 0 {
			t.Fatalf("claimed %v after the discards", ids(rows))
		}
		// The undo: the sweep whose lease ran out may have performed the
		// effect, so the row comes back marked as such (a post is then
		// confirmed before it is made again); the row nobody had claimed
		// does not.
		for _, r := range []store.Row{waiting, leased} {
			if err := s.Requeue(ctx, r.ID); err != nil {
				t.Fatalf("requeue of discarded row %d: %v", r.ID, err)
			}
		}
		back := map[int64]bool{}
		for _, r := range mustClaim(t, s, "C", 10, time.Minute) {
			back[r.ID] = r.OutcomeUnknown
		}
		if unknown, ok := back[leased.ID]; !ok || !unknown {
			t.Errorf("the row discarded after its claimer's lease ran out came back with OutcomeUnknown %v (claimed %v), want true", unknown, ok)
		}
		if unknown, ok := back[waiting.ID]; !ok || unknown {
			t.Errorf("the row nobody had claimed came back with OutcomeUnknown %v (claimed %v), want false", unknown, ok)
		}
	})

	t.Run("discards racing claims and completions: each row ends discarded or done, never both told yes", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		const n = 40
		for i := range n {
			mustRecord(t, s, intent(fmt.Sprintf("EvRace%02d", i), "r"))
		}
		rows := all(t, s)
		discarded := make([]atomic.Bool, n)
		completed := make([]atomic.Bool, n)
		index := map[int64]int{}
		for i, r := range rows {
			index[r.ID] = i
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4*n)
		for w := range 3 { // sweepers: claim a few, complete them
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					token := fmt.Sprintf("W%d-%d", w, time.Now().UnixNano())
					got, err := s.Claim(ctx, token, 3, time.Minute, nil)
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					for _, r := range got {
						ok, err := s.Complete(ctx, r.ID, token, "", nil)
						if err != nil {
							errs <- err
							return
						}
						if ok && completed[index[r.ID]].Swap(true) {
							errs <- fmt.Errorf("row %d completed twice", r.ID)
						}
					}
				}
			}()
		}
		wg.Add(1)
		go func() { // the operator, discarding every row
			defer wg.Done()
			for i, r := range rows {
				err := s.Discard(ctx, r.ID)
				switch {
				case err == nil:
					discarded[i].Store(true)
				case !errors.Is(err, store.ErrNotFound):
					errs <- err
				}
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for i, r := range rows {
			got := mustGet(t, s, r.ID)
			d, c := discarded[i].Load(), completed[i].Load()
			switch {
			case d && c:
				t.Errorf("row %d: the discard and a completion both succeeded (now %s)", r.ID, got.Status)
			case d && got.Status != store.StatusDiscarded, c && got.Status != store.StatusDone:
				t.Errorf("row %d: discarded %v, completed %v, but it is %s", r.ID, d, c, got.Status)
			case !d && !c && got.Status != store.StatusPending:
				t.Errorf("row %d: neither discarded nor completed, but it is %s", r.ID, got.Status)
			}
		}
	})

	t.Run("requeue and discard of parked rows by route, effect and age", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		old := parkAll(t, s, "Ev1", "a", "b=post")
		db.Advance(2 * time.Hour)
		young := parkAll(t, s, "Ev2", "a", "b=post")
		status := func() []string {
			var out []string
			for _, r := range all(t, s) {
				out = append(out, r.Status)
			}
			return out
		}
		// Nothing matches: nothing changes.
		for _, f := range []store.ParkedFilter{{Route: "zzz"}, {Effect: "react"}, {OlderThan: 3 * time.Hour}} {
			if n, err := s.DiscardParked(ctx, f); err != nil || n != 0 {
				t.Fatalf("DiscardParked(%+v) = %d, %v; want 0", f, n, err)
			}
			if n, err := s.RequeueParked(ctx, f); err != nil || n != 0 {
				t.Fatalf("RequeueParked(%+v) = %d, %v; want 0", f, n, err)
			}
		}
		if n, err := s.DiscardParked(ctx, store.ParkedFilter{Route: "a", OlderThan: time.Hour}); err != nil || n != 1 {
			t.Fatalf("discard route a older than 1h = %d, %v; want 1", n, err)
		}
		if got := mustGet(t, s, old[0].ID).Status; got != store.StatusDiscarded {
			t.Fatalf("old route-a row is %s", got)
		}
		if n, err := s.RequeueParked(ctx, store.ParkedFilter{Effect: "post"}); err != nil || n != 2 {
			t.Fatalf("requeue effect post = %d, %v; want 2", n, err)
		}
		want := []string{store.StatusDiscarded, store.StatusPending, store.StatusParked, store.StatusPending}
		if got := status(); !slices.Equal(got, want) {
			t.Fatalf("statuses = %v, want %v (rows %d %d %d %d)", got, want, old[0].ID, old[1].ID, young[0].ID, young[1].ID)
		}
		if n, err := s.DiscardParked(ctx, store.ParkedFilter{}); err != nil || n != 1 {
			t.Fatalf("discard all parked = %d, %v; want 1", n, err)
		}
	})

	t.Run("a parked row whose payload is not JSON matches no route and breaks no filter", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecord(t, s, store.Intent{EventID: "EvBad", EventType: "app_mention",
			Rows: []store.NewRow{{Key: "EvBad:x", Effect: "log", Payload: "{not json"}}})
		row := claimOne(t, s, "A")
		if res, err := s.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "payload does not decode"}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		parkAll(t, s, "EvGood", "a")
		if n, err := s.DiscardParked(ctx, store.ParkedFilter{Route: "a"}); err != nil || n != 1 {
			t.Fatalf("discard --route a = %d, %v; want 1", n, err)
		}
		if n, err := s.RequeueParked(ctx, store.ParkedFilter{Route: "x"}); err != nil || n != 0 {
			t.Fatalf("requeue --route x = %d, %v; want 0", n, err)
		}
		if n, err := s.DiscardParked(ctx, store.ParkedFilter{Effect: "log"}); err != nil || n != 1 {
			t.Fatalf("discard --effect log = %d, %v; want the undecodable row", n, err)
		}
	})

	t.Run("Matching previews what a filter selects; FilterNames lists what one can name", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		parked := parkAll(t, s, "Ev1", "a", "b=post", "c")
		mustRecord(t, s, intent("Ev2", "pending-route"))
		rows, total, err := s.Matching(ctx, store.ParkedFilter{}, 2)
		if err != nil || total != 3 || !slices.Equal(ids(rows), ids(parked[:2])) {
			t.Fatalf("Matching(all parked, 2) = %v, %d, %v; want the first two of 3", ids(rows), total, err)
		}
		if rows, total, err = s.Matching(ctx, store.ParkedFilter{Effect: "post"}, 10); err != nil || total != 1 || rows[0].ID != parked[1].ID || rows[0].Payload == "" {
			t.Fatalf("Matching(effect post) = %+v, %d, %v", rows, total, err)
		}
		routes, effects, err := s.FilterNames(ctx, store.StatusParked)
		if err != nil || !slices.Equal(routes, []string{"a", "b", "c"}) || !slices.Equal(effects, []string{"log", "post"}) {
			t.Fatalf("FilterNames(parked) = %v %v, %v", routes, effects, err)
		}
		if err := s.Discard(ctx, parked[2].ID); err != nil {
			t.Fatal(err)
		}
		if rows, total, err = s.Matching(ctx, store.ParkedFilter{Discarded: true, Route: "c"}, 10); err != nil || total != 1 || rows[0].ID != parked[2].ID {
			t.Fatalf("Matching(discarded, route c) = %v, %d, %v", ids(rows), total, err)
		}
		if routes, effects, err = s.FilterNames(ctx, store.StatusDiscarded); err != nil || !slices.Equal(routes, []string{"c"}) || !slices.Equal(effects, []string{"log"}) {
			t.Fatalf("FilterNames(discarded) = %v %v, %v", routes, effects, err)
		}
		if rows, total, err = s.Matching(ctx, store.ParkedFilter{Route: "zzz"}, 10); err != nil || total != 0 || len(rows) != 0 {
			t.Fatalf("Matching(route zzz) = %v, %d, %v", ids(rows), total, err)
		}
	})

	t.Run("Stats counts the due rows no sweep holds, by effect", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, store.Intent{EventID: "Ev1", EventType: "app_mention", Rows: []store.NewRow{
			{Key: "Ev1:p1", Effect: "post", Payload: "{}"}, {Key: "Ev1:p2", Effect: "post", Payload: "{}"},
			{Key: "Ev1:l", Effect: "log", Payload: "{}"}}})
		if _, err := s.Claim(ctx, "A", 10, time.Minute, &store.ClaimFilter{Effects: []string{"log"}}); err != nil {
			t.Fatal(err)
		}
		st, err := s.Stats(ctx)
		if err != nil || len(st.Due) != 1 || st.Due["post"] != 2 {
			t.Fatalf("Stats.Due = %v, %v; want post: 2 (the log row is leased)", st.Due, err)
		}
	})

	t.Run("discarded rows are pruned on the done retention, counted apart", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		parked := parkAll(t, s, "Ev1", "a", "b")
		if err := s.Discard(ctx, parked[0].ID); err != nil {
			t.Fatal(err)
		}
		db.Advance(6 * 24 * time.Hour)
		if res, err := s.Prune(ctx, 30*24*time.Hour, 7*24*time.Hour, 0); err != nil || res.Discarded != 0 {
			t.Fatalf("prune inside retention: %+v %v", res, err)
		}
		db.Advance(2 * 24 * time.Hour)
		res, err := s.Prune(ctx, 30*24*time.Hour, 7*24*time.Hour, 0)
		if err != nil || res.Discarded != 1 || res.Done != 0 {
			t.Fatalf("prune past retention: %+v %v; want 1 discarded", res, err)
		}
		if _, err := s.Get(ctx, parked[0].ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("discarded row still there: %v", err)
		}
		if got := mustGet(t, s, parked[1].ID).Status; got != store.StatusParked {
			t.Fatalf("the parked row is %s; parked rows are never pruned", got)
		}
	})
}

func testPrune(t *testing.T, newDB NewDB) {
	t.Run("old receipts and done rows go in batches; pending, leased and parked rows stay", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		for i := range 5 {
			mustRecord(t, s, intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		rows := mustClaim(t, s, "A", 3, time.Minute)
		if held, err := s.Complete(ctx, rows[0].ID, "A", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		if res, err := s.Fail(ctx, rows[1].ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "x"}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		// rows[2] stays pending under lease; two more rows stay pending unclaimed.
		db.Advance(30 * 24 * time.Hour)
		mustRecord(t, s, intent("EvNew", "r")) // a fresh receipt must survive
		mustClaim(t, s, "B", 1, 30*24*time.Hour)
		res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 2)
		if err != nil {
			t.Fatal(err)
		}
		if res.Receipts != 5 || res.Done != 1 {
			t.Fatalf("pruned %+v, want 5 receipts and 1 done row", res)
		}
		if n := countStatus(t, s, store.StatusPending); n != 4 {
			t.Fatalf("pending rows = %d, want 4", n)
		}
		if n := countStatus(t, s, store.StatusParked); n != 1 {
			t.Fatalf("parked rows = %d, want 1", n)
		}
		if n := receipts(t, s); n != 1 {
			t.Fatalf("receipts = %d, want 1", n)
		}
		if res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 2); err != nil || res != (store.PruneResult{}) {
			t.Fatalf("second prune: %+v %v", res, err)
		}
	})
}

func testInspect(t *testing.T, newDB NewDB) {
	t.Run("stats and queue count rows by status, leases, receipts and the oldest pending age", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		b0 := db.Now(t)
		mustRecord(t, s, intent("Ev1", "a", "b", "c", "d"))
		a0 := db.Now(t)
		rows := mustClaim(t, s, "A", 3, time.Hour)
		s.Complete(ctx, rows[0].ID, "A", "", nil)
		s.Fail(ctx, rows[1].ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "x"})
		// rows[2] stays leased; the fourth row stays pending, unclaimed.
		db.Advance(90 * time.Second)
		b1 := db.Now(t)
		st, err := s.Stats(ctx)
		a1 := db.Now(t)
		if err != nil {
			t.Fatal(err)
		}
		if st.Pending != 2 || st.Done != 1 || st.Parked != 1 || st.Receipts != 1 || st.Leased != 1 || st.SchemaVersion < 1 {
			t.Fatalf("stats = %+v", st)
		}
		within(t, "oldest pending", st.OldestPending, b1.Sub(a0), a1.Sub(b0))
		q, err := s.Queue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q.Pending != 2 || q.Done != 1 || q.Parked != 1 {
			t.Fatalf("queue = %+v", q)
		}
		if v, err := s.SchemaVersion(ctx); err != nil || v != st.SchemaVersion {
			t.Fatalf("SchemaVersion = %d, %v; stats say %d", v, err, st.SchemaVersion)
		}
	})

	t.Run("an empty database has zero stats", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Queue != (store.Queue{}) || st.Receipts != 0 || st.Leased != 0 {
			t.Fatalf("stats = %+v", st)
		}
	})

	t.Run("list, get and get-by-key", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "a", "b", "c"))
		row := claimOne(t, s, "A")
		s.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "x"})
		newest, err := s.List(ctx, "", 2)
		if err != nil || len(newest) != 2 || newest[0].ID < newest[1].ID {
			t.Fatalf("List(all, 2) = %v, %v: want the 2 newest, newest first", ids(newest), err)
		}
		parked, err := s.List(ctx, store.StatusParked, 10)
		if err != nil || len(parked) != 1 || parked[0].ID != row.ID {
			t.Fatalf("List(parked) = %v, %v", ids(parked), err)
		}
		byKey, err := s.GetByKey(ctx, row.Key)
		if err != nil || byKey != mustGet(t, s, row.ID) {
			t.Fatalf("GetByKey %+v %v", byKey, err)
		}
		if _, err := s.Get(ctx, row.ID+100); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get of a missing row: %v", err)
		}
		if _, err := s.GetByKey(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetByKey of a missing key: %v", err)
		}
	})

	t.Run("CheckEvents counts receipts and rows per id, by exact prefix", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		mustRecord(t, s, intent("Ev10", "r"))
		mustRecord(t, s, store.Intent{EventID: "Ev2", EventType: "message"}) // a receipt, no rows
		got, err := s.CheckEvents(ctx, []string{"Ev1", "Ev2", "Ev3", "Ev10", "Ev1"})
		if err != nil {
			t.Fatal(err)
		}
		if got.Receipts != 4 || got.WithRows != 3 || fmt.Sprint(got.Missing) != "[Ev3]" {
			t.Fatalf("CheckEvents = %+v", got)
		}
		if got, err := s.CheckEvents(ctx, []string{"Ev"}); err != nil || got.Receipts != 0 || got.WithRows != 0 {
			t.Fatalf("a prefix of ids matched: %+v %v", got, err)
		}
	})

	t.Run("CheckWrite commits on an open store", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		for range 3 {
			if err := s.CheckWrite(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if s.Engine() == "" || s.Location() == "" {
			t.Fatalf("engine %q location %q", s.Engine(), s.Location())
		}
	})
}

func testInstances(t *testing.T, newDB NewDB) {
	t.Run("a heartbeat carries the daemon's state, refreshed each time; none reads back empty", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		in := store.Instance{ID: "a", PID: 10, Host: "vm1", Listen: "127.0.0.1:3000", StartedAt: time.UnixMilli(1_700_000_000_000)}
		state := func() string {
			t.Helper()
			ins, err := s.Instances(ctx, time.Hour)
			if err != nil || len(ins) != 1 {
				t.Fatalf("instances %v, %v", ins, err)
			}
			return ins[0].State
		}
		for _, want := range []string{"", `{"socket_mode":{"connections":2}}`, `{"socket_mode":{"connections":1}}`, ""} {
			in.State = want
			if err := s.Heartbeat(ctx, in); err != nil {
				t.Fatal(err)
			}
			if got := state(); got != want {
				t.Fatalf("state read back %q, want %q", got, want)
			}
		}
	})

	t.Run("a heartbeat lists an instance while fresh; stale ones are not listed, retired ones gone, day-old ones deleted", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		list := func(fresh time.Duration) []store.Instance {
			t.Helper()
			ins, err := s.Instances(ctx, fresh)
			if err != nil {
				t.Fatal(err)
			}
			return ins
		}
		names := func(ins []store.Instance) string {
			var out []string
			for _, in := range ins {
				out = append(out, in.ID)
			}
			return fmt.Sprint(out)
		}
		started := db.Now(t).Add(-time.Minute).Truncate(time.Millisecond)
		a := store.Instance{ID: "a", PID: 10, Host: "vm1", Listen: "127.0.0.1:3000", StartedAt: started}
		before := db.Now(t)
		if err := s.Heartbeat(ctx, a); err != nil {
			t.Fatal(err)
		}
		after := db.Now(t)
		db.Advance(time.Second)
		b := store.Instance{ID: "b", PID: 11, Host: "vm2", Listen: "127.0.0.1:3001", StartedAt: started.Add(time.Second)}
		if err := s.Heartbeat(ctx, b); err != nil {
			t.Fatal(err)
		}
		ins := list(30 * time.Second)
		if names(ins) != "[a b]" {
			t.Fatalf("fresh instances %s, want [a b] (oldest start first)", names(ins))
		}
		if got := ins[0]; got.PID != 10 || got.Host != "vm1" || got.Listen != "127.0.0.1:3000" || !got.StartedAt.Equal(started) {
			t.Errorf("instance a read back as %+v", got)
		}
		within(t, "a's heartbeat - before", ins[0].HeartbeatAt.Sub(before), -time.Millisecond, after.Sub(before))

		db.Advance(40 * time.Second)
		if err := s.Heartbeat(ctx, b); err != nil {
			t.Fatal(err)
		}
		if got := names(list(30 * time.Second)); got != "[b]" {
			t.Fatalf("after a's heartbeat went stale: %s, want [b]", got)
		}
		if got := names(list(time.Hour)); got != "[a b]" {
			t.Fatalf("a stale row is kept (shown as not running): %s, want [a b]", got)
		}
		if err := s.Retire(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if got := names(list(time.Hour)); got != "[a]" {
			t.Fatalf("after b retired: %s, want [a]", got)
		}
		db.Advance(25 * time.Hour)
		if err := s.Heartbeat(ctx, b); err != nil {
			t.Fatal(err)
		}
		if got := names(list(48 * time.Hour)); got != "[b]" {
			t.Errorf("a day-old instance row was kept: %s, want [b]", got)
		}
	})

	t.Run("what an instance performs is read back as recorded; nothing recorded reads as nil, which may perform anything", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		now := db.Now(t)
		for _, in := range []store.Instance{
			{ID: "full", PID: 1, Host: "h", Listen: "x", StartedAt: now, Performs: []string{"forward", "forward.signed", "log", "post"}},
			{ID: "none", PID: 2, Host: "h", Listen: "x", StartedAt: now.Add(time.Millisecond), Performs: []string{}},
			{ID: "old", PID: 3, Host: "h", Listen: "x", StartedAt: now.Add(2 * time.Millisecond)},
		} {
			if err := s.Heartbeat(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		ins, err := s.Instances(ctx, time.Hour)
		if err != nil || len(ins) != 3 {
			t.Fatalf("Instances = %+v, %v", ins, err)
		}
		if got := fmt.Sprint(ins[0].Performs); got != "[forward forward.signed log post]" || !ins[0].CanPerform("forward.signed") || ins[0].CanPerform("redeliver") {
			t.Errorf("full instance performs %s", got)
		}
		if ins[1].Performs == nil || len(ins[1].Performs) != 0 || ins[1].CanPerform("log") {
			t.Errorf("an instance that performs nothing read back as %#v", ins[1].Performs)
		}
		if ins[2].Performs != nil || !ins[2].CanPerform("forward.signed") {
			t.Errorf("an instance that recorded nothing read back as %#v", ins[2].Performs)
		}
	})
}
