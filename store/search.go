package store

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Browser is what the operator console reads beyond the rest of the
// contract: search, and the backlog by route.
type Browser interface {
	// Search returns up to limit rows (newest first) that q names: a row
	// id, an idempotency key, an event_id or operation/trigger id, a
	// channel id, a message ts, or a route name. An empty q (after
	// trimming) finds nothing.
	//
	// Ids, keys, event and operation ids are found through the outbox's
	// indexes wherever the row is. A channel, a ts or a route is a value
	// in the row's payload, which no index holds: those are looked for in
	// the parked rows (through their status index) and in the newest
	// SearchWindow rows, newest first (a frequent value stops the scan
	// early), so that a search never reads the whole table. A pending row
	// older than the window (a backlog) is found by its id, key or event.
	Search(ctx context.Context, q string, limit int) ([]Row, error)
	// RouteCounts counts the parked and discarded rows by route (the
	// payload's "route"; "" for a row without one), each status read
	// through its own index: the rows an operator has to decide about.
	// Done rows, most of the table, and pending ones, which can be a
	// backlog of many thousands under load, are counted only in total
	// (Queue): reading every one of their payloads would make a page cost
	// a noticeable share of the machine.
	RouteCounts(ctx context.Context) ([]RouteCount, error)
	// Receipt returns the receipt of an event_id or operation id, or
	// ErrNotFound (none was recorded, or it was pruned).
	Receipt(ctx context.Context, eventID string) (Receipt, error)
}

// Receipt is one accepted Slack request's receipt.
type Receipt struct {
	EventID    string
	EventType  string
	ReceivedAt time.Time
}

// SearchWindow is how many of the newest rows a search by a payload value
// (channel, ts, route) reads besides the pending and parked ones.
const SearchWindow = 10000

// RouteCount is one route's rows of one status.
type RouteCount struct {
	Route  string
	Status string
	Rows   int64
}

// SearchTerms is what the engines match for q: q itself (trimmed; "" means
// nothing to search), its row id (0 when q is not one), the text a payload
// holds where one of its fields has q as its value (`:"q"`, as ackd's JSON
// encoder writes it), and limit, 50 when not positive.
func SearchTerms(q string, limit int) (term string, id int64, inPayload string, n int) {
	term = strings.TrimSpace(q)
	id, err := strconv.ParseInt(term, 10, 64)
	if err != nil || id <= 0 {
		id = 0
	}
	if limit <= 0 {
		limit = 50
	}
	b, _ := json.Marshal(term)
	return term, id, ":" + string(b), limit
}

// MergeSearch joins the rows two search queries found: each row once,
// newest first, at most limit.
func MergeSearch(a, b []Row, limit int) []Row {
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, func(x, y Row) int { return cmp.Compare(y.ID, x.ID) })
	out = slices.CompactFunc(out, func(x, y Row) bool { return x.ID == y.ID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
