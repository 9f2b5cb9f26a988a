package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// BenchmarkClaimPausedBacklog measures a claim (25 rows, a fresh token)
// when a paused route's backlog of n rows, each with a 500-byte payload,
// is due before the rows it takes: the claim reads the pending rows in due
// order and passes over the paused ones (notPausedTerm). "none" is the
// same claim with nothing paused and no backlog ahead (the pause table
// empty: the term costs one look at it).
//
//	go test -run '^$' -bench ClaimPausedBacklog -benchtime 40x ./store/sqlite/
func BenchmarkClaimPausedBacklog(b *testing.B) {
	pad := strings.Repeat("x", 480)
	for _, n := range []int{0, 1000, 20000} {
		name := fmt.Sprintf("paused_rows=%d", n)
		if n == 0 {
			name = "none"
		}
		b.Run(name, func(b *testing.B) {
			c := newClock()
			s := mustOpen(b, filepath.Join(b.TempDir(), "ackd.db"), store.Options{Now: c.Now, Synchronous: "NORMAL"})
			ctx := context.Background()
			record := func(prefix, route string, count int) {
				for i := 0; i < count; i += 100 {
					in := store.Intent{EventID: fmt.Sprintf("%s%d", prefix, i), EventType: "message"}
					for j := i; j < min(i+100, count); j++ {
						in.Rows = append(in.Rows, store.NewRow{Key: fmt.Sprintf("%s%d:%s", prefix, j, route), Effect: "log",
							Payload: fmt.Sprintf(`{"route":%q,"pad":%q}`, route, pad)})
					}
					if _, err := s.RecordIntent(ctx, in); err != nil {
						b.Fatal(err)
					}
				}
			}
			record("Slow", "slow", n)
			c.Advance(time.Second)
			record("Fast", "fast", 25*(b.N+1))
			c.Advance(time.Second)
			if n > 0 {
				if _, err := s.PauseRoute(ctx, "slow", "bench"); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				rows, err := s.Claim(ctx, fmt.Sprint("T", i), 25, time.Minute, nil)
				if err != nil || len(rows) != 25 {
					b.Fatal(len(rows), err)
				}
			}
		})
	}
}
