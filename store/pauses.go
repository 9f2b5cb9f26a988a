package store

import (
	"context"
	"time"
)

// RoutePause is a paused route: its requests are recorded and acked as
// usual, and its rows stay pending, claimed by no sweeper (a daemon, a
// replica, a hand-run sweep --once) until it is resumed.
type RoutePause struct {
	Route    string
	PausedAt time.Time // on the store's clock
	By       string    // who paused it (a user@host, or the console's remote address)
	// Pending counts the route's pending rows, OldestPending is the
	// created_at of the oldest (zero when none).
	Pending       int64
	OldestPending time.Time
}

// RoutePauses keeps the pause state in the database, so that every process
// on it honours it.
type RoutePauses interface {
	// PauseRoute pauses route; changed == false: it was paused already.
	PauseRoute(ctx context.Context, route, by string) (changed bool, err error)
	// ResumeRoute resumes route; its rows are due as they were. changed ==
	// false: it was not paused.
	ResumeRoute(ctx context.Context, route string) (changed bool, err error)
	// PausedRoutes returns every paused route, by name, with its pending
	// rows counted.
	PausedRoutes(ctx context.Context) ([]RoutePause, error)
}

// ReplayFilter selects the rows a replay copies: IDs, or a route and a
// window of created_at with statuses.
type ReplayFilter struct {
	IDs      []int64
	Route    string
	Since    time.Time
	Until    time.Time // zero: now
	Statuses []string  // done, parked, discarded; empty: done
}

// Replayed is one row a replay made.
type Replayed struct {
	From int64  // the original row
	ID   int64  // the new pending row
	Key  string // <original key>#r<N>
}

// Replayer redoes work: a new pending row per selected row, keyed
// `<key>#r<N>`, with the same effect, payload and stored request. The
// original row and the receipts stay as they are.
type Replayer interface {
	// ReplayMatching returns the first limit rows f selects and how many in
	// all (--dry-run).
	ReplayMatching(ctx context.Context, f ReplayFilter, limit int) ([]Row, int64, error)
	// Replay creates the new rows in one transaction and returns them.
	Replay(ctx context.Context, f ReplayFilter) ([]Replayed, error)
}
