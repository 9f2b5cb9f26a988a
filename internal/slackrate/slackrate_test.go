package slackrate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	t.Run("calls are spaced by the pace, across callers", func(t *testing.T) {
		b := New(600) // one call per 100ms
		var waits atomic.Int32
		b.OnWait = func(string, time.Duration, string) { waits.Add(1) }
		var wg sync.WaitGroup
		starts := make(chan time.Time, 4)
		for range 4 {
			wg.Go(func() {
				if err := b.Wait(context.Background(), "conversations.history"); err != nil {
					t.Error(err)
				}
				starts <- time.Now()
			})
		}
		wg.Wait()
		close(starts)
		var first, last time.Time
		for s := range starts {
			if first.IsZero() || s.Before(first) {
				first = s
			}
			if s.After(last) {
				last = s
			}
		}
		// Four calls need at least three intervals between the first and the last.
		if got := last.Sub(first); got < 300*time.Millisecond {
			t.Fatalf("4 calls within %v, want ≥ 300ms", got)
		}
		if waits.Load() < 3 {
			t.Fatalf("OnWait told of %d waits, want ≥ 3", waits.Load())
		}
	})

	t.Run("a hold stops only its own method", func(t *testing.T) {
		b := New(60000)
		b.Hold("conversations.history", time.Hour)
		if err := b.Wait(context.Background(), "conversations.replies"); err != nil {
			t.Fatalf("replies: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		var reason string
		b.OnWait = func(_ string, _ time.Duration, r string) { reason = r }
		if err := b.Wait(ctx, "conversations.history"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("history under a hold: %v", err)
		}
		if reason != "retry_after" {
			t.Fatalf("reason %q", reason)
		}
		if b.HeldUntil("conversations.history").IsZero() || !b.HeldUntil("conversations.replies").IsZero() {
			t.Fatal("HeldUntil")
		}
	})

	t.Run("a shorter hold never shortens a longer one", func(t *testing.T) {
		b := New(60)
		b.Hold("m", time.Hour)
		b.Hold("m", time.Second)
		if time.Until(b.HeldUntil("m")) < 30*time.Minute {
			t.Fatal("hold shortened")
		}
	})

	t.Run("Ready is the next slot, or a longer hold", func(t *testing.T) {
		b := New(60)
		if b.Ready("m").After(time.Now()) {
			t.Fatal("a fresh budget is not ready at once")
		}
		before := time.Now()
		if err := b.Wait(context.Background(), "m"); err != nil {
			t.Fatal(err)
		}
		if r := b.Ready("m"); r.Before(before.Add(time.Second)) || r.After(time.Now().Add(time.Second)) {
			t.Fatalf("after a call at %v, ready at %v, want a second after the call", before, r)
		}
		b.Hold("m", time.Hour)
		if d := time.Until(b.Ready("m")); d < 59*time.Minute {
			t.Fatalf("under a hold, ready in %v", d)
		}
		if d := time.Until(b.Ready("other")); d > time.Second {
			t.Fatalf("another method waits only for the pace: %v", d)
		}
	})
}
