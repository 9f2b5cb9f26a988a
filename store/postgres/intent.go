package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ackd/ackd/store"
)

const (
	insertReceipt = `WITH ` + clockCTE + `
		INSERT INTO slack_event_receipts (event_id, event_type, received_at)
		SELECT $2, $3, now FROM clock
		ON CONFLICT (event_id) DO NOTHING`
	// $5 request_id, $6 claim token, $7 lease (ms): NULL unless the row
	// names a stored request / is written already claimed (an inline
	// attempt); $8 how long after now it is first due (ms, NewRow.Delay).
	// A duplicate key leaves the existing row untouched.
	insertRow = `WITH ` + clockCTE + `
		INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at,
		                    request_id, claim_token, claim_expires_at, claim_lease_ms, deliveries)
		SELECT $2, $3, $4, now + $8::bigint, now, $5, $6, CASE WHEN $6::text IS NULL THEN NULL ELSE now + $7::bigint END,
		       CASE WHEN $6::text IS NULL THEN NULL ELSE $7::bigint END,
		       CASE WHEN $6::text IS NULL THEN 0 ELSE 1 END FROM clock
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
// others wait for its transaction and then insert nothing).
//
// Two round trips: BEGIN, the transaction's id and its statements go as one
// pipelined batch; COMMIT goes alone once they all succeeded. The id is
// therefore known before COMMIT is sent, and a COMMIT whose answer does not
// come (the ack budget ran out while the server was committing, a reply
// lost on the network) is resolved with pg_xact_status until in.ResolveBy
// (commit.go): committed is success, aborted is failure, and an outcome
// still open is store.ErrCommitUnknown. Within the transaction the
// statements' statement_timeout and lock_timeout are what is left of ctx's
// time, so the server never works on an intent its caller gave up on;
// COMMIT has none (see below).
//
// Each intent is its own transaction: concurrent commits on the server
// share WAL flushes (PostgreSQL's group commit), so batching intents in
// ackd would save little and couple unrelated acks' failures.
func (s *Store) RecordIntent(ctx context.Context, in store.Intent) (first bool, err error) {
	res, err := s.recordIntent(ctx, in, nil)
	return res.First, err
}

// RecordInstallEnd is RecordIntent with end applied in the intent's
// transaction when this delivery is the first (see store.Installations).
// It takes one round trip more than RecordIntent: the receipt's verdict and
// the installation (locked FOR UPDATE) are read first, store.EndOf decides
// in ackd, and the change goes with the rows and COMMIT.
func (s *Store) RecordInstallEnd(ctx context.Context, in store.Intent, end store.InstallEnd) (store.InstallEndResult, error) {
	return s.recordIntent(ctx, in, &end)
}

// endCTE inserts the receipt and, if it was the first, locks and reads
// the installation $4 (under READ COMMITTED, FOR UPDATE waits for a
// reinstall in flight and reads what it wrote).
const endCTE = `WITH ` + clockCTE + `,
	r AS (INSERT INTO slack_event_receipts (event_id, event_type, received_at)
	      SELECT $2, $3, now FROM clock
	      ON CONFLICT (event_id) DO NOTHING RETURNING 1),
	i AS (SELECT installed_at, slack_installed_at, bot_user_id FROM ackd_installations
	       WHERE install_key = $4 AND EXISTS (SELECT 1 FROM r) FOR UPDATE)
	SELECT EXISTS (SELECT 1 FROM r), EXISTS (SELECT 1 FROM i),
	       coalesce((SELECT installed_at FROM i), 0), coalesce((SELECT slack_installed_at FROM i), 0),
	       coalesce((SELECT bot_user_id FROM i), '')`

func (s *Store) recordIntent(ctx context.Context, in store.Intent, end *store.InstallEnd) (res store.InstallEndResult, err error) {
	if in.EventID == "" {
		return res, errors.New("record intent: empty event id")
	}
	if err := s.check(); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("record intent %s: %w", in.EventID, err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	commitCtx, by := ctx, in.ResolveBy
	if dl, _ := ctx.Deadline(); !by.After(dl) {
		var ccancel context.CancelFunc
		commitCtx, ccancel, by = commitWindow(ctx)
		defer ccancel()
	}
	conn, err := s.pool.Acquire(commitCtx)
	if err != nil {
		return res, fmt.Errorf("record intent %s: %w", in.EventID, s.classify(ctx, err))
	}
	// A connection left inside a transaction (an error, an unknown
	// outcome) is closed by the pool on release, never reused.
	defer conn.Release()

	left := "0"
	if dl, ok := commitCtx.Deadline(); ok {
		left = strconv.FormatInt(max(time.Until(dl).Milliseconds(), 1), 10)
	}
	off := s.offset.Load()
	var xid string
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT pg_current_xact_id()::text, set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true)`, left).
		QueryRow(func(r pgx.Row) error {
			var a, b string
			return r.Scan(&xid, &a, &b)
		})
	var found bool
	var installed, slackInstalled int64
	var bot string
	if end == nil {
		b.Queue(insertReceipt, off, in.EventID, in.EventType).Exec(func(tag pgconn.CommandTag) error {
			res.First = tag.RowsAffected() == 1
			return nil
		})
	} else {
		b.Queue(endCTE, off, in.EventID, in.EventType, end.Key).QueryRow(func(r pgx.Row) error {
			return r.Scan(&res.First, &found, &installed, &slackInstalled, &bot)
		})
		// The verdict and the installation are needed before the rest.
		if err := conn.SendBatch(commitCtx, b).Close(); err != nil {
			rollback(conn)
			return store.InstallEndResult{}, fmt.Errorf("record intent %s: %w", in.EventID, s.classify(ctx, err))
		}
		b = &pgx.Batch{}
		if !res.First {
			res.Outcome = store.EndDuplicate
		} else {
			var slackAt time.Time
			if slackInstalled > 0 {
				slackAt = time.UnixMilli(slackInstalled)
			}
			res = store.EndOf(found, time.UnixMilli(installed), slackAt, bot, *end)
		}
		if res.Outcome == store.EndRemoved {
			b.Queue(`DELETE FROM ackd_installations WHERE install_key = $1`, end.Key)
			b.Queue(parkRows, off, end.Reason, end.Key).Exec(func(tag pgconn.CommandTag) error {
				res.Parked = tag.RowsAffected()
				return nil
			})
		}
	}
	if r := in.Request; r != nil {
		body := r.Body
		if body == nil {
			body = []byte{} // NOT NULL: an empty body is still a body
		}
		b.Queue(insertRequest, off, in.EventID, r.ContentType, body)
	}
	queueRows(b, off, in.Rows)
	// COMMIT runs without the statements' server-side timeout: how long it
	// waits (for a synchronous standby's confirmation) is bounded on this
	// side only (commitCtx), and what became of it is then asked with
	// pg_xact_status. (When pgx gives up it sends a cancel request, which
	// ends a standby wait with the transaction committed locally.)
	b.Queue(`SELECT set_config('statement_timeout', '0', true)`)
	if err := conn.SendBatch(commitCtx, b).Close(); err != nil {
		// COMMIT was never sent: the transaction cannot commit.
		rollback(conn)
		return store.InstallEndResult{}, fmt.Errorf("record intent %s: %w", in.EventID, s.classify(ctx, err))
	}
	_, err = conn.Exec(commitCtx, `COMMIT`)
	if err == nil {
		return res, nil
	}
	if err = s.settle(ctx, err, xid, by); err != nil {
		return store.InstallEndResult{}, fmt.Errorf("record intent %s: commit: %w", in.EventID, s.classify(ctx, err))
	}
	return res, nil
}

// rollback ends conn's open transaction, if the connection is still there,
// so that the pool can reuse it (the pool closes one left in a transaction).
func rollback(conn *pgxpool.Conn) {
	if conn.Conn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, `ROLLBACK`)
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
		b.Queue(insertRow, off, r.Key, r.Effect, r.Payload, reqID, token, r.ClaimLease.Milliseconds(), max(r.Delay.Milliseconds(), 0))
	}
}
