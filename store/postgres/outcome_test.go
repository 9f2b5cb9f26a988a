package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/internal/tcpproxy"
	"github.com/ackd/ackd/store"
)

// TestCommitReplyLost: the server commits, its answer to COMMIT never
// arrives, and the store asks pg_xact_status instead of reporting a failure
// that did not happen.
func TestCommitReplyLost(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()

	t.Run("an intent whose COMMIT reply is lost is reported committed, and first", func(t *testing.T) {
		direct, proxied, p := pgtest.Proxied(t)
		s := mustOpen(t, proxied, store.Options{})
		if _, err := s.RecordIntent(context.Background(), intent("EvWarm")); err != nil {
			t.Fatal(err)
		}
		p.DropReplyAfter(tcpproxy.PGCommit)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		in := intent("EvLost")
		in.ResolveBy = time.Now().Add(5 * time.Second)
		first, err := s.RecordIntent(ctx, in)
		if err != nil || !first {
			t.Fatalf("RecordIntent = %v, %v; want first, nil (the server committed)", first, err)
		}
		if n := pgtest.Count(t, direct, `SELECT count(*) FROM outbox WHERE idempotency_key = 'EvLost:r'`); n != 1 {
			t.Fatalf("rows = %d, want 1", n)
		}
	})

	t.Run("a completion whose COMMIT reply is lost is reported held", func(t *testing.T) {
		direct, proxied, p := pgtest.Proxied(t)
		s := mustOpen(t, proxied, store.Options{})
		if _, err := s.RecordIntent(context.Background(), intent("EvC")); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Claim(context.Background(), "tok", 10, time.Minute, nil)
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v, %v", rows, err)
		}
		p.DropReplyAfter(tcpproxy.PGCommit)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		held, err := s.Complete(ctx, rows[0].ID, "tok", "ok", nil)
		if err != nil || !held {
			t.Fatalf("Complete = %v, %v; want held, nil", held, err)
		}
		if n := pgtest.Count(t, direct, `SELECT count(*) FROM outbox WHERE status = 'done'`); n != 1 {
			t.Fatalf("done rows = %d, want 1", n)
		}
	})

}
