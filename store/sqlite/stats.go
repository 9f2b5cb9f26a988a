package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// QueueCountsSQL counts outbox rows by status, each from its partial index.
const QueueCountsSQL = `SELECT
	(SELECT count(*) FROM outbox WHERE status = 'pending'),
	(SELECT count(*) FROM outbox WHERE status = 'done'),
	(SELECT count(*) FROM outbox WHERE status = 'parked'),
	(SELECT count(*) FROM outbox WHERE status = 'discarded')`

// DueSQL counts, by effect, the pending rows due at ?1 and under no live
// lease: the due end of the pending index, rows a sweep would take now
// (not those of a paused route: no sweep takes them).
const DueSQL = dueWhere + notPausedTerm + dueGroupBy

// dueSQLBeforePauses is DueSQL on a schema without route pauses (a
// read-only store on an older file).
const dueSQLBeforePauses = dueWhere + dueGroupBy

const dueWhere = `SELECT effect, count(*) FROM outbox
 WHERE status = 'pending' AND next_attempt_at <= ?1
   AND (claim_token IS NULL OR claim_expires_at IS NULL OR claim_expires_at <= ?1)`

const dueGroupBy = `
 GROUP BY effect`

// Queue counts outbox rows by status (from their indexes) and measures the
// oldest pending row.
func (s *Store) Queue(ctx context.Context) (Queue, error) {
	var q Queue
	// Each count reads only its status's partial index (schema.sql).
	if err := s.r.QueryRowContext(ctx, QueueCountsSQL).Scan(&q.Pending, &q.Done, &q.Parked, &q.Discarded); err != nil {
		return q, fmt.Errorf("queue stats: %w", err)
	}
	var oldest sql.NullInt64
	q1 := `SELECT min(created_at) FROM outbox WHERE status = 'pending'`
	if s.routePauses {
		q1 += notPausedTerm // the oldest row no pause holds (store.Queue)
	}
	if err := s.r.QueryRowContext(ctx, q1).Scan(&oldest); err != nil {
		return q, fmt.Errorf("queue stats: %w", err)
	}
	if oldest.Valid {
		q.OldestPending = max(0, s.opts.Now().Sub(time.UnixMilli(oldest.Int64)))
	}
	return q, nil
}

// Stats returns the queue plus receipt and lease counts.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	q, err := s.Queue(ctx)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Queue: q}
	now := ms(s.opts.Now())
	err = s.r.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM slack_event_receipts),
		(SELECT count(*) FROM slack_event_receipts
		  WHERE (event_id >= 'msg:' AND event_id < 'msg;') OR (event_id >= 'mention:' AND event_id < 'mention;')),
		(SELECT count(*) FROM outbox WHERE status = 'pending' AND claim_expires_at > ?),
		(SELECT user_version FROM pragma_user_version)`, now).
		Scan(&st.Receipts, &st.Recovered, &st.Leased, &st.SchemaVersion)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	due := DueSQL
	if !s.routePauses {
		due = dueSQLBeforePauses
	}
	res, err := s.r.QueryContext(ctx, due, now)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	defer res.Close()
	st.Due = map[string]int64{}
	for res.Next() {
		var effect string
		var n int64
		if err := res.Scan(&effect, &n); err != nil {
			return Stats{}, fmt.Errorf("stats: %w", err)
		}
		st.Due[effect] = n
	}
	if err := res.Err(); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	return st, nil
}

// HasReceipt reports whether a receipt exists for eventID.
func (s *Store) HasReceipt(ctx context.Context, eventID string) (bool, error) {
	var n int
	err := s.r.QueryRowContext(ctx,
		`SELECT count(*) FROM slack_event_receipts WHERE event_id = ?`, eventID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("has receipt: %w", err)
	}
	return n > 0, nil
}

// CheckWrite commits a real one-row write: the health check. It fails when
// another process holds the write lock past ctx's deadline, or the file or
// its WAL cannot be written (a write that changes no page would commit
// without touching the disk and miss that).
func (s *Store) CheckWrite(ctx context.Context) error {
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO ackd_health (id, checked_at) VALUES (1, ?)
			 ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at`, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("health write: %w", classify(err))
	}
	return nil
}

// IntegrityCheck runs PRAGMA integrity_check and returns its first line ("ok").
func (s *Store) IntegrityCheck(ctx context.Context) (string, error) {
	var v string
	err := s.r.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&v)
	return v, err
}

// CheckEvents verifies, after a load test, that every acked event id has a
// receipt and an outbox row.
func (s *Store) CheckEvents(ctx context.Context, ids []string) (EventCheck, error) {
	var out EventCheck
	conn, err := s.r.Conn(ctx)
	if err != nil {
		return out, err
	}
	defer conn.Close()
	stmt, err := conn.PrepareContext(ctx, `SELECT
		EXISTS (SELECT 1 FROM slack_event_receipts WHERE event_id = ?1),
		EXISTS (SELECT 1 FROM outbox WHERE idempotency_key > ?1 || ':' AND idempotency_key < ?1 || ';')`)
	if err != nil {
		return out, err
	}
	defer stmt.Close()
	for _, id := range ids {
		var receipt, rows bool
		if err := stmt.QueryRowContext(ctx, id).Scan(&receipt, &rows); err != nil {
			return out, fmt.Errorf("check event %s: %w", id, err)
		}
		out.Add(id, receipt, rows)
	}
	return out, nil
}
