package storetest

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// mustProgress reads row id's saved progress.
func mustProgress(tb testing.TB, s store.Store, id int64) string {
	tb.Helper()
	p, err := s.Progress(ctx, id)
	if err != nil {
		tb.Fatalf("Progress(%d): %v", id, err)
	}
	return p
}

// testProgress: SaveProgress is fenced by the claim token like Complete, and
// what it saved survives the attempt (its failure, a lost lease, a requeue)
// for the next one to read.
func testProgress(t *testing.T, newDB NewDB) {
	t.Run("the holder saves, a stale token cannot, and the next holder reads it", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		a := claimOne(t, s, "A")
		if p := mustProgress(t, s, a.ID); p != "" {
			t.Fatalf("progress of a new row %q, want none", p)
		}
		held, err := s.SaveProgress(ctx, a.ID, "A", `{"text":"Hel"}`)
		if err != nil || !held {
			t.Fatalf("holder's SaveProgress: held=%v err=%v", held, err)
		}
		if held, err := s.SaveProgress(ctx, a.ID, "B", `{"text":"stale"}`); err != nil || held {
			t.Fatalf("another token's SaveProgress: held=%v err=%v, want not held", held, err)
		}
		if p := mustProgress(t, s, a.ID); p != `{"text":"Hel"}` {
			t.Fatalf("progress %q after a refused save, want the holder's", p)
		}

		// A dies; its lease runs out and B takes the row: A's late save is
		// refused, B reads what A saved and goes on.
		db.Advance(2 * time.Minute)
		b := claimOne(t, s, "B")
		if b.ID != a.ID {
			t.Fatalf("B claimed %d, want %d", b.ID, a.ID)
		}
		if held, err := s.SaveProgress(ctx, a.ID, "A", `{"text":"Hello from A"}`); err != nil || held {
			t.Fatalf("stale SaveProgress after the lease moved: held=%v err=%v", held, err)
		}
		if p := mustProgress(t, s, b.ID); p != `{"text":"Hel"}` {
			t.Fatalf("B reads %q, want what A saved", p)
		}
		if held, err := s.SaveProgress(ctx, b.ID, "B", `{"text":"Hello"}`); err != nil || !held {
			t.Fatalf("B's SaveProgress: held=%v err=%v", held, err)
		}
		before := mustGet(t, s, b.ID)
		if held, err := s.Complete(ctx, b.ID, "B", `{"ts":"1.2"}`, nil); err != nil || !held {
			t.Fatalf("complete: %v %v", held, err)
		}
		// Done: nobody saves any more, and the last save is kept.
		if held, err := s.SaveProgress(ctx, b.ID, "B", `{"text":"late"}`); err != nil || held {
			t.Fatalf("SaveProgress on a done row: held=%v err=%v", held, err)
		}
		if p := mustProgress(t, s, b.ID); p != `{"text":"Hello"}` {
			t.Fatalf("progress of the done row %q", p)
		}
		if after := mustGet(t, s, b.ID); after.Attempts != before.Attempts+1 || after.Status != store.StatusDone {
			t.Fatalf("row after complete: %+v", after)
		}
	})

	t.Run("progress survives a failed attempt, parking and a requeue", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{BackoffBase: time.Second, BackoffMax: time.Second})
		mustRecord(t, s, intent("Ev1", "r"))
		a := claimOne(t, s, "A")
		big := strings.Repeat("é", 40_000) // an answer at [stream] max_chars, in two-byte runes
		if held, err := s.SaveProgress(ctx, a.ID, "A", big); err != nil || !held {
			t.Fatalf("save: %v %v", held, err)
		}
		if res, err := s.Fail(ctx, a.ID, "A", store.Failure{Kind: store.FailUnknown, Msg: "agent dropped"}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		// Between attempts (pending, no lease) a save by the old token is refused.
		if held, err := s.SaveProgress(ctx, a.ID, "A", "x"); err != nil || held {
			t.Fatalf("SaveProgress after Fail: held=%v err=%v", held, err)
		}
		db.Advance(time.Hour)
		b := claimOne(t, s, "B")
		if p := mustProgress(t, s, b.ID); p != big {
			t.Fatalf("progress after a failed attempt: %d bytes, want the %d saved", len(p), len(big))
		}
		if res, err := s.Fail(ctx, b.ID, "B", store.Failure{Kind: store.FailPermanent, Msg: "gone"}); err != nil || res.Status != store.StatusParked {
			t.Fatal(res, err)
		}
		if err := s.Requeue(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		c := claimOne(t, s, "C")
		if p := mustProgress(t, s, c.ID); p != big {
			t.Fatal("progress lost by parking and requeue")
		}
	})

	t.Run("an unknown row is not found", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if _, err := s.Progress(ctx, 4242); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Progress of no row: %v, want ErrNotFound", err)
		}
		if held, err := s.SaveProgress(ctx, 4242, "A", "x"); err != nil || held {
			t.Fatalf("SaveProgress of no row: held=%v err=%v", held, err)
		}
	})

	t.Run("a stale token saving while the holder saves never wins", func(t *testing.T) {
		db := newDB(t)
		stores := []store.Store{db.Open(t, store.Options{}), db.Open(t, store.Options{})}
		mustRecord(t, stores[0], intent("Ev1", "r"))
		old := claimOne(t, stores[0], "OLD")
		db.Advance(2 * time.Minute)
		claimOne(t, stores[1], "NEW")
		var wg sync.WaitGroup
		var staleHeld atomic.Int32
		for i := range 20 {
			wg.Go(func() {
				if held, err := stores[0].SaveProgress(ctx, old.ID, "OLD", "stale"); err != nil {
					t.Error(err)
				} else if held {
					staleHeld.Add(1)
				}
			})
			wg.Go(func() {
				if held, err := stores[1].SaveProgress(ctx, old.ID, "NEW", "fresh"); err != nil || !held {
					t.Errorf("holder's save %d: held=%v err=%v", i, held, err)
				}
			})
		}
		wg.Wait()
		if n := staleHeld.Load(); n != 0 {
			t.Fatalf("%d stale saves held", n)
		}
		if p := mustProgress(t, stores[0], old.ID); p != "fresh" {
			t.Fatalf("progress %q, want the holder's", p)
		}
	})
}
