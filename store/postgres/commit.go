package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ackd/ackd/store"
)

// An unknown commit outcome is resolved, not guessed.
//
// A transaction whose outcome an answer depends on (an intent, before Slack
// is told "recorded"; a completion) reads its own id, pg_current_xact_id(),
// before COMMIT is sent. When COMMIT then fails in a way that leaves its
// outcome open — the deadline passed while the server was committing (a
// synchronous standby that does not confirm, a slow WAL flush), the reply
// was lost on the network, the connection broke — the store asks
// pg_xact_status about that id on another connection until its resolve
// deadline:
//
//	committed    the call succeeded, as if COMMIT had answered
//	aborted      nothing was written (the call fails as before)
//	in progress  the server has not finished (it waits for a standby, or
//	             has not yet noticed the dead connection): asked again
//
// and an outcome still open at the deadline, or a server that cannot be
// asked, is store.ErrCommitUnknown. pg_xact_status reports "in progress"
// until the committing backend has made its transaction visible, so a
// "committed" answer means other sessions see the rows.

// commitAmbiguous reports whether err, from COMMIT, leaves the outcome
// open: anything but an ERROR the server sent back (the transaction was
// refused, nothing was written) or pgx's report that COMMIT rolled back.
func commitAmbiguous(err error) bool {
	if errors.Is(err, pgx.ErrTxCommitRollback) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// FATAL and PANIC end the session, perhaps after the commit record
		// was written (an administrator's shutdown while the commit waited
		// for a standby).
		return pe.Severity == "FATAL" || pe.Severity == "PANIC"
	}
	return true
}

// resolveReserve caps the share of a call's time kept for asking what
// became of its COMMIT (commitWindow).
const resolveReserve = time.Second

// commitWindow splits what is left of ctx: COMMIT may use all but the last
// quarter (at most resolveReserve), which is kept for resolving an
// ambiguous outcome; by is ctx's deadline.
func commitWindow(ctx context.Context) (cctx context.Context, cancel context.CancelFunc, by time.Time) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx, func() {}, time.Now().Add(resolveReserve)
	}
	keep := min(time.Until(dl)/4, resolveReserve)
	cctx, cancel = context.WithDeadline(ctx, dl.Add(-keep))
	return cctx, cancel, dl
}

// outcome asks pg_xact_status what became of transaction xid (its
// pg_current_xact_id() as text) until by, on another connection than the
// one that sent COMMIT. committed reports the answer when err is nil; err
// wraps store.ErrCommitUnknown when there was none by then.
func (s *Store) outcome(ctx context.Context, xid string, by time.Time) (committed bool, err error) {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), by)
	defer cancel()
	delay := 10 * time.Millisecond
	var last error
	for {
		var status *string
		err := s.pool.QueryRow(ctx, `SELECT pg_xact_status($1::xid8)`, xid).Scan(&status)
		switch {
		case err == nil && status == nil:
			return false, fmt.Errorf("%w: transaction %s is too old for pg_xact_status", store.ErrCommitUnknown, xid)
		case err == nil && *status == "committed":
			return true, nil
		case err == nil && *status == "aborted":
			return false, nil
		case err == nil:
			last = fmt.Errorf("transaction %s still %s on the server", xid, *status)
		default:
			last = fmt.Errorf("asking the server about transaction %s: %w", xid, err)
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%w: %w", store.ErrCommitUnknown, last)
		case <-time.After(delay):
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// settle turns COMMIT's error into the call's answer: nil (committed,
// whether COMMIT said so or pg_xact_status did), the commit error (aborted:
// nothing written), or an error wrapping store.ErrCommitUnknown. xid ""
// (the transaction wrote nothing) cannot be asked about and needs no
// asking: its commit error stands.
func (s *Store) settle(ctx context.Context, commitErr error, xid string, by time.Time) error {
	if commitErr == nil || xid == "" || !commitAmbiguous(commitErr) {
		return commitErr
	}
	committed, err := s.outcome(ctx, xid, by)
	switch {
	case err != nil:
		s.opts.Logger.Warn("commit outcome unknown: COMMIT got no answer and the server could not say in time whether it committed",
			"xid", xid, "commit_err", commitErr.Error(), "err", err.Error())
		return fmt.Errorf("%w (commit: %v)", err, commitErr)
	case committed:
		s.opts.Logger.Info("commit outcome resolved: COMMIT got no answer, the server says it committed",
			"xid", xid, "commit_err", commitErr.Error())
		return nil
	default:
		return commitErr
	}
}
