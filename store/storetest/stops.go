package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// testStreamStops: a thread keeps its newest stop, compared as Slack
// timestamps (not as text); an older or repeated stop changes nothing;
// concurrent writers from two stores leave the newest; a bad ts is refused.
func testStreamStops(t *testing.T, newDB NewDB) {
	t.Run("a thread keeps its newest stop, by Slack's timestamps", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		if got, err := s.StreamStopped(ctx, "C1", "1.000001"); err != nil || got != "" {
			t.Fatalf("no stop yet: %q %v", got, err)
		}
		rec := func(ts, ev string) bool {
			t.Helper()
			newer, err := s.RecordStop(ctx, store.StreamStop{Channel: "C1", ThreadTS: "1.000001", StopTS: ts, EventID: ev})
			if err != nil {
				t.Fatal(err)
			}
			return newer
		}
		if !rec("999999999.000200", "Ev1") {
			t.Fatal("the first stop is not newer")
		}
		if rec("999999999.000200", "Ev1") || rec("999999999.000100", "Ev0") {
			t.Fatal("a repeated or older stop replaced the newest")
		}
		// Longer text, larger number: "1000000000.0" < "999999999.0" as text.
		if !rec("1000000000.000001", "Ev2") {
			t.Fatal("a newer stop (one more digit) did not replace an older one")
		}
		if got, _ := s.StreamStopped(ctx, "C1", "1.000001"); got != "1000000000.000001" {
			t.Fatalf("stop %q", got)
		}
		if got, _ := s.StreamStopped(ctx, "C1", "1.000002"); got != "" {
			t.Fatalf("another thread's stop %q", got)
		}
		_, err := s.RecordStop(ctx, store.StreamStop{Channel: "C1", ThreadTS: "1.000001", StopTS: "soon"})
		if !errors.Is(err, store.ErrFilter) {
			t.Fatalf("a bad ts: %v", err)
		}
	})
	t.Run("stops are pruned on done rows' retention", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		if _, err := s.RecordStop(ctx, store.StreamStop{Channel: "C1", ThreadTS: "1.1", StopTS: "1700000000.000001", EventID: "Ev"}); err != nil {
			t.Fatal(err)
		}
		if res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 10); err != nil || res.Stops != 0 {
			t.Fatalf("fresh stop pruned: %+v %v", res, err)
		}
		db.Advance(8 * 24 * time.Hour)
		if res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 10); err != nil || res.Stops != 1 {
			t.Fatalf("old stop not pruned: %+v %v", res, err)
		}
		if got, _ := s.StreamStopped(ctx, "C1", "1.1"); got != "" {
			t.Fatalf("stop %q after its prune", got)
		}
	})
	t.Run("concurrent stops from two stores leave the newest", func(t *testing.T) {
		db := newDB(t)
		a, b := db.Open(t, store.Options{}), db.Open(t, store.Options{})
		var wg sync.WaitGroup
		for i := range 20 {
			st := a
			if i%2 == 1 {
				st = b
			}
			wg.Go(func() {
				ts := fmt.Sprintf("1700000000.%06d", i)
				if _, err := st.RecordStop(ctx, store.StreamStop{Channel: "C1", ThreadTS: "1.1", StopTS: ts, EventID: ts}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got, _ := a.StreamStopped(ctx, "C1", "1.1"); got != "1700000000.000019" {
			t.Fatalf("stop %q, want the newest", got)
		}
	})
}
