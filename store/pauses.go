package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// EffectStepDeadline is the effect of a workflow step's deadline row
// (sweep.EffectStepDeadline): ackd's own timer, which no pause holds. A
// paused step route's deadline rows are claimed at their due time as if
// nothing were paused, so that a workflow never hangs on a paused handler
// (DESIGN §12): the step ends with completeError "timed out".
const EffectStepDeadline = "step_deadline"

// RoutePauses keeps the pause state in the database, so that every process
// on it honours it: Claim passes over the pending rows (payload "route") of
// a paused route, except those the claiming token already holds (an
// attempt under way when the pause landed finishes) and deadline rows
// (EffectStepDeadline), which are never paused. Stats.Due and
// ClaimBlockers do not count the held rows either: they are not waiting
// for a sweep; PausedRoutes' Pending counts only the held rows.
type RoutePauses interface {
	// PauseRoute pauses route; changed == false: it was paused already
	// (by whom and since when: PausedRoutes). An empty route is refused
	// (ErrFilter); the store does not know the config's routes, the
	// caller checks the name.
	PauseRoute(ctx context.Context, route, by string) (changed bool, err error)
	// ResumeRoute resumes route; its rows are due as they were. changed ==
	// false: it was not paused.
	ResumeRoute(ctx context.Context, route string) (changed bool, err error)
	// PausedRoutes returns every paused route, by name, with its pending
	// rows counted. On a schema older than route pauses (a read-only
	// store), none.
	PausedRoutes(ctx context.Context) ([]RoutePause, error)
	// RoutePaused reports whether route is paused: one primary-key read,
	// cheap enough for the ack path (a synchronous interaction's inline
	// attempt is not made for a paused route). false on a schema older
	// than route pauses.
	RoutePaused(ctx context.Context, route string) (bool, error)
	// PendingByRoute counts the pending rows of each route (payload
	// "route"; "" for rows without one), paused or not: one pass over the
	// pending rows (`ackd route list`).
	PendingByRoute(ctx context.Context) (map[string]int64, error)
}

// ReplayFilter selects the rows a replay copies: IDs, or a route and a
// window of created_at with statuses.
type ReplayFilter struct {
	IDs      []int64
	Route    string
	Since    time.Time // created_at at or after; required with Route
	Until    time.Time // created_at before; zero: no upper bound (now)
	Statuses []string  // done, parked, discarded; empty: done
	// Expect, when > 0, is how many rows a preview counted
	// (ReplayMatching): Replay then makes its rows only if f still selects
	// exactly that many, and otherwise makes none and returns a
	// *SelectionChanged. 0: no check.
	Expect int64
}

// ReplayStatuses are the statuses a replay copies rows of. A pending row
// is not replayed: it has not finished.
var ReplayStatuses = []string{StatusDone, StatusParked, StatusDiscarded}

// Check refuses a filter that could select the wrong rows (ErrFilter): no
// ids and no route, both, a route without Since, an empty window, a status
// that is not one of ReplayStatuses.
func (f ReplayFilter) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("replay: %s: %w", fmt.Sprintf(format, a...), ErrFilter)
	}
	switch {
	case len(f.IDs) == 0 && f.Route == "":
		return bad("give row ids, or a route and a time window")
	case len(f.IDs) > 0 && (f.Route != "" || !f.Since.IsZero() || !f.Until.IsZero() || len(f.Statuses) > 0):
		return bad("row ids and a route filter select differently; give one")
	case f.Route != "" && f.Since.IsZero():
		return bad("a route filter needs the start of its window (since)")
	case f.Expect < 0:
		return bad("a negative expected count (%d)", f.Expect)
	case !f.Until.IsZero() && !f.Until.After(f.Since):
		return bad("the window ends (%s) before it starts (%s)", f.Until.UTC().Format(time.RFC3339), f.Since.UTC().Format(time.RFC3339))
	}
	for _, s := range f.Statuses {
		switch {
		case s == StatusPending:
			return bad("a pending row is not replayed (it has not finished: it waits for a sweep)")
		case !slices.Contains(ReplayStatuses, s):
			return bad("%q is not a status a replay copies (%s)", s, strings.Join(ReplayStatuses, ", "))
		}
	}
	return nil
}

// StatusList is f.Statuses, or done when none is given.
func (f ReplayFilter) StatusList() []string {
	if len(f.Statuses) == 0 {
		return []string{StatusDone}
	}
	return f.Statuses
}

// Replayed is one row a replay made.
type Replayed struct {
	From int64  // the original row
	ID   int64  // the new pending row
	Key  string // <original key>#r<N>
}

// ReplayRefused is a replay that changed nothing because rows it names
// cannot be replayed: Missing ids that are no row (pruned, or never one),
// Pending rows (not finished), and rows whose stored Slack request was
// pruned (NoRequest: the effect could not be performed from the payload
// alone).
type ReplayRefused struct {
	Missing, Pending, NoRequest []int64
}

func (e *ReplayRefused) Error() string {
	var parts []string
	list := func(ids []int64) string {
		s := make([]string, 0, min(len(ids), 10))
		for i, id := range ids {
			if i == 10 {
				s = append(s, fmt.Sprintf("and %d more", len(ids)-i))
				break
			}
			s = append(s, strconv.FormatInt(id, 10))
		}
		return strings.Join(s, ", ")
	}
	if len(e.Missing) > 0 {
		parts = append(parts, "no such row: "+list(e.Missing)+" (done and discarded rows are pruned after [retention] done)")
	}
	if len(e.Pending) > 0 {
		parts = append(parts, "pending, not finished (a pending row is not replayed): "+list(e.Pending))
	}
	if len(e.NoRequest) > 0 {
		parts = append(parts, "their stored Slack request was pruned, so the effect could not be performed again: "+list(e.NoRequest))
	}
	return "replay refused, nothing changed: " + strings.Join(parts, "; ")
}

// ReplayVerdict judges the rows a replay filter f selected (gone[i]: rows[i]
// names a stored Slack request that is no longer there): the rows to
// replay, or a *ReplayRefused naming the ids that are no row, the pending
// rows and those whose request is gone. Both engines read the rows; the
// judgement is one.
//
// One replay request makes at most one new row per original key: a window
// (f.Route) selects original rows only, never the rows an earlier replay
// made (keys <key>#r<N>: they are done and created in the window too, and
// replaying them as well would perform each event once more per earlier
// replay); ids that name one original and its replays make one row, for
// the first of them. When f.Expect is set and the rows left are not that
// many, the verdict is a *SelectionChanged.
func ReplayVerdict(f ReplayFilter, rows []Row, gone []bool) ([]Row, error) {
	refused := &ReplayRefused{}
	var out []Row
	bases := map[string]bool{}
	for i, r := range rows {
		base, n := BaseKey(r.Key)
		if f.Route != "" && n > 0 {
			continue
		}
		switch {
		case r.Status == StatusPending:
			refused.Pending = append(refused.Pending, r.ID)
		case gone[i]:
			refused.NoRequest = append(refused.NoRequest, r.ID)
		case !bases[base]:
			bases[base] = true
			out = append(out, r)
		}
	}
	for _, id := range f.IDs {
		if !slices.ContainsFunc(rows, func(r Row) bool { return r.ID == id }) && !slices.Contains(refused.Missing, id) {
			refused.Missing = append(refused.Missing, id)
		}
	}
	if refused.Refused() {
		return nil, refused
	}
	if f.Expect > 0 && int64(len(out)) != f.Expect {
		return nil, &SelectionChanged{Previewed: f.Expect, Now: int64(len(out))}
	}
	return out, nil
}

// SelectionChanged is a bulk change refused because its filter no longer
// selects what its preview counted (rows were retried, parked, pruned or
// made meanwhile): nothing was changed; a new preview shows what the filter
// selects now.
type SelectionChanged struct {
	Previewed, Now int64
}

func (e *SelectionChanged) Error() string {
	return fmt.Sprintf("the selection changed since it was previewed: the preview counted %d row%s, the same filter selects %d now; nothing was changed (preview again to see what it selects)",
		e.Previewed, plural(e.Previewed), e.Now)
}

// Is makes a SelectionChanged an ErrFilter: a caller that refuses a bad
// filter refuses it too.
func (e *SelectionChanged) Is(target error) bool { return target == ErrFilter }

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Is makes a ReplayRefused an ErrFilter.
func (e *ReplayRefused) Is(target error) bool { return target == ErrFilter }

// Refused reports whether e names any row.
func (e *ReplayRefused) Refused() bool {
	return len(e.Missing)+len(e.Pending)+len(e.NoRequest) > 0
}

// ReplayKey is the key of the n-th replay of key: key#r<n>. BaseKey undoes
// it, so that replaying a replay counts among the original's replays.
func ReplayKey(key string, n int) string { return key + "#r" + strconv.Itoa(n) }

// BaseKey is key without a trailing replay suffix (#r<N>), and N (0: none).
func BaseKey(key string) (string, int) {
	i := strings.LastIndex(key, "#r")
	if i < 0 || i+2 == len(key) {
		return key, 0
	}
	n, err := strconv.Atoi(key[i+2:])
	if err != nil || n <= 0 || strconv.Itoa(n) != key[i+2:] {
		return key, 0
	}
	return key[:i], n
}

// NextReplay is the number of the next replay of base given the keys that
// exist beginning with base#r (the highest N + 1; keys that are not
// base#r<N> are ignored). The engines take the larger of it and their
// recorded number + 1: the keys count the replays an older binary made
// without recording them.
func NextReplay(base string, keys []string) int {
	next := 1
	for _, k := range keys {
		if b, n := BaseKey(k); b == base && n >= next {
			next = n + 1
		}
	}
	return next
}

// Replayer redoes work: a new pending row per selected row, keyed
// `<key>#r<N>`, with the same effect, payload and stored request, due
// now. The original row and the receipts stay as they are. N is never
// handed out twice for a key on one database: each engine keeps the highest
// N of each replayed key in a table pruning does not touch
// (ackd_replay_numbers), so a replay after its predecessors' rows were
// pruned still gets a new number (a handler that remembers keys longer
// than ackd keeps rows would drop a reused one). A replay of a replay is
// numbered among its original's: replaying k#r1 makes k#r2. A window
// replays original rows only (see ReplayVerdict).
type Replayer interface {
	// ReplayMatching returns the first limit rows f selects, in id order,
	// and how many in all (--dry-run). f is checked (ReplayFilter.Check);
	// ids that cannot be replayed are refused (*ReplayRefused).
	ReplayMatching(ctx context.Context, f ReplayFilter, limit int) ([]Row, int64, error)
	// Replay creates the new rows in one transaction and returns them, in
	// the order of the originals' ids. Nothing is written when f is
	// refused (ErrFilter, *ReplayRefused) or selects nothing.
	Replay(ctx context.Context, f ReplayFilter) ([]Replayed, error)
}
