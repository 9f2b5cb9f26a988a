package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// BenchmarkSweepCost is the store's share of sweeping one row, the way the
// sweep does it: claim a batch of 100 under a fresh token, then one
// CompleteBatch for the batch (the completer's write). An op is one row;
// synchronous=NORMAL keeps the disk's fsync out of the figure, so that what
// changes between two commits is the statements' own cost. cpu-µs/row is
// the process's CPU time (user + system, every goroutine: the committer's
// statements, GC) over the timed loop per row: on a shared machine it
// moves much less with the load than ns/op does.
//
//	go test -run '^$' -bench SweepCost -benchtime 20000x ./store/sqlite/
func BenchmarkSweepCost(b *testing.B) {
	s := mustOpen(b, filepath.Join(b.TempDir(), "ackd.db"), store.Options{Synchronous: "NORMAL"})
	ctx := context.Background()
	for i := range b.N {
		id := fmt.Sprintf("Ev%d", i)
		if _, err := s.RecordIntent(ctx, store.Intent{EventID: id, EventType: "message",
			Rows: []store.NewRow{{Key: id + ":r", Effect: "log", Payload: `{"route":"r"}`}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	done := 0
	for done < b.N {
		tok := fmt.Sprint("T", done)
		rows, err := s.Claim(ctx, tok, 100, time.Minute, nil)
		if err != nil || len(rows) == 0 {
			b.Fatalf("claim after %d of %d: %d rows, %v", done, b.N, len(rows), err)
		}
		cs := make([]store.Completion, len(rows))
		for i, r := range rows {
			cs[i] = store.Completion{ID: r.ID, Result: `{"status":200}`}
		}
		if _, err := s.CompleteBatch(ctx, tok, cs); err != nil {
			b.Fatal(err)
		}
		done += len(rows)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(done), "cpu-µs/row")
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "rows/s")
}

// cpuTime is the process's CPU time so far (user + system).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
