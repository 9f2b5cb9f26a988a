package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

type intentReq struct {
	ctx  context.Context
	in   Intent
	done chan intentRes // buffered: the committer never blocks on a caller that gave up
}

type intentRes struct {
	first bool
	err   error
}

// RecordIntent commits the receipt and the outbox rows of one accepted Slack
// request and reports whether this call was the first delivery of
// in.EventID. It returns only after the commit (or its failure).
//
// The receipt is `INSERT … ON CONFLICT (event_id) DO NOTHING` followed by
// `SELECT changes()` on the same connection in the same transaction: the
// database, not a prior read, decides the winner. The outbox inserts run
// unconditionally; their own UNIQUE key makes a redelivery add nothing.
//
// Intents arriving together share one BEGIN IMMEDIATE transaction (group
// commit), one fsync for all of them. Each intent runs inside its own
// SAVEPOINT, so one whose statements fail is rolled back alone and only its
// caller gets the error. If ctx ends first, RecordIntent returns ctx's error;
// the intent may still commit later, which is harmless: a redelivery finds
// the receipt and the rows already there.
func (s *Store) RecordIntent(ctx context.Context, in Intent) (first bool, err error) {
	if in.EventID == "" {
		return false, errors.New("record intent: empty event id")
	}
	req := &intentReq{ctx: ctx, in: in, done: make(chan intentRes, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return false, ErrClosed
	}
	select {
	case s.intents <- req:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return false, fmt.Errorf("record intent %s: %w", in.EventID, ctx.Err())
	}
	select {
	case res := <-req.done:
		if res.err != nil {
			return false, fmt.Errorf("record intent %s: %w", in.EventID, res.err)
		}
		return res.first, nil
	case <-ctx.Done():
		return false, fmt.Errorf("record intent %s: %w", in.EventID, ctx.Err())
	}
}

// committer drains the intent queue into group commits until Close.
func (s *Store) committer() {
	defer s.wg.Done()
	batch := make([]*intentReq, 0, s.opts.MaxBatch)
	for req := range s.intents {
		batch = append(batch[:0], req)
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case r, ok := <-s.intents:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.commitBatch(batch)
		clear(batch)
	}
}

// commitBatch records a group of intents in one transaction and answers each.
func (s *Store) commitBatch(batch []*intentReq) {
	results := make([]intentRes, len(batch))
	live := batch[:0:0]
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			// The caller already answered 500; Slack will retry.
			results[i].err = err
			continue
		}
		live = append(live, r)
	}
	if len(live) > 0 {
		// The transaction outlives any one caller's deadline on purpose: a
		// commit after a caller gave up is harmless, a torn batch is not.
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.BusyTimeout+30*time.Second)
		now := ms(s.opts.Now())
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			for i, r := range batch {
				if results[i].err != nil {
					continue
				}
				results[i].first, results[i].err = recordOne(ctx, tx, r.in, now)
			}
			return nil
		})
		cancel()
		if err != nil {
			for i := range results {
				if results[i].err == nil {
					results[i].err = err
				}
			}
		}
	}
	for i, r := range batch {
		r.done <- results[i]
	}
}

// recordOne records one intent inside its own savepoint of the batch
// transaction; on failure it rolls back to the savepoint, leaving the rest of
// the batch intact.
func recordOne(ctx context.Context, tx *sql.Tx, in Intent, now int64) (first bool, err error) {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT intent"); err != nil {
		return false, err
	}
	defer func() {
		if err != nil {
			_, rbErr := tx.ExecContext(ctx, "ROLLBACK TO intent")
			err = errors.Join(err, rbErr)
		}
		if _, relErr := tx.ExecContext(ctx, "RELEASE intent"); relErr != nil && err == nil {
			err = relErr
		}
	}()
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO slack_event_receipts (event_id, event_type, received_at)
		 VALUES (?, ?, ?)
		 ON CONFLICT (event_id) DO NOTHING`,
		in.EventID, in.EventType, now); err != nil {
		return false, fmt.Errorf("insert receipt: %w", err)
	}
	var changes int
	if err := tx.QueryRowContext(ctx, "SELECT changes()").Scan(&changes); err != nil {
		return false, fmt.Errorf("select changes: %w", err)
	}
	if err := insertRows(ctx, tx, in.Rows, now); err != nil {
		return false, err
	}
	return changes == 1, nil
}

// insertRows enqueues outbox rows, idempotently by key.
func insertRows(ctx context.Context, tx *sql.Tx, rows []NewRow, now int64) error {
	for _, r := range rows {
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at)
			 VALUES (?, ?, ?, ?, ?)
			 ON CONFLICT (idempotency_key) DO NOTHING`,
			r.Key, r.Effect, r.Payload, now, now); err != nil {
			return fmt.Errorf("insert outbox row %s: %w", r.Key, err)
		}
	}
	return nil
}
