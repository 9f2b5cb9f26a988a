package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// Issue 31.2: the claim reads the pending rows off outbox_claimable with
// or without a paused route; the pause adds a filter (the route looked up
// in the pauses), not a scan of the outbox.
func TestClaimPlanWithPauses(t *testing.T) {
	u := pgtest.URL(t)
	s := mustOpen(t, u, store.Options{})
	ctx := context.Background()
	pgtest.Exec(t, u, `INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at)
		SELECT 'Ev' || i || ':r', 'log', '{"route":"r' || (i % 4) || '"}', i, i FROM generate_series(1, 20000) i`)
	pgtest.Exec(t, u, `UPDATE outbox SET status = 'done' WHERE id % 10 <> 0`)
	pgtest.Exec(t, u, `ANALYZE outbox`)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	plan := func() string {
		t.Helper()
		rows, err := conn.Query(ctx, "EXPLAIN "+postgres.ClaimSQL, int64(0), "T", int64(60000), 25, nil, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		return strings.Join(lines, "\n")
	}
	for _, paused := range []bool{false, true} {
		if paused {
			if _, err := s.PauseRoute(ctx, "r1", "test"); err != nil {
				t.Fatal(err)
			}
		}
		p := plan()
		t.Logf("paused=%v:\n%s", paused, p)
		if !strings.Contains(p, "outbox_claimable") || strings.Contains(p, "Seq Scan on outbox") {
			t.Errorf("paused=%v: the claim does not read outbox_claimable:\n%s", paused, p)
		}
	}
}
