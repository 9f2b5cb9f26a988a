package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ackd/ackd/store"
)

// searchSQL finds the rows a console search names through indexes (see
// store.Browser): the primary key, the key's unique index as a point or a
// prefix range, request_id's, and the parked rows' partial index (only
// there is a payload looked into: instr, no JSON parse).
//
// ?1 row id (0: none), ?2 the term, ?3 the payload text, ?4 limit.
func searchSQL(columns string) string {
	return `WITH hits(id) AS (
	SELECT id FROM outbox WHERE id = ?1
	UNION SELECT id FROM outbox WHERE idempotency_key = ?2
	UNION SELECT id FROM outbox WHERE idempotency_key >= ?2 || ':' AND idempotency_key < ?2 || ';'
	UNION SELECT id FROM outbox WHERE idempotency_key >= 'cmd:' || ?2 || ':' AND idempotency_key < 'cmd:' || ?2 || ';'
	UNION SELECT id FROM outbox WHERE idempotency_key >= 'ix:' || ?2 || ':' AND idempotency_key < 'ix:' || ?2 || ';'
	UNION SELECT id FROM outbox WHERE request_id IN (?2, 'cmd:' || ?2, 'ix:' || ?2)
	UNION SELECT id FROM outbox WHERE status = 'parked' AND instr(payload, ?3) > 0
)
SELECT ` + columns + ` FROM outbox WHERE id IN (SELECT id FROM hits) ORDER BY id DESC LIMIT ?4`
}

// searchWindowSQL looks for a payload value among the newest
// store.SearchWindow rows, newest first, down the primary key: it stops
// at the limit. ?1 the payload text, ?2 limit.
func searchWindowSQL(columns string) string {
	return `SELECT ` + columns + ` FROM outbox
	 WHERE id > (SELECT coalesce(max(id), 0) FROM outbox) - ` + strconv.Itoa(store.SearchWindow) + `
	   AND instr(payload, ?1) > 0
	 ORDER BY id DESC LIMIT ?2`
}

// RouteCountsSQL counts the parked and discarded rows by route, each
// status from its partial index.
const RouteCountsSQL = `SELECT status, route, count(*) FROM (
	SELECT status, CASE WHEN json_valid(payload) THEN json_extract(payload, '$.route') END AS route
	  FROM outbox WHERE status = 'parked'
	UNION ALL
	SELECT status, CASE WHEN json_valid(payload) THEN json_extract(payload, '$.route') END
	  FROM outbox WHERE status = 'discarded'
) GROUP BY status, route ORDER BY route, status`

// Search returns up to limit rows that q names, newest first.
func (s *Store) Search(ctx context.Context, q string, limit int) ([]store.Row, error) {
	term, id, inPayload, limit := store.SearchTerms(q, limit)
	if term == "" {
		return nil, nil
	}
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
	res, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("search outbox: %w", err)
	}
	defer res.Close()
	var rows []store.Row
	for res.Next() {
		r, err := scanRow(res)
		if err != nil {
			return nil, fmt.Errorf("search outbox: %w", err)
		}
		rows = append(rows, r)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("search outbox: %w", err)
	}
	return rows, nil
}

// RouteCounts counts the parked and discarded rows by route.
func (s *Store) RouteCounts(ctx context.Context) ([]store.RouteCount, error) {
	res, err := s.r.QueryContext(ctx, RouteCountsSQL)
	if err != nil {
		return nil, fmt.Errorf("route counts: %w", err)
	}
	defer res.Close()
	var out []store.RouteCount
	for res.Next() {
		var c store.RouteCount
		var route *string
		if err := res.Scan(&c.Status, &route, &c.Rows); err != nil {
			return nil, fmt.Errorf("route counts: %w", err)
		}
		if route != nil {
			c.Route = *route
		}
		out = append(out, c)
	}
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("route counts: %w", err)
	}
	return out, nil
}

// Receipt returns eventID's receipt, or ErrNotFound.
func (s *Store) Receipt(ctx context.Context, eventID string) (store.Receipt, error) {
	rc := store.Receipt{EventID: eventID}
	var at int64
	err := s.r.QueryRowContext(ctx, `SELECT event_type, received_at FROM slack_event_receipts WHERE event_id = ?`, eventID).Scan(&rc.EventType, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return rc, fmt.Errorf("receipt %q: %w", eventID, store.ErrNotFound)
	}
	if err != nil {
		return rc, fmt.Errorf("receipt %q: %w", eventID, err)
	}
	rc.ReceivedAt = time.UnixMilli(at)
	return rc, nil
}
