package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// testOutcomeUnknown: what an attempt needs to know about the ones before
// it (a post is confirmed before it is repeated). Claim records the first
// claim's time and marks a row whose previous claimer let its lease expire
// without completing or failing it; Fail(FailUnknown) marks it too; nothing
// clears the mark; CompleteBatch stores each completion's note.
func testOutcomeUnknown(t *testing.T, newDB NewDB) {
	t.Run("a new row is not marked; the first claim's time is kept by later claims", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{BackoffBase: time.Second, BackoffMax: time.Second})
		mustRecord(t, s, intent("Ev1", "r"))
		if r := all(t, s)[0]; r.OutcomeUnknown || !r.FirstClaimedAt.IsZero() || r.Note != "" {
			t.Fatalf("new row: %+v", r)
		}
		before := db.Now(t)
		a := claimOne(t, s, "A")
		after := db.Now(t)
		if a.OutcomeUnknown || a.FirstClaimedAt.Before(before.Truncate(time.Millisecond)) || a.FirstClaimedAt.After(after) {
			t.Fatalf("first claim in [%s, %s]: %+v", before, after, a)
		}
		// A definite refusal: a retry, nothing marked.
		if res, err := s.Fail(ctx, a.ID, "A", store.Failure{Kind: store.FailRetryable, Msg: "http_429"}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		db.Advance(time.Minute)
		b := claimOne(t, s, "B")
		if b.OutcomeUnknown || !b.FirstClaimedAt.Equal(a.FirstClaimedAt) {
			t.Fatalf("second claim after a definite failure: %+v (first claim %s)", b, a.FirstClaimedAt)
		}
		// Re-claiming with the same token marks nothing either.
		if again := claimOne(t, s, "B"); again.OutcomeUnknown {
			t.Fatalf("re-claim by the holder marked the row: %+v", again)
		}
	})

	t.Run("a lease that ran out with neither Complete nor Fail marks the row at the next claim", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		a := claimOne(t, s, "A") // the process holding A dies mid-call
		db.Advance(2 * time.Minute)
		b := claimOne(t, s, "B")
		if b.ID != a.ID || !b.OutcomeUnknown || !b.FirstClaimedAt.Equal(a.FirstClaimedAt) {
			t.Fatalf("claim after an expired lease: %+v", b)
		}
		if r := mustGet(t, s, b.ID); !r.OutcomeUnknown {
			t.Fatalf("mark not stored: %+v", r)
		}
	})

	t.Run("FailUnknown marks the row, retries it like FailRetryable, and the mark survives definite failures, parking and requeue", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: time.Second})
		mustRecord(t, s, intent("Ev1", "r"))
		a := claimOne(t, s, "A")
		res, err := s.Fail(ctx, a.ID, "A", store.Failure{Kind: store.FailUnknown, Msg: "timeout"})
		if err != nil || !res.Held || res.Status != store.StatusPending || res.Attempts != 1 {
			t.Fatalf("FailUnknown: %+v %v", res, err)
		}
		if r := mustGet(t, s, a.ID); !r.OutcomeUnknown || r.LastError != "timeout" {
			t.Fatalf("after FailUnknown: %+v", r)
		}
		for i, kind := range []store.FailKind{store.FailRateLimited, store.FailRetryable, store.FailRetryable} {
			db.Advance(time.Hour)
			row := claimOne(t, s, fmt.Sprint("T", i))
			if !row.OutcomeUnknown {
				t.Fatalf("claim %d lost the mark: %+v", i, row)
			}
			if _, err := s.Fail(ctx, row.ID, row.ClaimToken, store.Failure{Kind: kind, Msg: "refused", RetryAfter: time.Second}); err != nil {
				t.Fatal(err)
			}
		}
		if r := mustGet(t, s, a.ID); r.Status != store.StatusParked || !r.OutcomeUnknown {
			t.Fatalf("parked row: %+v", r)
		}
		if err := s.Requeue(ctx, a.ID); err != nil {
			t.Fatal(err)
		}
		if r := claimOne(t, s, "C"); !r.OutcomeUnknown {
			t.Fatalf("requeued row lost the mark: %+v", r)
		}
	})

	t.Run("a stale FailUnknown marks nothing", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		claimOne(t, s, "A")
		if res, err := s.Fail(ctx, 1<<40, "A", store.Failure{Kind: store.FailUnknown, Msg: "x"}); err != nil || res.Held {
			t.Fatal(res, err)
		}
		row := all(t, s)[0]
		if res, err := s.Fail(ctx, row.ID, "Z", store.Failure{Kind: store.FailUnknown, Msg: "x"}); err != nil || res.Held {
			t.Fatal(res, err)
		}
		if r := mustGet(t, s, row.ID); r.OutcomeUnknown {
			t.Fatalf("a fence that did not hold marked the row: %+v", r)
		}
	})

	t.Run("CompleteBatch stores each completion's note, only where the fence holds", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "a", "b", "c"))
		rows := mustClaim(t, s, "A", 3, time.Minute)
		held, err := s.CompleteBatch(ctx, "A", []store.Completion{
			{ID: rows[0].ID, Result: `{"ts":"1.1"}`, Note: "confirmed: found the earlier post"},
			{ID: rows[1].ID, Result: `{"ts":"1.2"}`},
			{ID: rows[2].ID, Note: `note with "quotes"`},
		})
		if err != nil || fmt.Sprint(held) != "[true true true]" {
			t.Fatalf("CompleteBatch = %v, %v", held, err)
		}
		for i, want := range []string{"confirmed: found the earlier post", "", `note with "quotes"`} {
			if r := mustGet(t, s, rows[i].ID); r.Note != want || r.Status != store.StatusDone {
				t.Fatalf("row %d: note %q, want %q (%+v)", i, r.Note, want, r)
			}
		}
		if r := mustGet(t, s, rows[0].ID); r.Result != `{"ts":"1.1"}` {
			t.Fatalf("result beside a note: %+v", r)
		}
	})
}
