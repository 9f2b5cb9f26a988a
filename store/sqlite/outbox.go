package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ackd/ackd/store"
)

const rowColumns = `id, idempotency_key, effect, payload, status, attempts, claim_token,
	claim_expires_at, next_attempt_at, last_error, result, created_at, completed_at`

type scanner interface{ Scan(dest ...any) error }

func scanRow(sc scanner) (Row, error) {
	var (
		r                         Row
		token, lastErr, result    sql.NullString
		claimExp, next, completed sql.NullInt64
		created                   int64
	)
	err := sc.Scan(&r.ID, &r.Key, &r.Effect, &r.Payload, &r.Status, &r.Attempts, &token,
		&claimExp, &next, &lastErr, &result, &created, &completed)
	if err != nil {
		return Row{}, err
	}
	r.ClaimToken, r.LastError, r.Result = token.String, lastErr.String, result.String
	r.ClaimExpiresAt, r.NextAttemptAt, r.CompletedAt = fromMS(claimExp), fromMS(next), fromMS(completed)
	r.CreatedAt = time.UnixMilli(created)
	return r, nil
}

// Claim leases up to limit rows that are pending, due and free (no lease, an
// expired lease, or already leased to token) to token until now+lease, and
// returns every row the token now holds, in id order.
//
// It is ONE statement: eligibility and the stamp cannot be separated by
// another claimer. Rows already held by token come first, so re-claiming
// with the same token returns the same rows (with a renewed lease) and never
// makes one token hold more than limit rows. Free rows are taken in due
// order (next_attempt_at, id) straight off the outbox_claimable index, so a
// claim reads about limit rows however long the backlog is.
func (s *Store) Claim(ctx context.Context, token string, limit int, lease time.Duration, filter *store.ClaimFilter) ([]Row, error) {
	if token == "" {
		return nil, errors.New("claim: empty token")
	}
	if limit <= 0 || lease <= 0 {
		return nil, fmt.Errorf("claim: limit %d and lease %s must be positive", limit, lease)
	}
	var effects any // NULL: every effect
	if filter != nil && filter.Effects != nil {
		b, err := json.Marshal(filter.Effects)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		effects = string(b)
	}
	var rows []Row
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		rows = rows[:0]
		res, err := tx.StmtContext(ctx, s.st.claim).QueryContext(ctx, token, now+lease.Milliseconds(), now, limit, effects)
		if err != nil {
			return err
		}
		defer res.Close()
		for res.Next() {
			r, err := scanRow(res)
			if err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return res.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", classify(err))
	}
	slices.SortFunc(rows, func(a, b Row) int { return cmp.Compare(a.ID, b.ID) })
	return rows, nil
}

// Complete marks a row done if token still holds it, storing result and
// enqueueing followUps in the same transaction. held is false when the lease
// was lost (another token claimed the row, or it is no longer pending): then
// nothing is written and no follow-up is enqueued.
func (s *Store) Complete(ctx context.Context, id int64, token, result string, followUps []NewRow) (held bool, err error) {
	err = s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		held = false
		var res sql.NullString
		if result != "" {
			res = sql.NullString{String: result, Valid: true}
		}
		r, err := tx.StmtContext(ctx, s.st.complete).ExecContext(ctx, now, res, id, token)
		if err != nil {
			return err
		}
		n, err := r.RowsAffected() // sqlite3_changes() of this statement
		if err != nil {
			return err
		}
		if held = n == 1; !held {
			return nil
		}
		return s.insertRows(ctx, tx, followUps, now)
	})
	if err != nil {
		return false, fmt.Errorf("complete outbox row %d: %w", id, classify(err))
	}
	return held, nil
}

// Fail records a failed attempt if token still holds the row: it keeps msg
// as last_error and either reschedules the row (releasing the lease) or parks
// it. See FailKind.
func (s *Store) Fail(ctx context.Context, id int64, token string, kind FailKind, msg string, retryAfter time.Duration) (FailResult, error) {
	var out FailResult
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, nowMS int64) error {
		now := time.UnixMilli(nowMS)
		out = FailResult{}
		var attempts int
		err := tx.QueryRowContext(ctx,
			`SELECT attempts FROM outbox WHERE id = ? AND claim_token = ? AND status = 'pending'`,
			id, token).Scan(&attempts)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // lease lost
		}
		if err != nil {
			return err
		}
		out = s.opts.Next(kind, attempts, now, retryAfter)
		// Still inside BEGIN IMMEDIATE: nobody can have moved the row since
		// the read above, and the fence is repeated anyway.
		_, err = tx.ExecContext(ctx,
			`UPDATE outbox
			    SET status = ?, attempts = ?, next_attempt_at = ?, last_error = ?,
			        claim_token = NULL, claim_expires_at = NULL
			  WHERE id = ? AND claim_token = ?`,
			out.Status, out.Attempts, ms(out.NextAttemptAt), msg, id, token)
		return err
	})
	if err != nil {
		return FailResult{}, fmt.Errorf("fail outbox row %d: %w", id, classify(err))
	}
	return out, nil
}

// Get returns one row by id, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id int64) (Row, error) {
	r, err := scanRow(s.r.QueryRowContext(ctx, `SELECT `+rowColumns+` FROM outbox WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("outbox row %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("get outbox row %d: %w", id, err)
	}
	return r, nil
}

// GetByKey returns one row by idempotency key, or ErrNotFound.
func (s *Store) GetByKey(ctx context.Context, key string) (Row, error) {
	r, err := scanRow(s.r.QueryRowContext(ctx, `SELECT `+rowColumns+` FROM outbox WHERE idempotency_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, fmt.Errorf("outbox row %q: %w", key, ErrNotFound)
	}
	if err != nil {
		return Row{}, fmt.Errorf("get outbox row %q: %w", key, err)
	}
	return r, nil
}

// List returns up to limit rows, newest first, optionally of one status.
func (s *Store) List(ctx context.Context, status string, limit int) ([]Row, error) {
	if limit <= 0 {
		limit = 50
	}
	q := `SELECT ` + rowColumns + ` FROM outbox`
	args := []any{}
	if status != "" {
		q += ` WHERE status = ?`
		args = append(args, status)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)
	res, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list outbox: %w", err)
	}
	defer res.Close()
	var rows []Row
	for res.Next() {
		r, err := scanRow(res)
		if err != nil {
			return nil, fmt.Errorf("list outbox: %w", err)
		}
		rows = append(rows, r)
	}
	return rows, res.Err()
}

// Requeue puts one parked row back to pending with a fresh attempt budget,
// due now. It returns ErrNotFound if no parked row has that id.
func (s *Store) Requeue(ctx context.Context, id int64) error {
	n, err := s.requeue(ctx, `id = ? AND status = 'parked'`, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("parked outbox row %d: %w", id, ErrNotFound)
	}
	return nil
}

// RequeueParked puts every parked row back to pending and returns how many.
func (s *Store) RequeueParked(ctx context.Context) (int64, error) {
	return s.requeue(ctx, `status = 'parked'`)
}

func (s *Store) requeue(ctx context.Context, where string, args ...any) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE outbox
			    SET status = 'pending', attempts = 0, next_attempt_at = ?,
			        claim_token = NULL, claim_expires_at = NULL
			  WHERE `+where, append([]any{ms(s.opts.Now())}, args...)...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("requeue: %w", err)
	}
	return n, nil
}
