package postgres

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ackd/ackd/store"
)

func sortByID(rows []store.Row) {
	slices.SortFunc(rows, func(a, b store.Row) int { return cmp.Compare(a.ID, b.ID) })
}

// Prune deletes receipts received more than receipts ago and done and
// discarded rows completed more than done ago (on the database's clock), in batches of at
// most batch rows, each its own statement. Pending and parked rows are
// never pruned. A stored request is deleted once it is older than receipts
// and no pending or parked row names it.
func (s *Store) Prune(ctx context.Context, receipts, done time.Duration, batch int) (store.PruneResult, error) {
	if batch <= 0 {
		batch = 1000
	}
	var out store.PruneResult
	n, err := s.deleteBatches(ctx, batch, `WITH `+clockCTE+`
		DELETE FROM slack_event_receipts WHERE event_id IN (
		  SELECT event_id FROM slack_event_receipts, clock
		   WHERE received_at < clock.now - $2::bigint LIMIT $3)`, receipts)
	out.Receipts = n
	if err != nil {
		return out, fmt.Errorf("prune receipts: %w", err)
	}
	n, err = s.deleteBatches(ctx, batch, `WITH `+clockCTE+`
		DELETE FROM outbox WHERE id IN (
		  SELECT id FROM outbox, clock
		   WHERE status = 'done' AND completed_at < clock.now - $2::bigint LIMIT $3)`, done)
	out.Done = n
	if err != nil {
		return out, fmt.Errorf("prune done rows: %w", err)
	}
	n, err = s.deleteBatches(ctx, batch, `WITH `+clockCTE+`
		DELETE FROM outbox WHERE id IN (
		  SELECT id FROM outbox, clock
		   WHERE status = 'discarded' AND completed_at < clock.now - $2::bigint LIMIT $3)`, done)
	out.Discarded = n
	if err != nil {
		return out, fmt.Errorf("prune discarded rows: %w", err)
	}
	// A stored request outlives its receipt for as long as a row that may
	// still be performed (pending, or parked for an operator) needs it.
	n, err = s.deleteBatches(ctx, batch, `WITH `+clockCTE+`
		DELETE FROM slack_requests WHERE event_id IN (
		  SELECT q.event_id FROM slack_requests q, clock
		   WHERE q.received_at < clock.now - $2::bigint
		     AND NOT EXISTS (SELECT 1 FROM outbox o
		                      WHERE o.request_id = q.event_id AND o.request_id IS NOT NULL
		                        AND o.status IN ('pending', 'parked'))
		   LIMIT $3)`, receipts)
	out.Requests = n
	if err != nil {
		return out, fmt.Errorf("prune stored requests: %w", err)
	}
	// A stop matters to the stream rows asked before it: kept as long as
	// done rows are.
	n, err = s.deleteBatches(ctx, batch, `WITH `+clockCTE+`
		DELETE FROM ackd_stream_stops WHERE (channel, thread_ts) IN (
		  SELECT channel, thread_ts FROM ackd_stream_stops, clock
		   WHERE recorded_at < clock.now - $2::bigint LIMIT $3)`, done)
	out.Stops = n
	if err != nil {
		return out, fmt.Errorf("prune stops: %w", err)
	}
	return out, nil
}

func (s *Store) deleteBatches(ctx context.Context, batch int, q string, age time.Duration) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var total int64
	for {
		// Each batch is bounded (a long prune is many statements).
		bctx, cancel := s.bound(ctx)
		tag, err := s.pool.Exec(bctx, q, s.offset.Load(), age.Milliseconds(), batch)
		cancel()
		if err != nil {
			return total, s.classify(ctx, err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

// Queue counts outbox rows by status and measures the oldest pending row
// on the database's clock.
func (s *Store) Queue(ctx context.Context) (store.Queue, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var q store.Queue
	var oldestMS *int64
	paused := "" // the oldest row no pause holds (store.Queue)
	if s.routePauses {
		paused = notPausedTerm
	}
	err := s.pool.QueryRow(ctx, `WITH `+clockCTE+`
		SELECT count(*) FILTER (WHERE status = 'pending'),
		       count(*) FILTER (WHERE status = 'done'),
		       count(*) FILTER (WHERE status = 'parked'),
		       count(*) FILTER (WHERE status = 'discarded'),
		       (SELECT now FROM clock) - min(created_at) FILTER (WHERE status = 'pending'`+paused+`)
		  FROM outbox o`, s.offset.Load()).Scan(&q.Pending, &q.Done, &q.Parked, &q.Discarded, &oldestMS)
	if err != nil {
		return q, fmt.Errorf("queue stats: %w", s.classify(ctx, err))
	}
	if oldestMS != nil {
		q.OldestPending = max(0, time.Duration(*oldestMS)*time.Millisecond)
	}
	return q, nil
}

// Stats returns the queue plus receipt and lease counts.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	q, err := s.Queue(ctx)
	if err != nil {
		return store.Stats{}, err
	}
	st := store.Stats{Queue: q}
	err = s.pool.QueryRow(ctx, `WITH `+clockCTE+`
		SELECT (SELECT count(*) FROM slack_event_receipts),
		       (SELECT count(*) FROM slack_event_receipts
		         WHERE (event_id >= 'msg:' AND event_id < 'msg;') OR (event_id >= 'mention:' AND event_id < 'mention;')),
		       (SELECT count(*) FROM outbox, clock WHERE status = 'pending' AND claim_expires_at > clock.now),
		       (SELECT coalesce(max(version), 0) FROM ackd_migrations)`, s.offset.Load()).
		Scan(&st.Receipts, &st.Recovered, &st.Leased, &st.SchemaVersion)
	if err != nil {
		return store.Stats{}, fmt.Errorf("stats: %w", s.classify(ctx, err))
	}
	// Rows a sweep would take now (the due end of outbox_claimable).
	// Not those of a paused route: no sweep takes them (notPausedTerm).
	paused := ""
	if s.routePauses {
		paused = notPausedTerm
	}
	res, err := s.pool.Query(ctx, `WITH `+clockCTE+`
		SELECT effect, count(*) FROM outbox o, clock
		 WHERE status = 'pending' AND next_attempt_at <= clock.now
		   AND (claim_token IS NULL OR claim_expires_at IS NULL OR claim_expires_at <= clock.now)`+paused+`
		 GROUP BY effect`, s.offset.Load())
	if err != nil {
		return store.Stats{}, fmt.Errorf("stats: %w", s.classify(ctx, err))
	}
	defer res.Close()
	st.Due = map[string]int64{}
	for res.Next() {
		var effect string
		var n int64
		if err := res.Scan(&effect, &n); err != nil {
			return store.Stats{}, fmt.Errorf("stats: %w", s.classify(ctx, err))
		}
		st.Due[effect] = n
	}
	if err := res.Err(); err != nil {
		return store.Stats{}, fmt.Errorf("stats: %w", s.classify(ctx, err))
	}
	return st, nil
}

// HasReceipt reports whether a receipt exists for eventID.
func (s *Store) HasReceipt(ctx context.Context, eventID string) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM slack_event_receipts WHERE event_id = $1)`, eventID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("has receipt: %w", s.classify(ctx, err))
	}
	return ok, nil
}

// CheckWrite commits a real one-row write: the health check. It fails when
// the server is down or unreachable within ctx, or refuses writes (a
// standby after a failover that went the wrong way).
func (s *Store) CheckWrite(ctx context.Context) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.check(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `WITH `+clockCTE+`
		INSERT INTO ackd_health (id, checked_at) SELECT 1, now FROM clock
		ON CONFLICT (id) DO UPDATE SET checked_at = excluded.checked_at`, s.offset.Load())
	if err != nil {
		return fmt.Errorf("health write: %w", s.classify(ctx, err))
	}
	return nil
}

// CheckEvents verifies, after a load test, that every acked event id has a
// receipt and an outbox row keyed "{id}:…".
func (s *Store) CheckEvents(ctx context.Context, ids []string) (store.EventCheck, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var out store.EventCheck
	const chunk = 5000
	for len(ids) > 0 {
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		res, err := s.pool.Query(ctx, `SELECT i.id,
			EXISTS (SELECT 1 FROM slack_event_receipts WHERE event_id = i.id),
			EXISTS (SELECT 1 FROM outbox WHERE idempotency_key > i.id || ':' AND idempotency_key < i.id || ';')
			FROM unnest($1::text[]) WITH ORDINALITY AS i(id, n) ORDER BY i.n`, part)
		if err != nil {
			return out, fmt.Errorf("check events: %w", s.classify(ctx, err))
		}
		for res.Next() {
			var id string
			var receipt, rows bool
			if err := res.Scan(&id, &receipt, &rows); err != nil {
				res.Close()
				return out, fmt.Errorf("check events: %w", err)
			}
			out.Add(id, receipt, rows)
		}
		res.Close()
		if err := res.Err(); err != nil {
			return out, fmt.Errorf("check events: %w", s.classify(ctx, err))
		}
	}
	return out, nil
}
