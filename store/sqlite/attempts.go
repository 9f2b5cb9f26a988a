package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ackd/ackd/store"
)

// Attempts (issue 31). A row's attempts live in outbox_attempts (schema.sql,
// migration 13), keyed by (row, claim token), deleted with their row by
// ON DELETE CASCADE. Complete, CompleteBatch and Fail each write theirs with
// ONE statement in their own group-commit op, after the fenced UPDATE has
// told them whether the lease held: done/retry/parked, or fenced. An
// attempt whose claimer never said how it ended is written as unknown by
// the trigger outbox_attempt_unknown, inside the statement of the claim (or
// the discard) that takes the row from the expired lease: only that
// statement still sees the old lease, and the ack path is untouched.

// attemptSQL records one attempt of row ?1 by claim ?2: ?3 started, ?4
// ended, ?5 outcome, ?6 error, ?7 status, ?8 result (NULL when empty). n
// is the row's next number. A row that no longer exists (pruned after a
// discard) gets no attempt. An attempt the claim trigger recorded as
// unknown (the same claim) is ended instead, keeping its number and start.
const attemptSQL = `INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, ended_at, outcome, error, status, result)
SELECT o.id, ?2, coalesce((SELECT max(p.n) FROM outbox_attempts AS p WHERE p.row_id = ?1), 0) + 1,
       ?3, ?4, ?5, ?6, ?7, ?8
  FROM outbox AS o WHERE o.id = ?1
ON CONFLICT (row_id, claim_token) DO UPDATE
   SET ended_at = excluded.ended_at, outcome = excluded.outcome, error = excluded.error,
       status = excluded.status, result = excluded.result`

// attemptsSQL is attemptSQL for many rows of one claim (CompleteBatch):
// ?1 claim, ?2 ended, ?3 a JSON array of {"id", "s" started, "o" outcome,
// "st" status, "r" result} (a missing key is NULL). WHERE true: SQLite's
// parser needs it before an upsert on INSERT … SELECT … JOIN.
const attemptsSQL = `INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, ended_at, outcome, error, status, result)
SELECT o.id, ?1, coalesce((SELECT max(p.n) FROM outbox_attempts AS p WHERE p.row_id = o.id), 0) + 1,
       a.value ->> 's', ?2, a.value ->> 'o', NULL, a.value ->> 'st', a.value ->> 'r'
  FROM json_each(?3) AS a JOIN outbox AS o ON o.id = a.value ->> 'id'
 WHERE true
ON CONFLICT (row_id, claim_token) DO UPDATE
   SET ended_at = excluded.ended_at, outcome = excluded.outcome, error = excluded.error,
       status = excluded.status, result = excluded.result`

// recordAttempt runs attemptSQL in tx.
func (s *Store) recordAttempt(ctx context.Context, tx *sql.Tx, id int64, token string, now int64, outcome, errText string, a store.AttemptNote) error {
	if s.st.attempt == nil {
		return nil // a schema before attempts (see prepare)
	}
	start := now
	if !a.StartedAt.IsZero() {
		start = ms(a.StartedAt)
	}
	_, err := tx.StmtContext(ctx, s.st.attempt).ExecContext(ctx, id, token, start, now, outcome,
		nullString(errText), nullString(a.Status), nullString(a.Result))
	if err != nil {
		return fmt.Errorf("record attempt: %w", err)
	}
	return nil
}

// recordAttempts runs attemptsSQL in tx for done's rows: done, or fenced
// where held is false.
func (s *Store) recordAttempts(ctx context.Context, tx *sql.Tx, token string, now int64, done []Completion, held []bool) error {
	if s.st.attempts == nil {
		return nil // a schema before attempts (see prepare)
	}
	type item struct {
		ID      int64  `json:"id"`
		Start   int64  `json:"s"`
		Outcome string `json:"o"`
		Status  string `json:"st,omitempty"`
		Result  string `json:"r,omitempty"`
	}
	items := make([]item, len(done))
	for i, c := range done {
		it := item{ID: c.ID, Start: now, Outcome: store.AttemptDone, Status: c.Attempt.Status, Result: c.Attempt.Result}
		if !c.Attempt.StartedAt.IsZero() {
			it.Start = ms(c.Attempt.StartedAt)
		}
		if !held[i] {
			it.Outcome = store.AttemptFenced
		}
		items[i] = it
	}
	b, err := json.Marshal(items)
	if err != nil {
		return err
	}
	if _, err := tx.StmtContext(ctx, s.st.attempts).ExecContext(ctx, token, now, string(b)); err != nil {
		return fmt.Errorf("record attempts: %w", err)
	}
	return nil
}

func nullString(v string) sql.NullString { return sql.NullString{String: v, Valid: v != ""} }

// Attempts returns row id's attempts, oldest first, read through the
// table's key (row_id first). A database migrated before attempts existed
// (a read-only inspection of an older file) has none.
func (s *Store) Attempts(ctx context.Context, id int64) ([]store.Attempt, error) {
	res, err := s.r.QueryContext(ctx, `SELECT n, started_at, ended_at, outcome, error, status, result
		  FROM outbox_attempts WHERE row_id = ? ORDER BY n, started_at, claim_token`, id)
	if err != nil && !noAttemptsTable(err) {
		return nil, fmt.Errorf("attempts of outbox row %d: %w", id, err)
	}
	var out []store.Attempt
	if err == nil {
		defer res.Close()
		for res.Next() {
			var (
				a                     store.Attempt
				n                     int
				start                 int64
				end                   sql.NullInt64
				errText, status, resv sql.NullString
			)
			if err := res.Scan(&n, &start, &end, &a.Outcome, &errText, &status, &resv); err != nil {
				return nil, fmt.Errorf("attempts of outbox row %d: %w", id, err)
			}
			// Numbered by their order: two claims racing to record the
			// same number cannot show it twice.
			a.RowID, a.N = id, len(out)+1
			a.StartedAt, a.EndedAt = time.UnixMilli(start), fromMS(end)
			a.Error, a.Status, a.Result = errText.String, status.String, resv.String
			out = append(out, a)
		}
		if err := res.Err(); err != nil {
			return nil, fmt.Errorf("attempts of outbox row %d: %w", id, err)
		}
	}
	// The row's count and first claim: attempts it counts from before the
	// history was kept are listed as unrecorded (an upgraded row).
	var (
		counted        int
		created        int64
		firstClaimedAt sql.NullInt64
	)
	q := `SELECT attempts, created_at, first_claimed_at FROM outbox WHERE id = ?`
	if s.readColumns != rowColumns {
		q = `SELECT attempts, created_at, NULL FROM outbox WHERE id = ?` // before first_claimed_at
	}
	err = s.r.QueryRowContext(ctx, q, id).Scan(&counted, &created, &firstClaimedAt)
	if errors.Is(err, sql.ErrNoRows) {
		if len(out) > 0 {
			return out, nil // pruned since the history was read
		}
		return nil, fmt.Errorf("outbox row %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("attempts of outbox row %d: %w", id, err)
	}
	start := time.UnixMilli(created)
	if firstClaimedAt.Valid {
		start = time.UnixMilli(firstClaimedAt.Int64)
	}
	if out == nil {
		out = []store.Attempt{}
	}
	return store.WithUnrecorded(out, id, counted, start), nil
}

// noAttemptsTable: the schema predates outbox_attempts.
func noAttemptsTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table: outbox_attempts")
}
