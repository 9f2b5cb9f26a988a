package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// RecordIntent commits the receipt and the outbox rows of one accepted Slack
// request and reports whether this call was the first delivery of
// in.EventID. It returns only after the commit (or its failure).
//
// The receipt is `INSERT … ON CONFLICT (event_id) DO NOTHING` followed by
// `SELECT changes()` on the same connection in the same transaction: the
// database, not a prior read, decides the winner. The outbox inserts run
// unconditionally; their own UNIQUE key makes a redelivery add nothing.
// Intents arriving together are group-committed (see group.go); one whose
// statements fail fails alone.
//
// If ctx ends before the intent reaches a transaction (the write lock is
// held elsewhere past the ack budget), RecordIntent returns ctx's error and
// nothing is written, so a "not recorded" answer is true. Once the intent is
// inside a transaction, RecordIntent reports that commit's outcome even if
// ctx ends meanwhile (see inGroup).
func (s *Store) RecordIntent(ctx context.Context, in Intent) (first bool, err error) {
	if in.EventID == "" {
		return false, errors.New("record intent: empty event id")
	}
	var verdict bool
	err = s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		if _, err := tx.StmtContext(ctx, s.st.receipt).ExecContext(ctx, in.EventID, in.EventType, now); err != nil {
			return fmt.Errorf("insert receipt: %w", err)
		}
		var changes int
		if err := tx.StmtContext(ctx, s.st.changes).QueryRowContext(ctx).Scan(&changes); err != nil {
			return fmt.Errorf("select changes: %w", err)
		}
		if r := in.Request; r != nil {
			body := r.Body
			if body == nil {
				body = []byte{} // NOT NULL: an empty body is still a body
			}
			if _, err := tx.StmtContext(ctx, s.st.storeRequest).ExecContext(ctx, in.EventID, r.ContentType, body, now); err != nil {
				return fmt.Errorf("insert request: %w", err)
			}
		}
		if err := s.insertRows(ctx, tx, in.Rows, now); err != nil {
			return err
		}
		verdict = changes == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("record intent %s: %w", in.EventID, classify(err))
	}
	s.intents.Add(1)
	return verdict, nil
}

// insertRows enqueues outbox rows, idempotently by key.
func (s *Store) insertRows(ctx context.Context, tx *sql.Tx, rows []NewRow, now int64) error {
	if len(rows) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, s.st.outbox)
	for _, r := range rows {
		var reqID, token, expires, length any // NULL unless set
		if r.RequestID != "" {
			reqID = r.RequestID
		}
		if r.ClaimToken != "" {
			token, expires, length = r.ClaimToken, now+r.ClaimLease.Milliseconds(), r.ClaimLease.Milliseconds()
		}
		if _, err := st.ExecContext(ctx, r.Key, r.Effect, r.Payload, now, now, reqID, token, expires, length); err != nil {
			return fmt.Errorf("insert outbox row %s: %w", r.Key, err)
		}
	}
	return nil
}
