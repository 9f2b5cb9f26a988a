package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// DefaultPruneSlice is how many rows one prune slice deletes when Prune is
// given no batch size. Small on purpose: each slice is one op of a group
// commit (group.go), sharing its transaction and fsync with the intents
// waiting beside it, so an ack never waits behind more than one slice. A
// slice of old receipts touches a random page of the event-id index per row
// (Slack's ids are random): 250 rows took ~10 ms on a 1M-row database, 100
// take a few.
const DefaultPruneSlice = 100

// maxPrunePause bounds the wait between two slices (see Options.PruneShare).
const maxPrunePause = time.Second

// Prune deletes receipts received more than receipts ago and done and
// discarded rows completed more than done ago, in slices of at most batch rows (0:
// DefaultPruneSlice). Each slice is an op of the group committer, like an
// intent: acks interleave with pruning instead of queueing behind a long
// delete on the only writer connection. Pending and parked rows are never
// pruned.
func (s *Store) Prune(ctx context.Context, receipts, done time.Duration, batch int) (PruneResult, error) {
	if batch <= 0 {
		batch = DefaultPruneSlice
	}
	var out PruneResult
	now := s.opts.Now()
	n, err := s.deleteSlices(ctx, batch,
		`DELETE FROM slack_event_receipts WHERE rowid IN (
		   SELECT rowid FROM slack_event_receipts WHERE received_at < ? LIMIT ?)`,
		ms(now.Add(-receipts)))
	out.Receipts = n
	if err != nil {
		return out, fmt.Errorf("prune receipts: %w", err)
	}
	n, err = s.deleteSlices(ctx, batch,
		`DELETE FROM outbox WHERE id IN (
		   SELECT id FROM outbox WHERE status = 'done' AND completed_at < ? LIMIT ?)`,
		ms(now.Add(-done)))
	out.Done = n
	if err != nil {
		return out, fmt.Errorf("prune done rows: %w", err)
	}
	n, err = s.deleteSlices(ctx, batch,
		`DELETE FROM outbox WHERE id IN (
		   SELECT id FROM outbox WHERE status = 'discarded' AND completed_at < ? LIMIT ?)`,
		ms(now.Add(-done)))
	out.Discarded = n
	if err != nil {
		return out, fmt.Errorf("prune discarded rows: %w", err)
	}
	// A stored request outlives its receipt for as long as a row that may
	// still be performed (pending, or parked for an operator) needs it.
	n, err = s.deleteSlices(ctx, batch,
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
	// A stop matters to the stream rows asked before it: kept as long as
	// done rows are.
	n, err = s.deleteSlices(ctx, batch,
		`DELETE FROM ackd_stream_stops WHERE rowid IN (
		   SELECT rowid FROM ackd_stream_stops WHERE recorded_at < ? LIMIT ?)`,
		ms(now.Add(-done)))
	out.Stops = n
	if err != nil {
		return out, fmt.Errorf("prune stops: %w", err)
	}
	return out, nil
}

// deleteSlices runs q (cutoff, limit) as group-commit ops until a slice
// deletes fewer than batch rows.
func (s *Store) deleteSlices(ctx context.Context, batch int, q string, cutoff int64) (int64, error) {
	var total int64
	for {
		var n int64
		start, seen := time.Now(), s.intents.Load()
		err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, _ int64) error {
			res, err := tx.ExecContext(ctx, q, cutoff, batch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		if err != nil {
			if IsReadOnly(err) && !strings.Contains(err.Error(), s.path) {
				// A statement's error, which the committer does not
				// annotate: say which file refuses the write.
				err = fmt.Errorf("database %s is read-only: %w", s.path, err)
			}
			return total, err
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
		if err := s.prunePause(ctx, time.Since(start), seen); err != nil {
			return total, err
		}
	}
}

// prunePause keeps pruning to Options.PruneShare of the writer's time while
// acks are being recorded (intents committed since seen): a slice that took
// took is followed by a wait of took×(1/share − 1). The wait ends early if
// ctx does (the caller's shutdown), with ctx's error.
func (s *Store) prunePause(ctx context.Context, took time.Duration, seen int64) error {
	if s.opts.PruneShare >= 1 || s.intents.Load() == seen {
		return nil
	}
	pause := min(time.Duration(float64(took)*(1/s.opts.PruneShare-1)), maxPrunePause)
	if s.pruneSleep != nil {
		return s.pruneSleep(ctx, pause)
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
