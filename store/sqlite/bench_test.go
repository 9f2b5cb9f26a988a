package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// BenchmarkRecordIntent measures the durable pre-ack write: one receipt and
// one outbox row per event, concurrent callers group-committed.
//
//	go test -run '^$' -bench RecordIntent -benchtime 3s ./store/sqlite/
func BenchmarkRecordIntent(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, par := range []int{1, 64} {
			b.Run(fmt.Sprintf("synchronous=%s/callers=%d", sync, par), func(b *testing.B) {
				benchRecordIntent(b, sync, par, func(n int64) string { return fmt.Sprintf("Ev%d", n) })
			})
		}
	}
	// Slack's event ids are random: each insert lands on another page of
	// the key indexes.
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprintf("synchronous=NORMAL/callers=%d/ids=random", par), func(b *testing.B) {
			benchRecordIntent(b, "NORMAL", par, randomID)
		})
	}
}

// randomID is a repeatable random-looking id for n (instruction counts
// under callgrind stay comparable between runs).
func randomID(n int64) string {
	x := uint64(n) * 0x9e3779b97f4a7c15
	x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9
	return fmt.Sprintf("Ev%013X", x>>12)
}

func benchRecordIntent(b *testing.B, sync string, par int, newID func(int64) string) {
	s := mustOpen(b, filepath.Join(b.TempDir(), "ackd.db"), store.Options{Synchronous: sync})
	payload := `{"route":"r","source":"event","raw":{"type":"event_callback","event":{"type":"message","text":"hello world"}}}`
	var n atomic.Int64
	b.SetParallelism(par)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := newID(n.Add(1))
			_, err := s.RecordIntent(context.Background(), store.Intent{EventID: id, EventType: "message",
				Rows: []store.NewRow{{Key: id + ":r", Effect: "log", Payload: payload}}})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkClaimComplete measures outbox throughput: claim a batch, then
// complete its rows fenced by the token, one Complete per row or one
// CompleteBatch per claim.
//
//	go test -run '^$' -bench ClaimComplete -benchtime 3s ./store/sqlite/
func BenchmarkClaimComplete(b *testing.B) {
	for _, batch := range []int{25, 100} {
		for _, mode := range []string{"per-row", "batched"} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, mode), func(b *testing.B) {
				benchClaimComplete(b, batch, mode == "batched")
			})
		}
	}
}

func benchClaimComplete(b *testing.B, batch int, batched bool) {
	s := mustOpen(b, filepath.Join(b.TempDir(), "ackd.db"), store.Options{})
	ctx := context.Background()
	for i := range b.N {
		id := fmt.Sprintf("Ev%d", i)
		s.RecordIntent(ctx, store.Intent{EventID: id, EventType: "message",
			Rows: []store.NewRow{{Key: id + ":r", Effect: "log", Payload: `{}`}}})
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		tok := fmt.Sprint("T", done)
		rows, err := s.Claim(ctx, tok, batch, time.Minute, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(rows) == 0 {
			b.Fatalf("ran dry after %d of %d", done, b.N)
		}
		if batched {
			cs := make([]store.Completion, len(rows))
			for i, r := range rows {
				cs[i] = store.Completion{ID: r.ID}
			}
			if _, err := s.CompleteBatch(ctx, tok, cs); err != nil {
				b.Fatal(err)
			}
		} else {
			for _, r := range rows {
				if held, err := s.Complete(ctx, r.ID, tok, "", nil); err != nil || !held {
					b.Fatal(held, err)
				}
			}
		}
		done += len(rows)
	}
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkClaimLookback measures a claim over a backlog of 20,000 pending
// rows, 200 of them leased: "steady" is the common case (no look for leases
// from the future), "lookback" a claim that looks every time (the clock is
// stepped back before each), the worst case of the once-per-lease-period look.
//
//	go test -run '^$' -bench ClaimLookback -benchtime 2000x ./store/sqlite/
func BenchmarkClaimLookback(b *testing.B) {
	for _, mode := range []string{"steady", "lookback"} {
		b.Run(mode, func(b *testing.B) {
			c := newClock()
			s := mustOpen(b, filepath.Join(b.TempDir(), "ackd.db"), store.Options{Now: c.Now, Synchronous: "NORMAL"})
			ctx := context.Background()
			for i := range 20000 {
				id := fmt.Sprintf("Ev%d", i)
				if _, err := s.RecordIntent(ctx, store.Intent{EventID: id, EventType: "message",
					Rows: []store.NewRow{{Key: id + ":r", Effect: "log", Payload: `{}`}}}); err != nil {
					b.Fatal(err)
				}
			}
			c.Advance(time.Second)
			for i := range 8 {
				if _, err := s.Claim(ctx, fmt.Sprint("held", i), 25, time.Minute, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if mode == "lookback" {
					c.Advance(-time.Millisecond)
				}
				// A fresh token each time: reads past the 200 leased rows to 25 free ones.
				rows, err := s.Claim(ctx, fmt.Sprint("T", i), 25, time.Minute, nil)
				if err != nil || len(rows) != 25 {
					b.Fatal(len(rows), err)
				}
			}
		})
	}
}
