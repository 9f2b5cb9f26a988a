package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/store"
)

// searchSQL finds the rows a console search names through indexes (see
// store.Browser): the primary key, the key's unique index (collated "C")
// as a point or a prefix range, request_id's, and the status index for
// the parked rows (only there is a payload looked into: strpos, no JSON
// parse).
//
// $1 row id (0: none), $2 the term, $3 the payload text, $4 limit.
func searchSQL(columns string) string {
	return `WITH hits AS (
	SELECT id FROM outbox WHERE id = $1
	UNION SELECT id FROM outbox WHERE idempotency_key = $2
	UNION SELECT id FROM outbox WHERE idempotency_key >= $2 || ':' AND idempotency_key < $2 || ';'
	UNION SELECT id FROM outbox WHERE idempotency_key >= 'cmd:' || $2 || ':' AND idempotency_key < 'cmd:' || $2 || ';'
	UNION SELECT id FROM outbox WHERE idempotency_key >= 'ix:' || $2 || ':' AND idempotency_key < 'ix:' || $2 || ';'
	UNION SELECT id FROM outbox WHERE request_id IN ($2, 'cmd:' || $2, 'ix:' || $2)
	UNION SELECT id FROM outbox WHERE status = 'parked' AND strpos(payload, $3) > 0
)
SELECT ` + columns + ` FROM outbox WHERE id IN (SELECT id FROM hits) ORDER BY id DESC LIMIT $4`
}

// searchWindowSQL looks for a payload value among the newest
// store.SearchWindow rows, newest first, down the primary key: it stops
// at the limit. $1 the payload text, $2 limit.
func searchWindowSQL(columns string) string {
	return `SELECT ` + columns + ` FROM outbox
	 WHERE id > (SELECT coalesce(max(id), 0) FROM outbox) - ` + strconv.Itoa(store.SearchWindow) + `
	   AND strpos(payload, $1) > 0
	 ORDER BY id DESC LIMIT $2`
}

// Search returns up to limit rows that q names, newest first.
func (s *Store) Search(ctx context.Context, q string, limit int) ([]store.Row, error) {
	term, id, inPayload, limit := store.SearchTerms(q, limit)
	if term == "" {
		return nil, nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	found, err := s.searchRows(ctx, searchSQL(s.readColumns), id, term, inPayload, limit)
	if err != nil {
		return nil, err
	}
	recent, err := s.searchRows(ctx, searchWindowSQL(s.readColumns), inPayload, limit)
	if err != nil {
		return nil, err
	}
	return store.MergeSearch(found, recent, limit), nil
}

func (s *Store) searchRows(ctx context.Context, query string, args ...any) ([]store.Row, error) {
	res, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("search outbox: %w", s.classify(ctx, err))
	}
	rows, err := collect(res)
	if err != nil {
		return nil, fmt.Errorf("search outbox: %w", s.classify(ctx, err))
	}
	return rows, nil
}

// routeCountsSQL counts the parked and discarded rows by route, read
// through the status index.
const routeCountsSQL = `SELECT status, coalesce(ackd_payload_route(payload), ''), count(*)
	  FROM outbox WHERE status IN ('parked', 'discarded')
	 GROUP BY 1, 2 ORDER BY 2, 1`

// RouteCounts counts the parked and discarded rows by route, each status
// read through the status index.
func (s *Store) RouteCounts(ctx context.Context) ([]store.RouteCount, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	res, err := s.pool.Query(ctx, routeCountsSQL)
	if err != nil {
		return nil, fmt.Errorf("route counts: %w", s.classify(ctx, err))
	}
	defer res.Close()
	var out []store.RouteCount
	for res.Next() {
		var c store.RouteCount
		if err := res.Scan(&c.Status, &c.Route, &c.Rows); err != nil {
			return nil, fmt.Errorf("route counts: %w", s.classify(ctx, err))
		}
		out = append(out, c)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("route counts: %w", s.classify(ctx, err))
	}
	return out, nil
}

// Receipt returns eventID's receipt, or ErrNotFound.
func (s *Store) Receipt(ctx context.Context, eventID string) (store.Receipt, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rc := store.Receipt{EventID: eventID}
	var at int64
	err := s.pool.QueryRow(ctx, `SELECT event_type, received_at FROM slack_event_receipts WHERE event_id = $1`, eventID).Scan(&rc.EventType, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return rc, fmt.Errorf("receipt %q: %w", eventID, store.ErrNotFound)
	}
	if err != nil {
		return rc, fmt.Errorf("receipt %q: %w", eventID, s.classify(ctx, err))
	}
	rc.ReceivedAt = time.UnixMilli(at)
	return rc, nil
}
