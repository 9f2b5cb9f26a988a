package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/ackd/ackd/store"
)

var _ store.ClaimBlockers = (*Store)(nil)

// ClaimBlockers counts the rows a claim with filter would take were they
// not locked (pending, due, lease free) and lists the other sessions that
// hold locks on the outbox inside an open transaction (pg_stat_activity and
// pg_locks), oldest transaction first. A claim's FOR UPDATE SKIP LOCKED
// passes over the rows such a session locked; a session that went silent
// mid-claim holds them until the server ends it
// (idle_in_transaction_session_timeout) or an operator does
// (pg_terminate_backend).
func (s *Store) ClaimBlockers(ctx context.Context, filter *store.ClaimFilter) (int64, []store.LockHolder, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var effects []string
	if filter != nil && filter.Effects != nil {
		effects = append([]string{}, filter.Effects...)
	}
	var waiting int64
	err := s.pool.QueryRow(ctx, `WITH `+clockCTE+`
		SELECT count(*) FROM outbox o, clock
		 WHERE o.status = 'pending' AND o.next_attempt_at <= clock.now
		   AND (o.claim_token IS NULL OR o.claim_expires_at IS NULL OR o.claim_expires_at <= clock.now)
		   AND ($2::text[] IS NULL OR o.effect = ANY($2::text[]))`+notPausedTerm, s.offset.Load(), effects).Scan(&waiting)
	if err != nil {
		return 0, nil, fmt.Errorf("count claimable rows: %w", s.classify(ctx, err))
	}
	rows, err := s.pool.Query(ctx, `
		SELECT a.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local'), coalesce(a.state, ''),
		       (extract(epoch FROM clock_timestamp() - a.xact_start) * 1000)::bigint,
		       (extract(epoch FROM clock_timestamp() - coalesce(a.state_change, a.xact_start)) * 1000)::bigint
		  FROM pg_stat_activity a
		 WHERE a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
		   AND EXISTS (SELECT 1 FROM pg_locks l
		                WHERE l.pid = a.pid AND l.relation = 'outbox'::regclass AND l.granted
		                  AND l.mode <> 'AccessShareLock')
		 ORDER BY a.xact_start`)
	if err != nil {
		return waiting, nil, fmt.Errorf("list lock holders: %w", s.classify(ctx, err))
	}
	defer rows.Close()
	var out []store.LockHolder
	for rows.Next() {
		var h store.LockHolder
		var xact, state int64
		if err := rows.Scan(&h.PID, &h.Application, &h.Client, &h.State, &xact, &state); err != nil {
			return waiting, nil, fmt.Errorf("list lock holders: %w", err)
		}
		h.XactAge, h.StateAge = time.Duration(xact)*time.Millisecond, time.Duration(state)*time.Millisecond
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return waiting, nil, fmt.Errorf("list lock holders: %w", s.classify(ctx, err))
	}
	return waiting, out, nil
}
