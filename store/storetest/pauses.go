package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// routesOf lists the payload routes of rows (intent's rows carry
// {"route": r}), sorted.
func routesOf(rows []store.Row) []string {
	var out []string
	for _, r := range rows {
		var route string
		fmt.Sscanf(r.Payload, `{"route":%q}`, &route)
		out = append(out, route)
	}
	slices.Sort(out)
	return out
}

func mustPause(tb testing.TB, s store.Store, route, by string) bool {
	tb.Helper()
	changed, err := s.PauseRoute(ctx, route, by)
	if err != nil {
		tb.Fatal(err)
	}
	return changed
}

func mustPaused(tb testing.TB, s store.Store) []store.RoutePause {
	tb.Helper()
	p, err := s.PausedRoutes(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func testRoutePauses(t *testing.T, newDB NewDB) {
	t.Run("a paused route's rows are claimed by no one, with or without a filter; other routes' are", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "slow", "fast"))
		mustRecord(t, s, intent("Ev2", "slow", "fast"))
		mustRecord(t, s, store.Intent{EventID: "Ev3", EventType: "message", Rows: []store.NewRow{
			{Key: "Ev3:none", Effect: "log", Payload: `{}`},      // no route: never paused
			{Key: "Ev3:bad", Effect: "log", Payload: `not json`}, // not JSON: never paused, breaks nothing
		}})
		before := db.Now(t)
		if !mustPause(t, s, "slow", "ops@host1") {
			t.Fatal("a first pause reported no change")
		}
		after := db.Now(t)
		for route, want := range map[string]bool{"slow": true, "fast": false, "": false} {
			if got, err := s.RoutePaused(ctx, route); err != nil || got != want {
				t.Fatalf("RoutePaused(%q) = %v, %v; want %v", route, got, err, want)
			}
		}
		if mustPause(t, s, "slow", "other@host2") {
			t.Fatal("pausing a paused route reported a change")
		}
		filtered, err := s.Claim(ctx, "F", 10, time.Minute, &store.ClaimFilter{Effects: []string{"log"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := routesOf(filtered); !slices.Equal(got, []string{"", "", "fast", "fast"}) {
			t.Fatalf("a filtered claim took rows of routes %q, want the two fast rows and the two without a route", got)
		}
		if rest := mustClaim(t, s, "G", 10, time.Minute); len(rest) != 0 {
			t.Fatalf("an unfiltered claim took %q: the paused route's rows", routesOf(rest))
		}
		if byRoute, err := s.PendingByRoute(ctx); err != nil || len(byRoute) != 3 || byRoute["slow"] != 2 || byRoute["fast"] != 2 || byRoute[""] != 2 {
			t.Fatalf("pending by route %v %v, want slow 2, fast 2 (leased), \"\" 2", byRoute, err)
		}
		p := mustPaused(t, s)
		if len(p) != 1 || p[0].Route != "slow" || p[0].By != "ops@host1" || p[0].Pending != 2 {
			t.Fatalf("paused routes = %+v, want slow by ops@host1 (the first pause) with 2 pending rows", p)
		}
		if p[0].PausedAt.Before(before.Add(-time.Millisecond)) || p[0].PausedAt.After(after.Add(time.Millisecond)) {
			t.Fatalf("paused at %v, not between %v and %v", p[0].PausedAt, before, after)
		}
		if p[0].OldestPending.IsZero() || p[0].OldestPending.After(after) {
			t.Fatalf("oldest pending %v", p[0].OldestPending)
		}
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Due["log"] != 0 || st.Pending != 6 {
			t.Fatalf("stats: due %v, pending %d: want no due row (the paused ones wait for a resume, not a sweep) among 6 pending", st.Due, st.Pending)
		}
		if cb, ok := s.(store.ClaimBlockers); ok {
			if waiting, _, err := cb.ClaimBlockers(ctx, nil); err != nil || waiting != 0 {
				t.Fatalf("ClaimBlockers counts %d rows waiting (%v): the paused ones are not locked out", waiting, err)
			}
		}

		if changed, err := s.ResumeRoute(ctx, "slow"); err != nil || !changed {
			t.Fatalf("resume: %v %v", changed, err)
		}
		if changed, err := s.ResumeRoute(ctx, "slow"); err != nil || changed {
			t.Fatalf("a second resume: %v %v, want no change", changed, err)
		}
		if got := routesOf(mustClaim(t, s, "H", 10, time.Minute)); !slices.Equal(got, []string{"slow", "slow"}) {
			t.Fatalf("after the resume a claim took %q, want the two slow rows", got)
		}
		if p := mustPaused(t, s); len(p) != 0 {
			t.Fatalf("paused routes after the resume: %+v", p)
		}
	})

	t.Run("a paused step route's deadline rows are claimed when due: deadline rows are never paused", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, store.Intent{EventID: "Ev1", EventType: "function_executed", Rows: []store.NewRow{
			{Key: "Fx1:approve", Effect: "step", Payload: `{"route":"approve"}`},
			{Key: "Fx1:approve:deadline", Effect: store.EffectStepDeadline, Payload: `{"route":"approve"}`, Delay: time.Minute},
		}})
		mustPause(t, s, "approve", "ops")
		if got := mustClaim(t, s, "A", 10, time.Minute); len(got) != 0 {
			t.Fatalf("claimed %v before the deadline with the route paused", ids(got))
		}
		if p := mustPaused(t, s); len(p) != 1 || p[0].Pending != 1 {
			t.Fatalf("paused routes %+v, want approve holding 1 row (the step row; the deadline row is not held)", p)
		}
		db.Advance(time.Minute + time.Millisecond)
		if st, err := s.Stats(ctx); err != nil || st.Due[store.EffectStepDeadline] != 1 || st.Due["step"] != 0 {
			t.Fatalf("stats due %v (%v), want the deadline row due and the step row held", st.Due, err)
		}
		if got, err := s.Claim(ctx, "B", 10, time.Minute, &store.ClaimFilter{Effects: []string{"step"}}); err != nil || len(got) != 0 {
			t.Fatalf("a claim of step rows took %v (%v) with the route paused", ids(got), err)
		}
		if got := mustClaim(t, s, "C", 10, time.Minute); len(got) != 1 || got[0].Key != "Fx1:approve:deadline" {
			t.Fatalf("claim at the deadline took %v, want the deadline row only", ids(got))
		}
	})

	t.Run("a row leased when the pause lands finishes its attempt; a resumed row is due as it was", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "r"))
		mustRecord(t, s, intent("Ev2", "r"))
		held := claimOne(t, s, "A")
		mustPause(t, s, "r", "ops")
		// The holder's re-claim keeps its row (and takes no other).
		again := mustClaim(t, s, "A", 10, time.Minute)
		if len(again) != 1 || again[0].ID != held.ID {
			t.Fatalf("the holder's re-claim got %v, want its row %d only", ids(again), held.ID)
		}
		if ok, err := s.Complete(ctx, held.ID, "A", "", nil); err != nil || !ok {
			t.Fatalf("the leased row's attempt did not finish: %v %v", ok, err)
		}
		// A row failed into backoff while paused keeps its due time.
		mustResume := func() {
			if _, err := s.ResumeRoute(ctx, "r"); err != nil {
				t.Fatal(err)
			}
		}
		mustResume()
		other := claimOne(t, s, "B")
		if _, err := s.Fail(ctx, other.ID, "B", store.Failure{Kind: store.FailRetryable, Msg: "503"}); err != nil {
			t.Fatal(err)
		}
		due := mustGet(t, s, other.ID).NextAttemptAt
		mustPause(t, s, "r", "ops")
		db.Advance(2 * time.Hour)
		if got := mustClaim(t, s, "C", 10, time.Minute); len(got) != 0 {
			t.Fatalf("a paused row was claimed: %v", ids(got))
		}
		mustResume()
		if r := mustGet(t, s, other.ID); !r.NextAttemptAt.Equal(due) || r.Attempts != 1 {
			t.Fatalf("resumed row: due %v attempts %d, want %v and 1 (as it was)", r.NextAttemptAt, r.Attempts, due)
		}
		if got := mustClaim(t, s, "C", 10, time.Minute); len(got) != 1 || got[0].ID != other.ID {
			t.Fatalf("after the resume a claim got %v", ids(got))
		}
	})

	t.Run("a pause is seen by a second store on the same database (another process)", func(t *testing.T) {
		db := newDB(t)
		a := db.Open(t, store.Options{})
		b := db.Open(t, store.Options{})
		mustRecord(t, a, intent("Ev1", "r", "q"))
		mustPause(t, a, "r", "ops@a")
		if got := routesOf(mustClaim(t, b, "B", 10, time.Minute)); !slices.Equal(got, []string{"q"}) {
			t.Fatalf("the second store claimed %q, want only q", got)
		}
		if p := mustPaused(t, b); len(p) != 1 || p[0].Route != "r" || p[0].By != "ops@a" || p[0].Pending != 1 {
			t.Fatalf("the second store sees %+v", p)
		}
		if changed, err := b.ResumeRoute(ctx, "r"); err != nil || !changed {
			t.Fatal(changed, err)
		}
		if got := routesOf(mustClaim(t, a, "A", 10, time.Minute)); !slices.Equal(got, []string{"r"}) {
			t.Fatalf("after the other store resumed, a claim got %q", got)
		}
	})

	t.Run("the queue's oldest pending age leaves a paused route's rows out: they are not stuck", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "slow"))
		db.Advance(time.Hour)
		mustRecord(t, s, intent("Ev2", "fast"))
		mustPause(t, s, "slow", "ops")
		q, err := s.Queue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if q.Pending != 2 || q.OldestPending >= 30*time.Minute {
			t.Fatalf("queue %+v: want 2 pending, the oldest (not paused) younger than 30m", q)
		}
		if p := mustPaused(t, s); len(p) != 1 || db.Now(t).Sub(p[0].OldestPending) < time.Hour {
			t.Fatalf("paused %+v: want the paused row's age (1h) here", p)
		}
		if _, err := s.ResumeRoute(ctx, "slow"); err != nil {
			t.Fatal(err)
		}
		if q, err := s.Queue(ctx); err != nil || q.OldestPending < time.Hour {
			t.Fatalf("after the resume: %+v %v, want the oldest at 1h", q, err)
		}
	})

	t.Run("an empty route name is refused", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if _, err := s.PauseRoute(ctx, "", "ops"); !errors.Is(err, store.ErrFilter) {
			t.Fatalf("pause of an empty name: %v, want ErrFilter", err)
		}
		if _, err := s.ResumeRoute(ctx, ""); !errors.Is(err, store.ErrFilter) {
			t.Fatalf("resume of an empty name: %v, want ErrFilter", err)
		}
		if p := mustPaused(t, s); len(p) != 0 {
			t.Fatalf("paused: %+v", p)
		}
	})
}

// finish claims every due row and completes it (done), returning them by key.
func finish(tb testing.TB, s store.Store) map[string]store.Row {
	tb.Helper()
	out := map[string]store.Row{}
	for _, r := range mustClaim(tb, s, "finisher", 1000, time.Minute) {
		if ok, err := s.Complete(ctx, r.ID, "finisher", `{"ok":true}`, nil); err != nil || !ok {
			tb.Fatal(ok, err)
		}
		out[r.Key] = mustGet(tb, s, r.ID)
	}
	return out
}

func mustReplay(tb testing.TB, s store.Store, f store.ReplayFilter) []store.Replayed {
	tb.Helper()
	got, err := s.Replay(ctx, f)
	if err != nil {
		tb.Fatal(err)
	}
	return got
}

func testReplay(t *testing.T, newDB NewDB) {
	t.Run("a replay copies rows as new pending rows keyed #r1, #r2; originals and receipts stay", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		body := []byte("the stored request")
		mustRecord(t, s, requestIntent("Ev1", body, "fwd"))
		done := finish(t, s)["Ev1:fwd"]
		stats0, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := mustReplay(t, s, store.ReplayFilter{IDs: []int64{done.ID}})
		if len(got) != 1 || got[0].From != done.ID || got[0].Key != "Ev1:fwd#r1" || got[0].ID == done.ID {
			t.Fatalf("replayed %+v, want one row Ev1:fwd#r1 from %d", got, done.ID)
		}
		r1 := mustGet(t, s, got[0].ID)
		if r1.Status != store.StatusPending || r1.Effect != done.Effect || r1.Payload != done.Payload ||
			r1.RequestID != "Ev1" || r1.Request == nil || string(r1.Request.Body) != string(body) ||
			r1.Attempts != 0 || r1.ClaimToken != "" || r1.Result != "" || r1.NextAttemptAt.After(db.Now(t)) {
			t.Fatalf("the replay row %+v, want pending, due now, the same effect, payload and stored request", r1)
		}
		if after := mustGet(t, s, done.ID); after.Status != store.StatusDone || after.Key != done.Key ||
			after.Result != done.Result || !after.CompletedAt.Equal(done.CompletedAt) || after.Attempts != done.Attempts {
			t.Fatalf("the original changed: %+v, was %+v", after, done)
		}
		stats1, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stats1.Receipts != stats0.Receipts {
			t.Fatalf("receipts %d → %d: a replay touches no receipt", stats0.Receipts, stats1.Receipts)
		}
		// The replay row is claimed and performed like any row.
		claimed := mustClaim(t, s, "R", 10, time.Minute)
		if len(claimed) != 1 || claimed[0].Key != "Ev1:fwd#r1" || claimed[0].Request == nil {
			t.Fatalf("claimed %+v", claimed)
		}
		if ok, err := s.Complete(ctx, claimed[0].ID, "R", "", nil); err != nil || !ok {
			t.Fatal(ok, err)
		}
		// The second replay of the original, and a replay of the replay,
		// count among the original's: #r2, #r3.
		if got := mustReplay(t, s, store.ReplayFilter{IDs: []int64{done.ID}}); len(got) != 1 || got[0].Key != "Ev1:fwd#r2" {
			t.Fatalf("second replay %+v, want Ev1:fwd#r2", got)
		}
		if got := mustReplay(t, s, store.ReplayFilter{IDs: []int64{r1.ID}}); len(got) != 1 || got[0].Key != "Ev1:fwd#r3" {
			t.Fatalf("replay of the replay %+v, want Ev1:fwd#r3", got)
		}
	})

	t.Run("by route and window, of the statuses asked; dry run changes nothing", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Old", "a"))
		finish(t, s)
		db.Advance(time.Hour)
		since := db.Now(t)
		mustRecord(t, s, intent("Ev1", "a", "b"))
		mustRecord(t, s, intent("Ev2", "a"))
		mustRecord(t, s, intent("Ev3", "a"))
		rows := mustClaim(t, s, "A", 10, time.Minute)
		byKey := map[string]store.Row{}
		for _, r := range rows {
			byKey[r.Key] = r
		}
		for _, k := range []string{"Ev1:a", "Ev1:b"} {
			if ok, err := s.Complete(ctx, byKey[k].ID, "A", "", nil); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
		if res, err := s.Fail(ctx, byKey["Ev2:a"].ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "gone"}); err != nil || res.Status != store.StatusParked {
			t.Fatal(res, err)
		}
		// Ev3:a stays pending (leased): never replayed by a window.
		before := all(t, s)
		f := store.ReplayFilter{Route: "a", Since: since}
		sample, n, err := s.ReplayMatching(ctx, f, 10)
		if err != nil || n != 1 || len(sample) != 1 || sample[0].Key != "Ev1:a" {
			t.Fatalf("matching done rows of a since %v: %d %v %v, want Ev1:a", since, n, sample, err)
		}
		f.Statuses = []string{store.StatusDone, store.StatusParked}
		sample, n, err = s.ReplayMatching(ctx, f, 1)
		if err != nil || n != 2 || len(sample) != 1 || sample[0].Key != "Ev1:a" {
			t.Fatalf("matching done and parked, limit 1: %d %v %v", n, sample, err)
		}
		if after := all(t, s); len(after) != len(before) {
			t.Fatalf("a dry run changed the outbox: %d rows → %d", len(before), len(after))
		}
		got := mustReplay(t, s, f)
		keys := []string{}
		for _, g := range got {
			keys = append(keys, g.Key)
		}
		if !slices.Equal(keys, []string{"Ev1:a#r1", "Ev2:a#r1"}) {
			t.Fatalf("replayed %q", keys)
		}
		// The window's end excludes what was created at or after it.
		f.Until = since
		f.Since = since.Add(-2 * time.Hour)
		if sample, n, err := s.ReplayMatching(ctx, f, 10); err != nil || n != 1 || sample[0].Key != "Old:a" {
			t.Fatalf("the window before since: %d %v %v, want Old:a", n, sample, err)
		}
	})

	t.Run("refusals change nothing", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, requestIntent("Ev1", []byte("x"), "r"))
		done := finish(t, s)["Ev1:r"]
		mustRecord(t, s, intent("Ev2", "r"))
		pending, err := s.GetByKey(ctx, "Ev2:r")
		if err != nil || pending.Status != store.StatusPending {
			t.Fatalf("want a pending row, got %+v (%v)", pending, err)
		}
		now := db.Now(t)
		for _, tc := range []struct {
			name string
			f    store.ReplayFilter
		}{
			{"nothing selected", store.ReplayFilter{}},
			{"a route without since", store.ReplayFilter{Route: "r"}},
			{"ids and a route", store.ReplayFilter{IDs: []int64{done.ID}, Route: "r", Since: now}},
			{"a pending status", store.ReplayFilter{Route: "r", Since: now.Add(-time.Hour), Statuses: []string{"pending"}}},
			{"an unknown status", store.ReplayFilter{Route: "r", Since: now.Add(-time.Hour), Statuses: []string{"parkd"}}},
			{"a window that ends before it starts", store.ReplayFilter{Route: "r", Since: now, Until: now.Add(-time.Hour)}},
			{"a missing id", store.ReplayFilter{IDs: []int64{done.ID, 999999}}},
			{"a pending id", store.ReplayFilter{IDs: []int64{done.ID, pending.ID}}},
		} {
			before := all(t, s)
			_, err := s.Replay(ctx, tc.f)
			if !errors.Is(err, store.ErrFilter) {
				t.Errorf("%s: %v, want ErrFilter", tc.name, err)
			}
			if _, _, err := s.ReplayMatching(ctx, tc.f, 10); !errors.Is(err, store.ErrFilter) {
				t.Errorf("%s: matching: %v, want ErrFilter", tc.name, err)
			}
			if after := all(t, s); len(after) != len(before) {
				t.Errorf("%s: the outbox changed", tc.name)
			}
		}
		var refused *store.ReplayRefused
		if _, err := s.Replay(ctx, store.ReplayFilter{IDs: []int64{999999, pending.ID}}); !errors.As(err, &refused) ||
			!slices.Equal(refused.Missing, []int64{999999}) || !slices.Equal(refused.Pending, []int64{pending.ID}) {
			t.Fatalf("refusal %v, want missing 999999 and pending %d named", err, pending.ID)
		}
		// The stored request of the done row is pruned: it could not be
		// performed again.
		db.Advance(72 * time.Hour)
		if _, err := s.Prune(ctx, 48*time.Hour, 30*24*time.Hour, 0); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, done.ID); got.Request != nil {
			t.Fatalf("the stored request was not pruned: %+v", got)
		}
		_, err = s.Replay(ctx, store.ReplayFilter{IDs: []int64{done.ID}})
		if !errors.As(err, &refused) || !slices.Equal(refused.NoRequest, []int64{done.ID}) {
			t.Fatalf("replay of a row whose request was pruned: %v, want it named", err)
		}
		if _, err := s.GetByKey(ctx, "Ev1:r#r1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a refused replay wrote a row: %v", err)
		}
	})

	t.Run("concurrent replays of one row on two stores number theirs one after the other", func(t *testing.T) {
		db := newDB(t)
		a := db.Open(t, store.Options{})
		b := db.Open(t, store.Options{})
		mustRecord(t, a, intent("Ev1", "r"))
		done := finish(t, a)["Ev1:r"]
		const n = 8
		var wg sync.WaitGroup
		keys := make(chan string, n)
		errs := make(chan error, n)
		for i := range n {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Go(func() {
				got, err := s.Replay(ctx, store.ReplayFilter{IDs: []int64{done.ID}})
				if err != nil {
					errs <- err
					return
				}
				keys <- got[0].Key
			})
		}
		wg.Wait()
		close(keys)
		close(errs)
		for err := range errs {
			t.Errorf("a concurrent replay failed: %v", err)
		}
		var got []string
		for k := range keys {
			got = append(got, k)
		}
		slices.Sort(got)
		var want []string
		for i := 1; i <= n; i++ {
			want = append(want, store.ReplayKey("Ev1:r", i))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("keys %q, want %q", got, want)
		}
	})
}
