package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// Issue 38 §2, as SQLite's TestUpgradedRowsReadConsistently: rows an older
// ackd left at schema 13 read consistently after migration 14, and are
// numbered on from what the older ackd sent.
func TestUpgradedRowsReadConsistently(t *testing.T) {
	u := pgtest.URL(t)
	ms, err := store.Migrations(postgres.Schema)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, u, `CREATE TABLE ackd_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms[:13] {
		pgtest.Exec(t, u, m.SQL)
		pgtest.Exec(t, u, `INSERT INTO ackd_migrations (version) VALUES ($1)`, m.Version)
	}
	for _, q := range []string{
		`INSERT INTO outbox (id, idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, completed_at, first_claimed_at)
		 VALUES (1, 'EvA:r', 'log', '{"route":"r"}', 'done', 1, 0, 0, 1, 0)`,
		`INSERT INTO outbox (id, idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, first_claimed_at, last_error)
		 VALUES (2, 'EvB:r', 'log', '{"route":"r"}', 'pending', 2, 0, 0, 0, 'boom')`,
		`INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, ended_at, outcome, error)
		 VALUES (2, 'O1', 1, 0, 1, 'retry', 'boom'), (2, 'O2', 2, 2, 3, 'retry', 'boom')`,
		`INSERT INTO outbox (id, idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, first_claimed_at,
		                    claim_token, claim_expires_at, claim_lease_ms)
		 VALUES (3, 'EvC:r', 'log', '{"route":"r"}', 'pending', 1, 0, 0, 0, 'OLD', 10, 10)`,
		`INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, ended_at, outcome) VALUES (3, 'O3', 1, 0, 1, 'retry')`,
	} {
		pgtest.Exec(t, u, q)
	}
	s := mustOpen(t, u, store.Options{})
	ctx := context.Background()
	got, err := s.Attempts(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Get(ctx, 1); len(got) != r.Attempts || len(got) != 1 || got[0].Outcome != store.AttemptUnrecorded {
		t.Fatalf("done row from before: attempts %d beside %+v; want one unrecorded attempt", r.Attempts, got)
	}
	rows, err := s.Claim(ctx, "NEW", 10, time.Minute, nil)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claimed %+v, %v; want rows 2 and 3", rows, err)
	}
	if r := rows[0]; r.ID != 2 || r.Deliveries != 3 || r.Attempts != 2 {
		t.Errorf("row 2 claimed as request %d with %d attempts; want 3 and 2", r.Deliveries, r.Attempts)
	}
	if r := rows[1]; r.ID != 3 || r.Deliveries != 3 || r.Attempts != 2 {
		t.Errorf("row 3 claimed as request %d with %d attempts; want 3 and 2 (the death counted)", r.Deliveries, r.Attempts)
	}
	if got, _ := s.Attempts(ctx, 3); len(got) != 2 || got[1].Outcome != store.AttemptUnknown {
		t.Errorf("row 3's history %+v: want its death recorded unknown", got)
	}
}
