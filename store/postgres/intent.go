package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ackd/ackd/store"
)

const (
	insertReceipt = `WITH ` + clockCTE + `
		INSERT INTO slack_event_receipts (event_id, event_type, received_at)
		SELECT $2, $3, now FROM clock
		ON CONFLICT (event_id) DO NOTHING`
	insertRow = `WITH ` + clockCTE + `
		INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at)
		SELECT $2, $3, $4, now, now FROM clock
		ON CONFLICT (idempotency_key) DO NOTHING`
)

// RecordIntent commits the receipt and the outbox rows of one accepted Slack
// request and reports whether this call was the first delivery of
// in.EventID. It returns only after the commit (or its failure).
//
// The receipt is INSERT … ON CONFLICT (event_id) DO NOTHING, and its row
// count is the verdict: of N concurrent deliveries on any number of
// replicas, the one whose insert the unique index accepted is first (the
// others wait for its transaction and then insert nothing). The statements
// go to the server as one pipelined batch with a single Sync, which
// PostgreSQL runs as one implicit transaction: one round trip, all or
// nothing, and the answer to the Sync arrives after the commit.
//
// Each intent is its own transaction: concurrent commits on the server
// share WAL flushes (PostgreSQL's group commit), so batching intents in
// ackd would save little and couple unrelated acks' failures.
//
// If ctx ends before the answer arrived, the error wraps
// store.ErrUnavailable (the server did not answer in time); the intent may
// or may not have committed, and Slack's retry is then deduplicated.
func (s *Store) RecordIntent(ctx context.Context, in store.Intent) (first bool, err error) {
	if in.EventID == "" {
		return false, errors.New("record intent: empty event id")
	}
	if err := s.check(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("record intent %s: %w", in.EventID, err)
	}
	off := s.offset.Load()
	b := &pgx.Batch{}
	b.Queue(insertReceipt, off, in.EventID, in.EventType).Exec(func(tag pgconn.CommandTag) error {
		first = tag.RowsAffected() == 1
		return nil
	})
	queueRows(b, off, in.Rows)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("record intent %s: %w", in.EventID, s.classify(ctx, err))
	}
	return first, nil
}

func queueRows(b *pgx.Batch, off int64, rows []store.NewRow) {
	for _, r := range rows {
		b.Queue(insertRow, off, r.Key, r.Effect, r.Payload)
	}
}
