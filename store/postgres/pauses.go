package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/store"
)

// Route pauses (ackd_route_pauses) and replay (issue 31).

// notPausedTerm keeps out the rows (alias o) of a paused route (claimSQL,
// ClaimBlockers, Stats.Due). The first EXISTS reads no outbox row: the
// planner runs it once per statement as an InitPlan, and with no route
// paused (the usual case) the claim evaluates nothing per row, not even
// ackd_payload_route (a plpgsql function). With one paused, each candidate
// row's route is probed in a hashed subplan of the pauses; the rows are
// still read off outbox_claimable in due order (EXPLAIN unchanged: the
// same Index Scan, a Filter added), so a paused route's backlog due before
// the others' is passed over at each claim (each row passed is read and its
// route parsed: a claim's time grows with the paused backlog, as on SQLite,
// though here it holds no lock acks wait on). coalesce: a row without a route
// (NULL) is never paused, and NOT IN of NULL would drop it. A deadline
// row (store.EffectStepDeadline) is never paused: its effect is a column,
// tested before the payload's route is parsed.
const notPausedTerm = `
				   AND (NOT EXISTS (SELECT 1 FROM ackd_route_pauses)
				        OR o.effect = '` + store.EffectStepDeadline + `'
				        OR coalesce(ackd_payload_route(o.payload), '') NOT IN (SELECT route FROM ackd_route_pauses))`

// PauseRoute pauses route on the database's clock.
func (s *Store) PauseRoute(ctx context.Context, route, by string) (bool, error) {
	if route == "" {
		return false, fmt.Errorf("pause route: empty route name: %w", store.ErrFilter)
	}
	var changed bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO ackd_route_pauses (route, paused_at, paused_by)
			VALUES ($2, ackd_now_ms() + $1::bigint, $3) ON CONFLICT (route) DO NOTHING`, s.offset.Load(), route, by)
		changed = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pause route %s: %w", route, s.classify(ctx, err))
	}
	return changed, nil
}

// ResumeRoute deletes route's pause.
func (s *Store) ResumeRoute(ctx context.Context, route string) (bool, error) {
	if route == "" {
		return false, fmt.Errorf("resume route: empty route name: %w", store.ErrFilter)
	}
	var changed bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM ackd_route_pauses WHERE route = $1`, route)
		changed = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("resume route %s: %w", route, s.classify(ctx, err))
	}
	return changed, nil
}

// PausedRoutes lists the pauses with their pending rows: one pass over
// the pending rows, only when a route is paused.
func (s *Store) PausedRoutes(ctx context.Context) ([]store.RoutePause, error) {
	if !s.routePauses {
		return nil, nil
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	res, err := s.pool.Query(ctx, `SELECT p.route, p.paused_at, p.paused_by, coalesce(c.n, 0), c.oldest
		  FROM ackd_route_pauses p
		  LEFT JOIN (SELECT ackd_payload_route(o.payload) AS route, count(*) AS n, min(o.created_at) AS oldest
		               FROM outbox o
		              WHERE o.status = 'pending' AND o.effect <> '`+store.EffectStepDeadline+`'
		                AND EXISTS (SELECT 1 FROM ackd_route_pauses)
		              GROUP BY 1) c ON c.route = p.route
		 ORDER BY p.route`)
	if err != nil {
		return nil, fmt.Errorf("paused routes: %w", s.classify(ctx, err))
	}
	defer res.Close()
	var out []store.RoutePause
	for res.Next() {
		var p store.RoutePause
		var at int64
		var oldest *int64
		if err := res.Scan(&p.Route, &at, &p.By, &p.Pending, &oldest); err != nil {
			return nil, fmt.Errorf("paused routes: %w", err)
		}
		p.PausedAt, p.OldestPending = time.UnixMilli(at), fromMS(oldest)
		out = append(out, p)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("paused routes: %w", s.classify(ctx, err))
	}
	return out, nil
}

// RoutePaused looks route up in the pauses.
func (s *Store) RoutePaused(ctx context.Context, route string) (bool, error) {
	if !s.routePauses {
		return false, nil
	}
	if err := s.check(); err != nil {
		return false, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var paused bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ackd_route_pauses WHERE route = $1)`, route).Scan(&paused); err != nil {
		return false, fmt.Errorf("route paused: %w", s.classify(ctx, err))
	}
	return paused, nil
}

// PendingByRoute counts pending rows by route.
func (s *Store) PendingByRoute(ctx context.Context) (map[string]int64, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	res, err := s.pool.Query(ctx, `SELECT coalesce(ackd_payload_route(payload), ''), count(*) FROM outbox
		 WHERE status = 'pending' GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("pending by route: %w", s.classify(ctx, err))
	}
	defer res.Close()
	out := map[string]int64{}
	for res.Next() {
		var route string
		var n int64
		if err := res.Scan(&route, &n); err != nil {
			return nil, fmt.Errorf("pending by route: %w", err)
		}
		out[route] = n
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("pending by route: %w", s.classify(ctx, err))
	}
	return out, nil
}

// replayWhere is the WHERE clause (and arguments) of the rows f selects.
func replayWhere(f store.ReplayFilter) (string, []any) {
	if len(f.IDs) > 0 {
		return `o.id = ANY($1::bigint[])`, []any{f.IDs}
	}
	where := `o.status = ANY($1::text[]) AND o.created_at >= $2 AND ackd_payload_route(o.payload) = $3`
	args := []any{f.StatusList(), f.Since.UnixMilli(), f.Route}
	if !f.Until.IsZero() {
		where += ` AND o.created_at < $4`
		args = append(args, f.Until.UnixMilli())
	}
	return where, args
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// replayRows reads the rows f selects on q (the pool, or the replay's
// transaction) and refuses (a *store.ReplayRefused) ids that are no row or
// pending, and rows whose stored request is gone.
func (s *Store) replayRows(ctx context.Context, q querier, f store.ReplayFilter) ([]store.Row, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	where, args := replayWhere(f)
	res, err := q.Query(ctx, `SELECT `+s.readColumns+`,
		o.request_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM slack_requests q WHERE q.event_id = o.request_id)
		  FROM outbox o WHERE `+where+` ORDER BY o.id`, args...)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var rows []store.Row
	var gone []bool
	for res.Next() {
		var g bool
		r, err := scanRow(scanExtra{res, &g})
		if err != nil {
			return nil, err
		}
		rows, gone = append(rows, r), append(gone, g)
	}
	if err := res.Err(); err != nil {
		return nil, err
	}
	return store.ReplayVerdict(f, rows, gone)
}

// scanExtra scans a row followed by one more column.
type scanExtra struct {
	sc    pgx.Row
	extra any
}

func (e scanExtra) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra)...) }

// ReplayMatching returns the first limit rows f selects and their count.
func (s *Store) ReplayMatching(ctx context.Context, f store.ReplayFilter, limit int) ([]store.Row, int64, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.replayRows(ctx, s.pool, f)
	if err != nil {
		return nil, 0, fmt.Errorf("replay matching: %w", s.classify(ctx, err))
	}
	n := int64(len(rows))
	if limit >= 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, n, nil
}

// Replay inserts one pending row per selected row in one transaction. Each
// original key's replays are numbered under a transaction-scoped advisory
// lock on that key (taken in key order: two replays never wait on each
// other in a cycle), so two replays of one row on two replicas number
// theirs one after the other, #r1 then #r2: the second reads the first's
// committed row and number (READ COMMITTED: each statement sees the latest
// commits). The numbers are recorded (nextReplay), so none is handed out
// again once its row is pruned.
func (s *Store) Replay(ctx context.Context, f store.ReplayFilter) ([]store.Replayed, error) {
	var out []store.Replayed
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := s.replayRows(ctx, tx, f)
		if err != nil {
			return err
		}
		bases := make([]string, 0, len(rows))
		for _, r := range rows {
			b, _ := store.BaseKey(r.Key)
			bases = append(bases, b)
		}
		locks := slices.Clone(bases)
		sort.Strings(locks)
		for _, b := range slices.Compact(locks) {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('ackd replay ' || $1, 0))`, b); err != nil {
				return err
			}
		}
		for i, r := range rows {
			base := bases[i]
			n, err := nextReplay(ctx, tx, base)
			if err != nil {
				return err
			}
			key := store.ReplayKey(base, n)
			var request *string
			if r.RequestID != "" {
				request = &r.RequestID
			}
			var id int64
			err = tx.QueryRow(ctx, `WITH `+clockCTE+`
				INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at, request_id)
				SELECT $2, $3, $4, now, now, $5 FROM clock RETURNING id`, s.offset.Load(), key, r.Effect, r.Payload, request).Scan(&id)
			if err != nil {
				return fmt.Errorf("insert %s: %w", key, err)
			}
			out = append(out, store.Replayed{From: r.ID, ID: id, Key: key})
		}
		return nil
	})
	if err != nil {
		var refused *store.ReplayRefused
		if errors.As(err, &refused) || errors.Is(err, store.ErrFilter) { // a *store.SelectionChanged too
			return nil, fmt.Errorf("replay: %w", err)
		}
		return nil, fmt.Errorf("replay: %w", s.classify(ctx, err))
	}
	return out, nil
}

// nextReplay hands out the next replay number of base and records it in
// ackd_replay_numbers, which pruning never touches: the larger of the
// recorded number + 1 and the stored keys' (replays an older binary made
// without recording them). The upsert's row lock orders two replays of one
// key even without the advisory lock.
func nextReplay(ctx context.Context, tx pgx.Tx, base string) (int, error) {
	keys, err := replayKeys(ctx, tx, base)
	if err != nil {
		return 0, err
	}
	var n int
	err = tx.QueryRow(ctx, `INSERT INTO ackd_replay_numbers (base_key, last_n) VALUES ($1, $2)
		ON CONFLICT (base_key) DO UPDATE SET last_n = GREATEST(ackd_replay_numbers.last_n + 1, EXCLUDED.last_n)
		RETURNING last_n`, base, store.NextReplay(base, keys)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("replay number of %s: %w", base, err)
	}
	return n, nil
}

// replayKeys lists the keys that begin with base#r: a range of the key's
// unique index (COLLATE "C": byte order).
func replayKeys(ctx context.Context, tx pgx.Tx, base string) ([]string, error) {
	res, err := tx.Query(ctx, `SELECT idempotency_key FROM outbox WHERE idempotency_key >= $1 AND idempotency_key < $2`,
		base+"#r", base+"#s")
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var keys []string
	for res.Next() {
		var k string
		if err := res.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, res.Err()
}
