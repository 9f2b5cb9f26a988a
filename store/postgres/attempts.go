package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ackd/ackd/store"
)

// Attempts (issue 31), as on SQLite (store/sqlite/attempts.go): a row's
// attempts live in outbox_attempts (schema.sql, migration 12), keyed by
// (row, claim token) and deleted with their row (ON DELETE CASCADE).
// Complete and CompleteBatch record theirs inside their fenced UPDATE's own
// statement (a data-modifying WITH: done, or fenced for the rows whose
// fence failed), Fail with one more statement sent in the same pipeline
// (pgx.Batch) as its UPDATE: no round trip of its own. A Complete whose
// fence failed records fenced with one statement on that rare path. An attempt whose claimer never said how
// it ended is written as unknown by the trigger outbox_attempt_unknown,
// inside the statement of the claim (or discard) that takes the row from
// its expired lease.
//
// Numbers: n is the row's next one, read in the recording statement. A
// held completion or failure has the row locked, so its number is exact; a
// fenced one does not, and may take the same number as a concurrent
// attempt of the row. Attempts numbers what it reads in order (n, then
// start), so a history never shows a number twice.

// attemptUpsert is the INSERT that records attempts from sel, a SELECT of
// (row_id, claim_token, n, started_at, ended_at, outcome, error, status,
// result). An attempt the claim trigger recorded as unknown (the same
// claim) is ended instead, keeping its number and start.
func attemptUpsert(sel string) string {
	return `INSERT INTO outbox_attempts (row_id, claim_token, n, started_at, ended_at, outcome, error, status, result)
	` + sel + `
	ON CONFLICT (row_id, claim_token) DO UPDATE
	   SET ended_at = excluded.ended_at, outcome = excluded.outcome, error = excluded.error,
	       status = excluded.status, result = excluded.result`
}

// nextN is the next attempt number of the row whose id is the SQL
// expression id.
func nextN(id string) string {
	return `coalesce((SELECT max(p.n) FROM outbox_attempts p WHERE p.row_id = ` + id + `), 0) + 1`
}

// attemptsSQL records the attempts of one claim: $1 clock offset, $2 claim
// token, and per row $3 id, $4 start (NULL: now), $5 outcome, $6 error,
// $7 status, $8 result. A row that no longer exists gets no attempt.
var attemptsSQL = `WITH ` + clockCTE + `,
	a AS (SELECT * FROM unnest($3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::text[], $8::text[])
	                 AS a(id, started_at, outcome, error, status, result))
	` + attemptUpsert(`SELECT o.id, $2, `+nextN("o.id")+`, coalesce(a.started_at, clock.now), clock.now, a.outcome, a.error, a.status, a.result
	  FROM a JOIN outbox o ON o.id = a.id, clock`)

// attemptRecord is one row of attemptsSQL.
type attemptRecord struct {
	id      int64
	outcome string
	errText string
	note    store.AttemptNote
}

// queueAttempts adds attemptsSQL for recs to b.
func queueAttempts(b *pgx.Batch, off int64, token string, recs []attemptRecord) {
	ids := make([]int64, len(recs))
	starts := make([]*int64, len(recs))
	outcomes := make([]string, len(recs))
	errs, statuses, results := make([]*string, len(recs)), make([]*string, len(recs)), make([]*string, len(recs))
	for i, r := range recs {
		ids[i], outcomes[i] = r.id, r.outcome
		if !r.note.StartedAt.IsZero() {
			v := r.note.StartedAt.UnixMilli()
			starts[i] = &v
		}
		errs[i], statuses[i], results[i] = optional(r.errText), optional(r.note.Status), optional(r.note.Result)
	}
	b.Queue(attemptsSQL, off, token, ids, starts, outcomes, errs, statuses, results)
}

func optional(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// Attempts returns row id's attempts, oldest first, read through the
// table's key. A database whose schema predates attempts (a read-only
// inspection) has none.
func (s *Store) Attempts(ctx context.Context, id int64) ([]store.Attempt, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT n, started_at, ended_at, outcome, error, status, result
		  FROM outbox_attempts WHERE row_id = $1 ORDER BY n, started_at, claim_token`, id)
	var out []store.Attempt
	if err == nil {
		for rows.Next() {
			var (
				a                       store.Attempt
				n                       int
				start                   int64
				end                     *int64
				errText, status, result *string
			)
			if err := rows.Scan(&n, &start, &end, &a.Outcome, &errText, &status, &result); err != nil {
				rows.Close()
				return nil, fmt.Errorf("attempts of outbox row %d: %w", id, s.classify(ctx, err))
			}
			a.RowID, a.N = id, len(out)+1
			a.StartedAt, a.EndedAt = time.UnixMilli(start), fromMS(end)
			a.Error, a.Status, a.Result = deref(errText), deref(status), deref(result)
			out = append(out, a)
		}
		rows.Close()
		err = rows.Err()
	}
	if err != nil && !noAttemptsTable(err) {
		return nil, fmt.Errorf("attempts of outbox row %d: %w", id, s.classify(ctx, err))
	}
	// The row's count and first claim: attempts it counts from before the
	// history was kept are listed as unrecorded (an upgraded row).
	var (
		counted        int
		created        int64
		firstClaimedAt *int64
	)
	q := `SELECT attempts, created_at, first_claimed_at FROM outbox WHERE id = $1`
	if s.readColumns != rowColumns {
		q = `SELECT attempts, created_at, NULL::bigint FROM outbox WHERE id = $1` // before first_claimed_at
	}
	err = s.pool.QueryRow(ctx, q, id).Scan(&counted, &created, &firstClaimedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		if len(out) > 0 {
			return out, nil // pruned since the history was read
		}
		return nil, fmt.Errorf("outbox row %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("attempts of outbox row %d: %w", id, s.classify(ctx, err))
	}
	start := time.UnixMilli(created)
	if firstClaimedAt != nil {
		start = time.UnixMilli(*firstClaimedAt)
	}
	if out == nil {
		out = []store.Attempt{}
	}
	return store.WithUnrecorded(out, id, counted, start), nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// noAttemptsTable: the schema predates outbox_attempts (undefined_table).
func noAttemptsTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}
