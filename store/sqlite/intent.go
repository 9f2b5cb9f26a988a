package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ackd/ackd/store"
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
	res, err := s.recordIntent(ctx, in, nil)
	return res.First, err
}

// RecordInstallEnd is RecordIntent with end applied in the intent's
// transaction when this delivery is the first (see store.Installations).
func (s *Store) RecordInstallEnd(ctx context.Context, in Intent, end store.InstallEnd) (store.InstallEndResult, error) {
	return s.recordIntent(ctx, in, &end)
}

func (s *Store) recordIntent(ctx context.Context, in Intent, end *store.InstallEnd) (store.InstallEndResult, error) {
	if in.EventID == "" {
		return store.InstallEndResult{}, errors.New("record intent: empty event id")
	}
	var res store.InstallEndResult
	err := s.inGroup(ctx, func(ctx context.Context, tx *sql.Tx, now int64) error {
		res = store.InstallEndResult{}
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
		switch {
		case changes != 1:
			res.Outcome = store.EndDuplicate
		case end != nil:
			// The one writer's transaction: what is read here is what the
			// delete sees. Before the event's own rows are inserted, so
			// that parking the installation's waiting rows leaves them
			// alone: they are this event's effects (a route on
			// app_uninstalled), to be performed.
			r, err := endInstall(ctx, tx, *end, now)
			if err != nil {
				return err
			}
			res = r
		}
		if err := s.insertRows(ctx, tx, in.Rows, now); err != nil {
			return err
		}
		res.First = changes == 1
		return nil
	})
	if err != nil {
		return store.InstallEndResult{}, fmt.Errorf("record intent %s: %w", in.EventID, classify(err))
	}
	s.intents.Add(1)
	return res, nil
}

// endInstall applies an installation-ending event inside the intent's
// transaction (store.EndOf decides).
func endInstall(ctx context.Context, tx *sql.Tx, end store.InstallEnd, now int64) (store.InstallEndResult, error) {
	var installed, slackInstalled int64
	var bot string
	err := tx.QueryRowContext(ctx, `SELECT installed_at, slack_installed_at, bot_user_id FROM ackd_installations WHERE install_key = ?`,
		end.Key).Scan(&installed, &slackInstalled, &bot)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return store.InstallEndResult{}, fmt.Errorf("read installation: %w", err)
	}
	var slackAt time.Time
	if slackInstalled > 0 {
		slackAt = time.UnixMilli(slackInstalled)
	}
	res := store.EndOf(found, time.UnixMilli(installed), slackAt, bot, end)
	if res.Outcome != store.EndRemoved {
		return res, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM ackd_installations WHERE install_key = ?`, end.Key); err != nil {
		return store.InstallEndResult{}, fmt.Errorf("delete installation: %w", err)
	}
	n, err := parkInstallRows(ctx, tx, end.Key, end.Reason, now)
	if err != nil {
		return store.InstallEndResult{}, err
	}
	res.Parked = n
	return res, nil
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
		due := now
		if r.Delay > 0 {
			due += r.Delay.Milliseconds()
		}
		if _, err := st.ExecContext(ctx, r.Key, r.Effect, r.Payload, due, now, reqID, token, expires, length); err != nil {
			return fmt.Errorf("insert outbox row %s: %w", r.Key, err)
		}
	}
	return nil
}
