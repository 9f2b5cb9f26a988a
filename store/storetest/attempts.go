package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// testAttempts: every attempt is history (issue 31). Complete,
// CompleteBatch and Fail record theirs (done, retry, parked) in their own
// transaction, numbered from 1; a late one whose lease was lost records
// fenced and changes nothing else; a claim that takes a row from an expired
// lease records that claimer's attempt as unknown; attempts go with their
// row when it is pruned; and claimers racing produce one consistent
// history per row.
func testAttempts(t *testing.T, newDB NewDB) {
	// claimedAt is a claim's time, as the sweep passes it.
	claimedAt := func(r store.Row, lease time.Duration) time.Time { return r.ClaimExpiresAt.Add(-lease) }

	t.Run("done on the first attempt: one attempt, numbered 1, with its start, end, status and result", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		if got := mustAttempts(t, s, all(t, s)[0].ID); len(got) != 0 {
			t.Fatalf("a row never claimed has attempts %+v", got)
		}
		a := claimOne(t, s, "A")
		started := claimedAt(a, time.Minute)
		held, err := s.CompleteBatch(ctx, "A", []store.Completion{{ID: a.ID, Result: `{"status":200}`,
			Attempt: store.AttemptNote{StartedAt: started, Status: "200", Result: "200"}}})
		if err != nil || !held[0] {
			t.Fatal(held, err)
		}
		after := db.Now(t)
		got := mustAttempts(t, s, a.ID)
		if len(got) != 1 {
			t.Fatalf("attempts %+v, want one", got)
		}
		g := got[0]
		if g.RowID != a.ID || g.N != 1 || g.Outcome != store.AttemptDone || g.Error != "" || g.Status != "200" || g.Result != "200" ||
			!g.StartedAt.Equal(started.Truncate(time.Millisecond)) || g.EndedAt.Before(g.StartedAt) || g.EndedAt.After(after) {
			t.Fatalf("attempt %+v (started %s, now %s)", g, started, after)
		}
		if r := mustGet(t, s, a.ID); r.Attempts != 1 || r.Status != store.StatusDone {
			t.Fatalf("row %+v", r)
		}
		// Complete (without a note) records its attempt too.
		mustRecord(t, s, intent("Ev2", "r"))
		b := claimOne(t, s, "B")
		if held, err := s.Complete(ctx, b.ID, "B", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		if got := mustAttempts(t, s, b.ID); len(got) != 1 || got[0].N != 1 || got[0].Outcome != store.AttemptDone || got[0].EndedAt.IsZero() {
			t.Fatalf("Complete's attempts %+v", got)
		}
	})

	t.Run("retry then done: two attempts, the failure's error and status kept, numbered like the attempts column", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{BackoffBase: time.Second, BackoffMax: time.Second})
		mustRecord(t, s, intent("Ev1", "r"))
		a := claimOne(t, s, "A")
		res, err := s.Fail(ctx, a.ID, "A", store.Failure{Kind: store.FailRetryable, Msg: "http_503: HTTP 503 down",
			Attempt: store.AttemptNote{StartedAt: claimedAt(a, time.Minute), Status: "503"}})
		if err != nil || !res.Held || res.Status != store.StatusPending {
			t.Fatal(res, err)
		}
		db.Advance(time.Minute)
		b := claimOne(t, s, "B")
		if held, err := s.CompleteBatch(ctx, "B", []store.Completion{{ID: b.ID,
			Attempt: store.AttemptNote{StartedAt: claimedAt(b, time.Minute), Result: "1700000000.000100"}}}); err != nil || !held[0] {
			t.Fatal(held, err)
		}
		got := mustAttempts(t, s, a.ID)
		if len(got) != 2 || got[0].N != 1 || got[0].Outcome != store.AttemptRetry || got[0].Error != "http_503: HTTP 503 down" || got[0].Status != "503" ||
			got[1].N != 2 || got[1].Outcome != store.AttemptDone || got[1].Result != "1700000000.000100" || got[1].Error != "" ||
			!got[1].StartedAt.After(got[0].StartedAt) {
			t.Fatalf("attempts %+v", got)
		}
		if r := mustGet(t, s, a.ID); r.Attempts != len(got) {
			t.Fatalf("row attempts %d, history %d", r.Attempts, len(got))
		}
	})

	t.Run("parked: the attempt that parks the row says so", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		a := claimOne(t, s, "A")
		if res, err := s.Fail(ctx, a.ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "channel_not_found: post",
			Attempt: store.AttemptNote{Status: "channel_not_found"}}); err != nil || res.Status != store.StatusParked {
			t.Fatal(res, err)
		}
		got := mustAttempts(t, s, a.ID)
		if len(got) != 1 || got[0].Outcome != store.AttemptParked || got[0].Status != "channel_not_found" || got[0].Error != "channel_not_found: post" {
			t.Fatalf("attempts %+v", got)
		}
		// A row given back untouched records no attempt.
		mustRecord(t, s, intent("Ev2", "r"))
		b := claimOne(t, s, "B")
		if res, err := s.Fail(ctx, b.ID, "B", store.Failure{Kind: store.FailRateLimited, Msg: "no_forward_secret", RetryAfter: time.Second, GivenBack: true}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		if got := mustAttempts(t, s, b.ID); len(got) != 0 {
			t.Fatalf("a row given back has attempts %+v", got)
		}
	})

	t.Run("fenced: a late Complete or Fail of a lost lease records fenced and changes nothing else", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		a := claimOne(t, s, "A")
		db.Advance(2 * time.Minute)
		b := claimOne(t, s, "B") // A's lease ran out: B takes the row
		before := mustGet(t, s, b.ID)
		held, err := s.CompleteBatch(ctx, "A", []store.Completion{{ID: a.ID, Result: `{"ts":"1"}`,
			Attempt: store.AttemptNote{StartedAt: claimedAt(a, time.Minute), Status: "200", Result: "1"}}})
		if err != nil || held[0] {
			t.Fatal("late CompleteBatch:", held, err)
		}
		if held, err := s.Complete(ctx, a.ID, "A", `{"ts":"1"}`, nil); err != nil || held {
			t.Fatal("late Complete:", held, err)
		}
		if res, err := s.Fail(ctx, a.ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "late"}); err != nil || res.Held {
			t.Fatal("late Fail:", res, err)
		}
		// B's claim counted A's attempt (issue 38), the late writes nothing.
		if r := mustGet(t, s, b.ID); r.Status != store.StatusPending || r.ClaimToken != "B" || r.Attempts != 1 ||
			r.Result != "" || r.LastError != "" || !r.ClaimExpiresAt.Equal(before.ClaimExpiresAt) {
			t.Fatalf("the row after late writes: %+v (before %+v)", r, before)
		}
		got := mustAttempts(t, s, a.ID)
		if len(got) != 1 || got[0].N != 1 || got[0].Outcome != store.AttemptFenced || got[0].EndedAt.IsZero() ||
			!got[0].StartedAt.Equal(claimedAt(a, time.Minute)) {
			t.Fatalf("A's attempts %+v (A claimed at %s)", got, claimedAt(a, time.Minute))
		}
		if held, err := s.Complete(ctx, b.ID, "B", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		got = mustAttempts(t, s, a.ID)
		if len(got) != 2 || got[0].Outcome != store.AttemptFenced || got[1].N != 2 || got[1].Outcome != store.AttemptDone {
			t.Fatalf("attempts %+v", got)
		}
		if r := mustGet(t, s, a.ID); r.Attempts != 2 {
			t.Fatalf("row attempts %d: want 2, A's (counted by B's claim, once however many late writes) and B's", r.Attempts)
		}
	})

	t.Run("unknown: a claim that takes a row from an expired lease records that attempt as unknown", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		a := claimOne(t, s, "A") // A's process dies mid-effect
		db.Advance(2 * time.Minute)
		if got := mustAttempts(t, s, a.ID); len(got) != 0 {
			t.Fatalf("an expired lease nobody took yet has attempts %+v", got)
		}
		b := claimOne(t, s, "B")
		got := mustAttempts(t, s, a.ID)
		if len(got) != 1 || got[0].N != 1 || got[0].Outcome != store.AttemptUnknown || !got[0].EndedAt.IsZero() ||
			!got[0].StartedAt.Equal(claimedAt(a, time.Minute)) {
			t.Fatalf("attempts after the takeover %+v (A claimed at %s)", got, claimedAt(a, time.Minute))
		}
		if b.Attempts != 1 || b.Deliveries != 2 {
			t.Fatalf("B's claim: attempts %d, delivery %d; want A's dead attempt counted (1) and B's request numbered 2", b.Attempts, b.Deliveries)
		}
		// Re-claiming with the same token is the same attempt.
		if again := claimOne(t, s, "B"); again.Attempts != 1 || again.Deliveries != 2 {
			t.Fatalf("B's re-claim: attempts %d, delivery %d; want 1 and 2, as before", again.Attempts, again.Deliveries)
		}
		if held, err := s.CompleteBatch(ctx, "B", []store.Completion{{ID: b.ID, Attempt: store.AttemptNote{StartedAt: claimedAt(b, time.Minute), Status: "200", Result: "200"}}}); err != nil || !held[0] {
			t.Fatal(held, err)
		}
		got = mustAttempts(t, s, a.ID)
		if len(got) != 2 || got[0].Outcome != store.AttemptUnknown || got[1].N != 2 || got[1].Outcome != store.AttemptDone || got[1].Status != "200" {
			t.Fatalf("attempts %+v", got)
		}
		// A discard of an expired lease records it too.
		mustRecord(t, s, intent("Ev2", "r"))
		c := claimOne(t, s, "C")
		db.Advance(2 * time.Minute)
		if err := s.Discard(ctx, c.ID); err != nil {
			t.Fatal(err)
		}
		if got := mustAttempts(t, s, c.ID); len(got) != 1 || got[0].Outcome != store.AttemptUnknown {
			t.Fatalf("attempts after a discard of an expired lease %+v", got)
		}
	})

	t.Run("pruned with the row; a pending row keeps them; no row: ErrNotFound", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{BackoffBase: time.Second, BackoffMax: time.Second})
		mustRecord(t, s, intent("Ev1", "a", "b"))
		rows := mustClaim(t, s, "A", 2, time.Minute)
		if held, err := s.Complete(ctx, rows[0].ID, "A", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		if res, err := s.Fail(ctx, rows[1].ID, "A", store.Failure{Kind: store.FailRetryable, Msg: "x"}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		db.Advance(30 * 24 * time.Hour)
		res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 10)
		if err != nil || res.Done != 1 {
			t.Fatal(res, err)
		}
		if got, err := s.Attempts(ctx, rows[0].ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("attempts of a pruned row: %+v, %v", got, err)
		}
		if got := mustAttempts(t, s, rows[1].ID); len(got) != 1 || got[0].Outcome != store.AttemptRetry {
			t.Fatalf("a pending row's attempts after pruning: %+v", got)
		}
		if _, err := s.Attempts(ctx, 999999); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("attempts of no row: %v", err)
		}
	})

	t.Run("claimers racing, leases running out under them: one consistent history per row", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{MaxAttempts: 1000, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
		const rows = 12
		for i := range rows {
			mustRecord(t, s, intent(fmt.Sprintf("Ev%d", i), "r"))
		}
		var tokens atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var errs sync.Map
		worker := func(w int) {
			for round := 0; ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				tok := fmt.Sprintf("T%d", tokens.Add(1))
				claimed, err := s.Claim(ctx, tok, 3, time.Minute, nil)
				if err != nil {
					errs.Store(tok, err)
					return
				}
				for _, r := range claimed {
					if (w+round)%3 == 0 {
						if _, err := s.Fail(ctx, r.ID, tok, store.Failure{Kind: store.FailRetryable, Msg: "boom " + tok}); err != nil {
							errs.Store(tok, err)
						}
					} else if (w+round)%3 == 1 {
						if _, err := s.CompleteBatch(ctx, tok, []store.Completion{{ID: r.ID, Attempt: store.AttemptNote{Result: tok}}}); err != nil {
							errs.Store(tok, err)
						}
					} // else: this claimer "dies": its lease runs out
				}
			}
		}
		for w := range 6 {
			wg.Go(func() { worker(w) })
		}
		// Leases run out under the workers until every row is done.
		for range 400 {
			db.Advance(2 * time.Minute)
			if countStatus(t, s, store.StatusPending) == 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		close(stop)
		wg.Wait()
		errs.Range(func(k, v any) bool { t.Errorf("%v: %v", k, v); return true })
		outcomes := map[string]int{}
		defer func() { t.Logf("outcomes of every attempt: %v", outcomes) }()
		for _, r := range all(t, s) {
			got := mustAttempts(t, s, r.ID)
			for _, a := range got {
				outcomes[a.Outcome]++
			}
			counted, done := 0, 0
			for i, a := range got {
				if a.N != i+1 || a.RowID != r.ID {
					t.Errorf("row %d attempt %d numbered %d: %+v", r.ID, i+1, a.N, got)
				}
				switch a.Outcome {
				case store.AttemptDone:
					done++
					counted++
				case store.AttemptRetry, store.AttemptParked:
					counted++
				case store.AttemptFenced, store.AttemptUnknown:
					// Issue 38: an attempt whose lease ran out is
					// counted by the claim that took it (a late
					// Complete or Fail then turns it fenced).
					counted++
				default:
					t.Errorf("row %d: outcome %q", r.ID, a.Outcome)
				}
				if a.Outcome != store.AttemptUnknown && a.EndedAt.IsZero() {
					t.Errorf("row %d attempt %d ended (%s) without an end", r.ID, a.N, a.Outcome)
				}
			}
			if r.Status == store.StatusDone && done != 1 || r.Status == store.StatusPending && done != 0 {
				t.Errorf("row %d (%s): %d done attempts in %+v", r.ID, r.Status, done, got)
			}
			if counted != r.Attempts {
				t.Errorf("row %d: attempts column %d, history counts %d: %+v", r.ID, r.Attempts, counted, got)
			}
		}
	})
}

func mustAttempts(tb testing.TB, s store.Store, id int64) []store.Attempt {
	tb.Helper()
	got, err := s.Attempts(ctx, id)
	if err != nil {
		tb.Fatal(err)
	}
	return got
}
