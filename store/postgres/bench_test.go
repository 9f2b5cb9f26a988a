package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
)

// BenchmarkClaimComplete is SQLite's benchmark of the same name on
// PostgreSQL: claim a batch, then complete its rows fenced by the token,
// one Complete per row or one CompleteBatch per claim; an op is one row.
//
//	source /work/dev/devenv.sh   # ACKD_TEST_POSTGRES_URL
//	go test -run '^$' -bench ClaimComplete -benchtime 5000x ./store/postgres/
func BenchmarkClaimComplete(b *testing.B) {
	pgtest.Need(b)
	for _, batch := range []int{25, 100} {
		for _, mode := range []string{"per-row", "batched"} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, mode), func(b *testing.B) {
				benchClaimComplete(b, batch, mode == "batched")
			})
		}
	}
}

func benchClaimComplete(b *testing.B, batch int, batched bool) {
	s := mustOpen(b, pgtest.URL(b), store.Options{})
	ctx := context.Background()
	for i := range b.N {
		id := fmt.Sprintf("Ev%d", i)
		if _, err := s.RecordIntent(ctx, store.Intent{EventID: id, EventType: "message",
			Rows: []store.NewRow{{Key: id + ":r", Effect: "log", Payload: `{}`}}}); err != nil {
			b.Fatal(err)
		}
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
