package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ackd/ackd/store"
)

// Issue 23: upgrading a database an older ackd worked on marks the rows it
// had already attempted: a pending or parked row with a failed attempt may
// have posted, and none was attempted before its creation.
func TestMigrateMarksAttemptedRows(t *testing.T) {
	full := schema(t)
	i := strings.Index(full, "ADD COLUMN outcome_unknown")
	cut := strings.LastIndex(full[:i], "\n-- migrate: ")
	if i < 0 || cut < 0 {
		t.Fatal("no outcome_unknown migration in schema.sql")
	}
	// The database as the previous version left it, written past the store
	// (whose statements name the new columns).
	path := filepath.Join(t.TempDir(), "ackd.db")
	ms, err := store.Migrations(full[:cut])
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for _, m := range ms {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("migration %d: %v", m.Version, err)
		}
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", ms[len(ms)-1].Version)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at) VALUES
		   ('Ev1:failed', 'post', '{}', 1, 1000), ('Ev1:leased', 'post', '{}', 1, 1000), ('Ev1:fresh', 'post', '{}', 1, 1000),
		   ('Ev1:parked', 'post', '{}', 1, 1000), ('Ev1:done', 'post', '{}', 1, 1000)`,
		`UPDATE outbox SET attempts = 2, last_error = 'internal_error' WHERE idempotency_key = 'Ev1:failed'`,
		`UPDATE outbox SET claim_token = 'dead', claim_expires_at = 1 WHERE idempotency_key = 'Ev1:leased'`,
		`UPDATE outbox SET status = 'parked', attempts = 8 WHERE idempotency_key = 'Ev1:parked'`,
		`UPDATE outbox SET status = 'done', attempts = 1, completed_at = 1 WHERE idempotency_key = 'Ev1:done'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s := mustOpen(t, path, store.Options{Schema: full})
	for key, want := range map[string]struct{ unknown, stamped bool }{
		"Ev1:failed": {true, true}, "Ev1:leased": {false, true}, "Ev1:fresh": {false, false},
		"Ev1:parked": {true, true}, "Ev1:done": {false, false},
	} {
		r, err := s.GetByKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if r.OutcomeUnknown != want.unknown || r.FirstClaimedAt.IsZero() == want.stamped ||
			(want.stamped && !r.FirstClaimedAt.Equal(r.CreatedAt)) {
			t.Errorf("%s after the upgrade: unknown=%v first_claimed=%v (created %v), want %+v", key, r.OutcomeUnknown, r.FirstClaimedAt, r.CreatedAt, want)
		}
	}
}

// A read-only store on a schema from before the post confirmation columns
// (the inspection commands accept one) reads rows with them at their
// never-set values.
func TestReadOnlyWithoutConfirmColumns(t *testing.T) {
	s, path := newStore(t, nil)
	ctx := context.Background()
	mustRecord(t, s, intent("Ev1", "r"))
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw := rawDB(t, path)
	// The attempts trigger (a later migration) names a dropped column.
	if _, err := raw.Exec(fmt.Sprintf(`DROP TRIGGER outbox_attempt_unknown; ALTER TABLE outbox DROP COLUMN note; ALTER TABLE outbox DROP COLUMN first_claimed_at;
		ALTER TABLE outbox DROP COLUMN outcome_unknown; PRAGMA user_version = %d`, v-1)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	r := mustOpen(t, path, store.Options{ReadOnly: true, MinSchema: 3})
	rows, err := r.List(ctx, "", 10)
	if err != nil || len(rows) != 1 || rows[0].Key != "Ev1:r" || rows[0].OutcomeUnknown || !rows[0].FirstClaimedAt.IsZero() || rows[0].Note != "" {
		t.Fatalf("List on the older schema = %+v, %v", rows, err)
	}
	if got, err := r.Get(ctx, rows[0].ID); err != nil || got.Key != "Ev1:r" {
		t.Fatalf("Get on the older schema = %+v, %v", got, err)
	}
	if got, err := r.GetByKey(ctx, "Ev1:r"); err != nil || got.ID != rows[0].ID {
		t.Fatalf("GetByKey on the older schema = %+v, %v", got, err)
	}
}
