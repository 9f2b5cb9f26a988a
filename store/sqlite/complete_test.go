package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// Issue 16.6: a completion counts its attempt: a row done on its first
// attempt has attempts 1, one done after a failure has 2 and keeps the
// failure as last_error.
func TestCompleteCountsTheAttempt(t *testing.T) {
	c := newClock()
	s, _ := newStore(t, c)
	ctx := context.Background()
	mustRecord(t, s, intent("Ev1", "a", "b"))
	rows := mustClaim(t, s, "A", 2, time.Minute)
	if held, err := s.Complete(ctx, rows[0].ID, "A", "", nil); err != nil || !held {
		t.Fatalf("complete: %v %v", held, err)
	}
	if _, err := s.Fail(ctx, rows[1].ID, "A", store.Failure{Kind: store.FailRetryable, Msg: "boom"}); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	again := mustClaim(t, s, "B", 2, time.Minute)
	if len(again) != 1 {
		t.Fatalf("claimed %d rows, want the failed one", len(again))
	}
	if held, err := s.Complete(ctx, again[0].ID, "B", "", nil); err != nil || !held {
		t.Fatalf("complete: %v %v", held, err)
	}
	first, _ := s.Get(ctx, rows[0].ID)
	second, _ := s.Get(ctx, rows[1].ID)
	if first.Attempts != 1 || first.LastError != "" {
		t.Errorf("done on the first attempt: attempts %d last_error %q, want 1 and none", first.Attempts, first.LastError)
	}
	if second.Attempts != 2 || second.LastError != "boom" {
		t.Errorf("done on the second attempt: attempts %d last_error %q, want 2 and the failure", second.Attempts, second.LastError)
	}
}
