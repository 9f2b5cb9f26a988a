package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// testReplayOnce is issue 38's "operator tools do once what was asked
// once", on the store: a window replays originals only, one request makes
// one row per original key, numbers are never handed out twice, and a bulk
// change acts on what its preview counted or not at all.
func testReplayOnce(t *testing.T, newDB NewDB) {
	t.Run("a window replay asked twice replays each event twice, once each time", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		since := db.Now(t)
		for _, ev := range []string{"Ev1", "Ev2", "Ev3"} {
			mustRecord(t, s, intent(ev, "a"))
		}
		finish(t, s)
		f := store.ReplayFilter{Route: "a", Since: since}
		for round, want := range [][]string{
			{"Ev1:a#r1", "Ev2:a#r1", "Ev3:a#r1"},
			{"Ev1:a#r2", "Ev2:a#r2", "Ev3:a#r2"},
		} {
			// The replays of the round before are done too, and were
			// created in the window: they are not originals.
			if _, n, err := s.ReplayMatching(ctx, f, 10); err != nil || n != 3 {
				t.Fatalf("round %d: the window counts %d rows (%v), want the 3 originals", round+1, n, err)
			}
			var keys []string
			for _, r := range mustReplay(t, s, f) {
				keys = append(keys, r.Key)
			}
			if !slices.Equal(keys, want) {
				t.Fatalf("round %d replayed %q, want %q", round+1, keys, want)
			}
			finish(t, s)
		}
		if n := countStatus(t, s, store.StatusDone); n != 9 {
			t.Fatalf("%d done rows, want 3 originals and 3 replays of each of 2 rounds (9)", n)
		}
	})

	t.Run("ids naming an original and its replay make one row", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "a"))
		orig := finish(t, s)["Ev1:a"]
		r1 := mustReplay(t, s, store.ReplayFilter{IDs: []int64{orig.ID}})[0]
		finish(t, s)
		got := mustReplay(t, s, store.ReplayFilter{IDs: []int64{orig.ID, r1.ID}})
		if len(got) != 1 || got[0].From != orig.ID || got[0].Key != "Ev1:a#r2" {
			t.Fatalf("replay of Ev1:a and Ev1:a#r1 together made %+v, want one row Ev1:a#r2 from the original", got)
		}
	})

	t.Run("a replay number is never handed out again once its row is pruned", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "a"))
		row := claimOne(t, s, "A")
		if res, err := s.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "gone"}); err != nil || res.Status != store.StatusParked {
			t.Fatal(res, err)
		}
		if got := mustReplay(t, s, store.ReplayFilter{IDs: []int64{row.ID}}); len(got) != 1 || got[0].Key != "Ev1:a#r1" {
			t.Fatalf("first replay %+v, want Ev1:a#r1", got)
		}
		finish(t, s)
		// The done replay is pruned; the parked original never is.
		db.Advance(72 * time.Hour)
		if _, err := s.Prune(ctx, 48*time.Hour, 48*time.Hour, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetByKey(ctx, "Ev1:a#r1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Ev1:a#r1 was not pruned: %v", err)
		}
		if got := mustReplay(t, s, store.ReplayFilter{IDs: []int64{row.ID}}); len(got) != 1 || got[0].Key != "Ev1:a#r2" {
			t.Fatalf("replay after the first one was pruned: %+v, want Ev1:a#r2 (a handler that remembers Ev1:a#r1 would drop a reused key)", got)
		}
	})

	t.Run("a replay whose window no longer selects what was previewed makes nothing", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		since := db.Now(t)
		mustRecord(t, s, intent("Ev1", "a"))
		finish(t, s)
		f := store.ReplayFilter{Route: "a", Since: since}
		_, n, err := s.ReplayMatching(ctx, f, 10)
		if err != nil || n != 1 {
			t.Fatalf("preview %d %v", n, err)
		}
		mustRecord(t, s, intent("Ev2", "a"))
		finish(t, s)
		before := all(t, s)
		f.Expect = n
		_, err = s.Replay(ctx, f)
		var changed *store.SelectionChanged
		if !errors.As(err, &changed) || changed.Previewed != 1 || changed.Now != 2 || !errors.Is(err, store.ErrFilter) {
			t.Fatalf("replay expecting 1 of 2: %v, want a SelectionChanged 1 → 2", err)
		}
		if after := all(t, s); len(after) != len(before) {
			t.Fatalf("a refused replay wrote rows: %d → %d", len(before), len(after))
		}
		f.Expect = 2
		if got := mustReplay(t, s, f); len(got) != 2 {
			t.Fatalf("replay expecting the 2 it selects: %+v", got)
		}
	})

	t.Run("a bulk retry or discard whose filter no longer selects what was previewed changes nothing", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		park := func() {
			for _, r := range mustClaim(t, s, "P", 100, time.Minute) {
				if res, err := s.Fail(ctx, r.ID, "P", store.Failure{Kind: store.FailPermanent, Msg: "gone"}); err != nil || res.Status != store.StatusParked {
					t.Fatal(res, err)
				}
			}
		}
		mustRecord(t, s, intent("Ev1", "a"))
		park()
		f := store.ParkedFilter{Route: "a"}
		if _, n, err := s.Matching(ctx, f, 10); err != nil || n != 1 {
			t.Fatalf("preview %d %v", n, err)
		}
		mustRecord(t, s, intent("Ev2", "a"))
		park()
		f.Expect = 1
		var changed *store.SelectionChanged
		if _, err := s.DiscardParked(ctx, f); !errors.As(err, &changed) || changed.Previewed != 1 || changed.Now != 2 {
			t.Fatalf("discard expecting 1 of 2: %v, want a SelectionChanged", err)
		}
		if _, err := s.RequeueParked(ctx, f); !errors.As(err, &changed) || changed.Now != 2 {
			t.Fatalf("retry expecting 1 of 2: %v, want a SelectionChanged", err)
		}
		if n := countStatus(t, s, store.StatusParked); n != 2 {
			t.Fatalf("%d parked rows after refused bulk changes, want 2", n)
		}
		f.Expect = 2
		if n, err := s.DiscardParked(ctx, f); err != nil || n != 2 {
			t.Fatalf("discard expecting the 2 it selects: %d %v", n, err)
		}
		undo := store.ParkedFilter{Route: "a", Discarded: true, Expect: 2}
		if n, err := s.RequeueParked(ctx, undo); err != nil || n != 2 {
			t.Fatalf("retry of the 2 discarded: %d %v", n, err)
		}
	})
}
