package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Prune deletes receipts received more than receipts ago and done rows
// completed more than done ago, in batches of at most batch rows, each batch
// its own short transaction so the ack path is never held up for long.
// Pending and parked rows are never pruned.
func (s *Store) Prune(ctx context.Context, receipts, done time.Duration, batch int) (PruneResult, error) {
	if batch <= 0 {
		batch = 1000
	}
	var out PruneResult
	now := s.opts.Now()
	n, err := s.deleteBatches(ctx, batch,
		`DELETE FROM slack_event_receipts WHERE rowid IN (
		   SELECT rowid FROM slack_event_receipts WHERE received_at < ? LIMIT ?)`,
		ms(now.Add(-receipts)))
	out.Receipts = n
	if err != nil {
		return out, fmt.Errorf("prune receipts: %w", err)
	}
	n, err = s.deleteBatches(ctx, batch,
		`DELETE FROM outbox WHERE id IN (
		   SELECT id FROM outbox WHERE status = 'done' AND completed_at < ? LIMIT ?)`,
		ms(now.Add(-done)))
	out.Done = n
	if err != nil {
		return out, fmt.Errorf("prune done rows: %w", err)
	}
	// A stored request outlives its receipt for as long as a row that may
	// still be performed (pending, or parked for an operator) needs it.
	n, err = s.deleteBatches(ctx, batch,
		`DELETE FROM slack_requests WHERE rowid IN (
		   SELECT rowid FROM slack_requests AS q
		    WHERE q.received_at < ?
		      AND NOT EXISTS (SELECT 1 FROM outbox AS o INDEXED BY outbox_request_id
		                       WHERE o.request_id = q.event_id AND o.request_id IS NOT NULL
		                         AND o.status IN ('pending', 'parked'))
		    LIMIT ?)`,
		ms(now.Add(-receipts)))
	out.Requests = n
	if err != nil {
		return out, fmt.Errorf("prune stored requests: %w", err)
	}
	return out, nil
}

func (s *Store) deleteBatches(ctx context.Context, batch int, q string, cutoff int64) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, q, cutoff, batch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += n
		if err != nil || n < int64(batch) {
			return total, err
		}
	}
}
