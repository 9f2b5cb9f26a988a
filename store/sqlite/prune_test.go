package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// Pruning takes at most PruneShare of the writer's time while acks are
// being recorded: each slice during which intents committed is followed by
// a pause (recorded here instead of slept); with no acks arriving, or with
// PruneShare 1, slices run back to back. Every old receipt is pruned either
// way, and no intent recorded meanwhile is lost.
func TestPrunePacesItselfWhileAcksFlow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		share     float64
		acks      bool
		wantPause bool
	}{
		{"acks flowing, default share: paused between slices", 0, true, true},
		{"no acks: back to back", 0, false, false},
		{"acks flowing, share 1: back to back", 1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			path := filepath.Join(t.TempDir(), "ackd.db")
			s := mustOpen(t, path, store.Options{Now: c.Now, PruneShare: tc.share})
			ctx := context.Background()
			mustRecord(t, s, intent("Ev0", "r"))
			db := rawDB(t, path)
			const old = 400
			insertOldReceipts(t, db, old, c.Now())
			c.Advance(72 * time.Hour)

			var mu sync.Mutex
			var pauses []time.Duration
			var recorded atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if tc.acks {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						mustRecord(t, s, intent(fmt.Sprint("EvDuring", i), "r"))
						recorded.Add(1)
					}
				})
			}
			s.SetPruneSleep(func(ctx context.Context, d time.Duration) error {
				mu.Lock()
				pauses = append(pauses, d)
				mu.Unlock()
				// Let an ack or two commit, as a real pause would.
				for n := recorded.Load(); tc.acks && recorded.Load() < n+2; {
					time.Sleep(100 * time.Microsecond)
				}
				return ctx.Err()
			})
			if tc.acks {
				for recorded.Load() < 5 {
					time.Sleep(time.Millisecond)
				}
			}
			res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 10)
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if res.Receipts != old+1 {
				t.Errorf("pruned %d receipts, want %d", res.Receipts, old+1)
			}
			mu.Lock()
			defer mu.Unlock()
			t.Logf("%d slices of 10, %d pauses, %d intents recorded meanwhile", old/10+1, len(pauses), recorded.Load())
			if !tc.wantPause {
				if len(pauses) != 0 {
					t.Errorf("%d pauses between slices, want none", len(pauses))
				}
				return
			}
			// An intent that commits in the same batch as a slice may be
			// counted just after the slice is judged: most slices, not all,
			// must be followed by a pause.
			if len(pauses) < old/10/4 {
				t.Errorf("%d pauses for %d slices while acks flowed, want most slices paused (at least a quarter)", len(pauses), old/10)
			}
			for _, d := range pauses {
				if d <= 0 || d > time.Second {
					t.Errorf("pause %v, want (0, 1s]", d)
				}
			}
			if n := count(t, db, `SELECT count(*) FROM slack_event_receipts WHERE event_id LIKE 'EvDuring%'`); int64(n) != recorded.Load() {
				t.Errorf("%d receipts of intents recorded during the prune, want %d", n, recorded.Load())
			}
		})
	}
}
