package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// Issue 38 §2: rows an older ackd left (schema 14) read consistently after
// the upgrade to 15, and their requests are numbered on from what the
// older ackd sent. A done row counted before attempt history existed lists
// that attempt as unrecorded (not "attempts 1" beside no attempt); a
// pending row failed twice is numbered 3 next; a row whose older claimer
// died is taken over with its death recorded, counted, and the request
// numbered past it.
func TestUpgradedRowsReadConsistently(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	path := filepath.Join(t.TempDir(), "ackd.db")
	full := schema(t)
	db := singleConn(t, path)
	migrateRaw(t, db, schemaThrough(t, full, 14))
	for _, q := range []string{
		// Done on its first attempt, before attempt history.
		`INSERT INTO outbox (id, idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, completed_at, first_claimed_at)
		 VALUES (1, 'EvA:r', 'log', '{"route":"r"}', 'done', 1, 0, 0, 1, 0)`,
		// Failed twice under the older ackd, with its history.
		`INSERT INTO outbox (id, idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, first_claimed_at, last_error)
		 VALUES (2, 'EvB:r', 'log', '{"route":"r"}', 'pending', 2, 0, 0, 0, 'boom')`,
		`INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, ended_at, outcome, error)
		 VALUES (2, 'O1', 1, 0, 1, 'retry', 'boom'), (2, 'O2', 2, 2, 3, 'retry', 'boom')`,
		// Failed once, then claimed by the older ackd, which died: its lease ran out.
		`INSERT INTO outbox (id, idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, first_claimed_at,
		                    claim_token, claim_expires_at, claim_lease_ms)
		 VALUES (3, 'EvC:r', 'log', '{"route":"r"}', 'pending', 1, 0, 0, 0, 'OLD', 10, 10)`,
		`INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, ended_at, outcome) VALUES (3, 'O3', 1, 0, 1, 'retry')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s := mustOpen(t, path, store.Options{Now: c.Now})
	got, err := s.Attempts(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Get(ctx, 1); len(got) != r.Attempts || len(got) != 1 || got[0].N != 1 || got[0].Outcome != store.AttemptUnrecorded || got[0].Error == "" {
		t.Fatalf("done row from before: attempts %d beside %+v; want one unrecorded attempt", r.Attempts, got)
	}
	if got, _ := s.Attempts(ctx, 2); len(got) != 2 || got[0].Outcome != store.AttemptRetry {
		t.Fatalf("row 2's recorded history %+v: want it as it was", got)
	}
	rows := mustClaim(t, s, "NEW", 10, time.Minute)
	if len(rows) != 2 {
		t.Fatalf("claimed %+v, want rows 2 and 3", rows)
	}
	if r := rows[0]; r.ID != 2 || r.Deliveries != 3 || r.Attempts != 2 {
		t.Errorf("row 2 claimed as request %d with %d attempts; want 3 (the older ackd sent 1 and 2) and 2", r.Deliveries, r.Attempts)
	}
	if r := rows[1]; r.ID != 3 || r.Deliveries != 3 || r.Attempts != 2 {
		t.Errorf("row 3 claimed as request %d with %d attempts; want 3 (1 failed, 2 died) and 2 (the death counted)", r.Deliveries, r.Attempts)
	}
	if got, _ := s.Attempts(ctx, 3); len(got) != 2 || got[1].Outcome != store.AttemptUnknown {
		t.Errorf("row 3's history %+v: want its death recorded unknown", got)
	}
}
