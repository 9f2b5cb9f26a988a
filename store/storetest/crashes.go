package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// testAttemptsAcrossCrashes: attempts count across crashes (issue 38,
// DESIGN §12). A claim that takes a row from an expired lease counts the
// dead attempt and records it as unknown; a row whose attempts reach
// max_attempts that way parks (so a row whose effect kills its process each
// time ends); every claim numbers its request (Row.Deliveries, the
// X-Ackd-Attempt) past every number the row had, 429 waits, failures,
// takeovers and requeues included, while a 429 spends no budget.
func testAttemptsAcrossCrashes(t *testing.T, newDB NewDB) {
	t.Run("a row whose claimer dies every time parks at max_attempts, each death recorded", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{MaxAttempts: 3})
		mustRecord(t, s, intent("Ev1", "r"))
		for i := range 3 {
			r := claimOne(t, s, "T"+string(rune('A'+i))) // its process dies mid-effect
			if r.Attempts != i || r.Deliveries != i+1 {
				t.Fatalf("claim %d: attempts %d, delivery %d; want %d counted before it and request %d", i+1, r.Attempts, r.Deliveries, i, i+1)
			}
			db.Advance(2 * time.Minute)
		}
		if got := mustClaim(t, s, "TD", 10, time.Minute); len(got) != 0 {
			t.Fatalf("the claim after the third death took %+v; want the row parked instead", got)
		}
		r := mustGet(t, s, all(t, s)[0].ID)
		if r.Status != store.StatusParked || r.Attempts != 3 || r.ClaimToken != "" || !r.ClaimExpiresAt.IsZero() ||
			!strings.Contains(r.LastError, "no word from its process") || !strings.Contains(r.LastError, "3 attempts") {
			t.Fatalf("row after three deaths: %+v; want parked after 3 attempts, saying why", r)
		}
		got := mustAttempts(t, s, r.ID)
		if len(got) != 3 {
			t.Fatalf("history %+v; want the three dead attempts", got)
		}
		for _, a := range got {
			if a.Outcome != store.AttemptUnknown {
				t.Fatalf("history %+v; want every attempt unknown", got)
			}
		}
		// An operator's retry gives it a fresh budget; its numbers go on.
		if err := s.Requeue(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if again := claimOne(t, s, "TE"); again.Attempts != 0 || again.Deliveries != 4 {
			t.Fatalf("after the retry: attempts %d, delivery %d; want 0 and 4", again.Attempts, again.Deliveries)
		}
	})

	t.Run("request numbers never repeat: 429s, failures, a death, a park and a requeue", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{MaxAttempts: 5, BackoffBase: time.Second, BackoffMax: time.Second})
		mustRecord(t, s, intent("Ev1", "r"))
		step := func(tok string, wantAttempts, wantDelivery int) store.Row {
			t.Helper()
			r := claimOne(t, s, tok)
			if r.Attempts != wantAttempts || r.Deliveries != wantDelivery {
				t.Fatalf("claim %s: attempts %d, delivery %d; want %d and %d", tok, r.Attempts, r.Deliveries, wantAttempts, wantDelivery)
			}
			return r
		}
		fail := func(r store.Row, tok string, kind store.FailKind) {
			t.Helper()
			if res, err := s.Fail(ctx, r.ID, tok, store.Failure{Kind: kind, Msg: "no", RetryAfter: time.Second}); err != nil || !res.Held {
				t.Fatal(res, err)
			}
			db.Advance(2 * time.Minute)
		}
		r := step("A", 0, 1)
		fail(r, "A", store.FailRateLimited) // spends nothing
		r = step("B", 0, 2)
		fail(r, "B", store.FailRateLimited)
		r = step("C", 0, 3)
		fail(r, "C", store.FailRetryable)
		step("D", 1, 4) // dies
		db.Advance(2 * time.Minute)
		r = step("E", 2, 5) // counted D's death
		fail(r, "E", store.FailPermanent)
		if got := mustGet(t, s, r.ID); got.Status != store.StatusParked {
			t.Fatalf("row %+v, want parked", got)
		}
		if err := s.Requeue(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		step("F", 0, 6)
		if got := mustAttempts(t, s, r.ID); len(got) != 5 {
			t.Fatalf("history %+v: want A…E's five attempts (F's is under way)", got)
		}
	})

	t.Run("a row written claimed (an inline attempt) is request 1; the claim after it is 2", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{MaxAttempts: 1, BackoffBase: time.Second, BackoffMax: time.Second})
		in := intent("Ev1", "r", "other")
		for i := range in.Rows {
			in.Rows[i].ClaimToken, in.Rows[i].ClaimLease = "I", time.Minute
		}
		mustRecord(t, s, in)
		rows := all(t, s)
		inline, other := rows[0].ID, rows[1].ID
		if rows[0].Key != "Ev1:r" {
			inline, other = other, inline
		}
		if res, err := s.Fail(ctx, inline, "I", store.Failure{Kind: store.FailRateLimited, Msg: "429", RetryAfter: time.Second}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		db.Advance(2 * time.Minute)
		got := mustClaim(t, s, "A", 10, time.Minute)
		if len(got) != 2 {
			t.Fatalf("claimed %+v, want both rows (max_attempts 1, none spent)", got)
		}
		for _, r := range got {
			if r.ID == inline && (r.Attempts != 0 || r.Deliveries != 2) {
				t.Fatalf("the claim after the inline attempt: attempts %d, delivery %d; want 0 (a 429) and 2", r.Attempts, r.Deliveries)
			}
			// The intent's other row shared the inline lease and was never
			// performed under it: taking that lease counts nothing.
			if r.ID == other && r.Attempts != 0 {
				t.Fatalf("the intent's other row: attempts %d, want 0", r.Attempts)
			}
		}
	})

	t.Run("the row's count and its history agree after a takeover", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		claimOne(t, s, "A") // dies
		db.Advance(2 * time.Minute)
		b := claimOne(t, s, "B")
		if held, err := s.Complete(ctx, b.ID, "B", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		r := mustGet(t, s, b.ID)
		got := mustAttempts(t, s, b.ID)
		if r.Attempts != 2 || len(got) != 2 || got[0].Outcome != store.AttemptUnknown || got[1].Outcome != store.AttemptDone {
			t.Fatalf("row attempts %d beside history %+v; want 2 beside unknown, done", r.Attempts, got)
		}
	})
}
