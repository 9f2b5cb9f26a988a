package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ackd/ackd/store"
)

// Route pauses (ackd_route_pauses) and replay (issue 31).

// routeExpr is a row's route (its payload's "route"), NULL when the payload
// is not JSON (a row parked because it could not be decoded): the same
// expression as parkedWhere's, so that SQLite evaluates it the same way.
const routeExpr = `CASE WHEN json_valid(payload) THEN json_extract(payload, '$.route') END`

// notPausedTerm keeps out the rows of a paused route (ClaimSQL, DueSQL).
// The first EXISTS reads no outbox row and SQLite evaluates it once per
// statement: with no route paused (the usual case) the claim pays nothing
// more, not even the JSON of the rows it passes. With one paused, each
// candidate row's route is looked up in the pauses table's primary key;
// the rows are still read off outbox_pending in due order (EXPLAIN QUERY
// PLAN unchanged: TestQueryPlans), so a paused route's backlog due before
// the others' is passed over at each claim, and that costs: each row passed
// is read from the table and its payload parsed. BenchmarkClaimPausedBacklog
// (25-row claims, 500-byte payloads, a loaded 2-core VM): 3 ms with nothing
// paused, 6 ms past 1,000 paused rows, 160 ms past 20,000; and the claim
// runs in the writer's group commit, so acks wait that long. A pause is for
// minutes of a deploy, not hours at a high rate; an indexed route column is
// the way past it (a later migration). coalesce: a row without a route
// (NULL) is never paused, and NOT IN of NULL would drop it. A deadline
// row (store.EffectStepDeadline) is never paused: its effect is a column,
// read before the payload's JSON.
const notPausedTerm = `
		                                  AND (NOT EXISTS (SELECT 1 FROM ackd_route_pauses)
		                                       OR effect = '` + store.EffectStepDeadline + `'
		                                       OR coalesce(` + routeExpr + `, '') NOT IN (SELECT route FROM ackd_route_pauses))`

// PauseRoute pauses route on the store's clock.
func (s *Store) PauseRoute(ctx context.Context, route, by string) (bool, error) {
	if route == "" {
		return false, fmt.Errorf("pause route: empty route name: %w", store.ErrFilter)
	}
	var changed bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO ackd_route_pauses (route, paused_at, paused_by) VALUES (?, ?, ?)
			ON CONFLICT (route) DO NOTHING`, route, ms(s.opts.Now()), by)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pause route %s: %w", route, classify(err))
	}
	return changed, nil
}

// ResumeRoute deletes route's pause.
func (s *Store) ResumeRoute(ctx context.Context, route string) (bool, error) {
	if route == "" {
		return false, fmt.Errorf("resume route: empty route name: %w", store.ErrFilter)
	}
	var changed bool
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM ackd_route_pauses WHERE route = ?`, route)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("resume route %s: %w", route, classify(err))
	}
	return changed, nil
}

// PausedRoutes lists the pauses with their pending rows: one pass over
// the pending rows (outbox_pending), only when a route is paused.
func (s *Store) PausedRoutes(ctx context.Context) ([]store.RoutePause, error) {
	if !s.routePauses {
		return nil, nil
	}
	res, err := s.r.QueryContext(ctx, `SELECT route, paused_at, paused_by FROM ackd_route_pauses ORDER BY route`)
	if err != nil {
		return nil, fmt.Errorf("paused routes: %w", err)
	}
	var out []store.RoutePause
	for res.Next() {
		var p store.RoutePause
		var at int64
		if err := res.Scan(&p.Route, &at, &p.By); err != nil {
			res.Close()
			return nil, fmt.Errorf("paused routes: %w", err)
		}
		p.PausedAt = time.UnixMilli(at)
		out = append(out, p)
	}
	if err := errors.Join(res.Err(), res.Close()); err != nil {
		return nil, fmt.Errorf("paused routes: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	res, err = s.r.QueryContext(ctx, `SELECT r, count(*), min(created_at) FROM (
		SELECT `+routeExpr+` AS r, created_at FROM outbox WHERE status = 'pending' AND effect != '`+store.EffectStepDeadline+`')
		 WHERE r IN (SELECT route FROM ackd_route_pauses) GROUP BY r`)
	if err != nil {
		return nil, fmt.Errorf("paused routes: pending rows: %w", err)
	}
	defer res.Close()
	for res.Next() {
		var route string
		var n, oldest int64
		if err := res.Scan(&route, &n, &oldest); err != nil {
			return nil, fmt.Errorf("paused routes: pending rows: %w", err)
		}
		if i := slices.IndexFunc(out, func(p store.RoutePause) bool { return p.Route == route }); i >= 0 {
			out[i].Pending, out[i].OldestPending = n, time.UnixMilli(oldest)
		}
	}
	return out, res.Err()
}

// RoutePaused looks route up in the pauses.
func (s *Store) RoutePaused(ctx context.Context, route string) (bool, error) {
	if !s.routePauses {
		return false, nil
	}
	var paused bool
	if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM ackd_route_pauses WHERE route = ?)`, route).Scan(&paused); err != nil {
		return false, fmt.Errorf("route paused: %w", err)
	}
	return paused, nil
}

// PendingByRoute counts pending rows by route, off outbox_pending.
func (s *Store) PendingByRoute(ctx context.Context) (map[string]int64, error) {
	res, err := s.r.QueryContext(ctx, `SELECT coalesce(`+routeExpr+`, ''), count(*) FROM outbox
		 WHERE status = 'pending' GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("pending by route: %w", err)
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
	return out, res.Err()
}

// replayWhere is the WHERE clause (and arguments) of the rows f selects.
func replayWhere(f store.ReplayFilter) (string, []any) {
	if len(f.IDs) > 0 {
		return `id IN (SELECT value FROM json_each(?))`, []any{jsonInts(f.IDs)}
	}
	st := f.StatusList()
	where := `status IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(st)), ", ") + `)`
	var args []any
	for _, s := range st {
		args = append(args, s)
	}
	where += ` AND created_at >= ? AND ` + routeExpr + ` = ?`
	args = append(args, ms(f.Since), f.Route)
	if !f.Until.IsZero() {
		where += ` AND created_at < ?`
		args = append(args, ms(f.Until))
	}
	return where, args
}

func jsonInts(ids []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, id)
	}
	b.WriteByte(']')
	return b.String()
}

// replayRows reads the rows f selects on q (the reader, or the replay's
// transaction), all of them when limit < 0, and refuses (a
// *store.ReplayRefused) ids that are no row or pending, and rows whose
// stored request is gone.
func (s *Store) replayRows(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, f store.ReplayFilter) ([]Row, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	where, args := replayWhere(f)
	res, err := q.QueryContext(ctx, `SELECT `+s.readColumns+`,
		request_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM slack_requests q WHERE q.event_id = outbox.request_id)
		  FROM outbox WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var rows []Row
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
	sc    scanner
	extra any
}

func (e scanExtra) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra)...) }

// ReplayMatching returns the first limit rows f selects and their count.
func (s *Store) ReplayMatching(ctx context.Context, f store.ReplayFilter, limit int) ([]Row, int64, error) {
	rows, err := s.replayRows(ctx, s.r, f)
	if err != nil {
		return nil, 0, fmt.Errorf("replay matching: %w", err)
	}
	n := int64(len(rows))
	if limit >= 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	return rows, n, nil
}

// Replay inserts one pending row per selected row in one transaction. The
// writer's BEGIN IMMEDIATE makes it the only writer on the file while it
// numbers the replays, so two replays of one row (in one process or two)
// number theirs one after the other: #r1, then #r2; the numbers are
// recorded (nextReplay), so none is handed out again once its row is
// pruned.
func (s *Store) Replay(ctx context.Context, f store.ReplayFilter) ([]store.Replayed, error) {
	var out []store.Replayed
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		rows, err := s.replayRows(ctx, tx, f)
		if err != nil {
			return err
		}
		now := ms(s.opts.Now())
		for _, r := range rows {
			base, _ := store.BaseKey(r.Key)
			n, err := nextReplay(ctx, tx, base)
			if err != nil {
				return err
			}
			key := store.ReplayKey(base, n)
			var request any
			if r.RequestID != "" {
				request = r.RequestID
			}
			var id int64
			err = tx.QueryRowContext(ctx, `INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at, request_id)
				VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, key, r.Effect, r.Payload, now, now, request).Scan(&id)
			if err != nil {
				return fmt.Errorf("insert %s: %w", key, err)
			}
			out = append(out, store.Replayed{From: r.ID, ID: id, Key: key})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replay: %w", classify(err))
	}
	return out, nil
}

// nextReplay hands out the next replay number of base and records it in
// ackd_replay_numbers, which pruning never touches: the larger of the
// recorded number + 1 and the stored keys' (replays an older binary made
// without recording them).
func nextReplay(ctx context.Context, tx *sql.Tx, base string) (int, error) {
	keys, err := replayKeys(ctx, tx, base)
	if err != nil {
		return 0, err
	}
	var n int
	err = tx.QueryRowContext(ctx, `INSERT INTO ackd_replay_numbers (base_key, last_n) VALUES (?, ?)
		ON CONFLICT (base_key) DO UPDATE SET last_n = max(last_n + 1, excluded.last_n)
		RETURNING last_n`, base, store.NextReplay(base, keys)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("replay number of %s: %w", base, err)
	}
	return n, nil
}

// replayKeys lists the keys that begin with base#r: a range of the key's
// unique index.
func replayKeys(ctx context.Context, tx *sql.Tx, base string) ([]string, error) {
	res, err := tx.QueryContext(ctx, `SELECT idempotency_key FROM outbox WHERE idempotency_key >= ? AND idempotency_key < ?`,
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
