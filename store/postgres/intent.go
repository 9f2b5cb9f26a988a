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
	// $5 request_id, $6 claim token, $7 lease (ms): NULL unless the row
	// names a stored request / is written already claimed (an inline
	// attempt). A duplicate key leaves the existing row untouched.
	insertRow = `WITH ` + clockCTE + `
		INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at,
		                    request_id, claim_token, claim_expires_at, claim_lease_ms)
		SELECT $2, $3, $4, now, now, $5, $6, CASE WHEN $6::text IS NULL THEN NULL ELSE now + $7::bigint END,
		       CASE WHEN $6::text IS NULL THEN NULL ELSE $7::bigint END FROM clock
		ON CONFLICT (idempotency_key) DO NOTHING`
	insertRequest = `WITH ` + clockCTE + `
		INSERT INTO slack_requests (event_id, content_type, body, received_at)
		SELECT $2, $3, $4, now FROM clock
		ON CONFLICT (event_id) DO NOTHING`
)

// RecordIntent commits the receipt and the outbox rows of one accepted Slack
// request and reports whether this call was the first delivery of
// in.EventID. It returns only after the commit (or its failure). The
// intent's Request, if any, is stored under in.EventID in the same
// transaction (a redelivery stores nothing new).
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
	if r := in.Request; r != nil {
		body := r.Body
		if body == nil {
			body = []byte{} // NOT NULL: an empty body is still a body
		}
		b.Queue(insertRequest, off, in.EventID, r.ContentType, body)
	}
	queueRows(b, off, in.Rows)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("record intent %s: %w", in.EventID, s.classify(ctx, err))
	}
	return first, nil
}

// queueRows queues the inserts of outbox rows, idempotent by key; a row
// with a ClaimToken is written leased to it until the database's now +
// ClaimLease.
func queueRows(b *pgx.Batch, off int64, rows []store.NewRow) {
	for _, r := range rows {
		var reqID, token *string // NULL unless set
		if r.RequestID != "" {
			reqID = &r.RequestID
		}
		if r.ClaimToken != "" {
			token = &r.ClaimToken
		}
		b.Queue(insertRow, off, r.Key, r.Effect, r.Payload, reqID, token, r.ClaimLease.Milliseconds())
	}
}
