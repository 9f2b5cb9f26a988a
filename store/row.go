package store

import (
	"slices"
	"strings"
	"time"
)

// Status values of an outbox row.
const (
	StatusPending = "pending"
	StatusDone    = "done"
	StatusParked  = "parked"
	// StatusDiscarded: an operator gave up on a parked row (ackd outbox
	// discard). It is never performed; it stays for the audit trail, with
	// completed_at the time of the discard, and is pruned like a done row.
	StatusDiscarded = "discarded"
)

// Statuses lists every status, in the order a row moves through them.
var Statuses = []string{StatusPending, StatusDone, StatusParked, StatusDiscarded}

// ParkedFilter selects parked rows for RequeueParked, DiscardParked and
// Matching. The zero value selects every parked row.
type ParkedFilter struct {
	Route     string        // the route that made the row (its payload's "route"); "" any
	Effect    string        // "" any
	OlderThan time.Duration // only rows created more than this long ago; 0 any
	// Discarded selects discarded rows instead of parked ones: the rows
	// RequeueParked puts back to undo discards (DiscardParked refuses it).
	Discarded bool
	// DiscardedSince (with Discarded) selects only rows discarded at or
	// after it (their completed_at, on the clock that stamped it): the
	// undo of one bulk discard, which leaves alone the rows discarded
	// before it. Zero: any.
	DiscardedSince time.Time
	// Expect, when > 0, is how many rows a preview counted (Matching):
	// RequeueParked and DiscardParked then change those rows only if the
	// filter still selects exactly that many, and otherwise change nothing
	// and return a *SelectionChanged. 0: no check (the CLI, which counts and
	// changes in one command).
	Expect int64
}

// Status is the status of the rows f selects.
func (f ParkedFilter) Status() string {
	if f.Discarded {
		return StatusDiscarded
	}
	return StatusParked
}

// Row is one outbox row as the sweep and the operator commands see it.
type Row struct {
	ID      int64
	Key     string // idempotency_key
	Effect  string
	Payload string // JSON; carries everything needed to perform the effect
	Status  string
	// Attempts is the budget max_attempts spends: the failed attempts
	// (429 waits and rows handed back spend none), the attempts whose
	// process died (counted by the claim that takes their expired lease),
	// plus the successful one once done. The attempt under way is not in
	// it yet: it is counted by its own end, or by the claim after it.
	Attempts int
	// Deliveries is the number of this claim's request to the handler or
	// agent (its X-Ackd-Attempt): one more for every claim of the row,
	// 429 waits and requeues included, so no number repeats for a row.
	// Only Claim fills it in (0 elsewhere, and on a row written already
	// claimed: its first request is 1).
	Deliveries     int
	ClaimToken     string
	ClaimExpiresAt time.Time // zero when not claimed
	NextAttemptAt  time.Time
	LastError      string // the last failed attempt's error; a done row may keep one from before its success
	Result         string
	CreatedAt      time.Time
	CompletedAt    time.Time // zero until done
	// RequestID names the stored Slack request the row is performed from
	// (an Intent's EventID), or is empty. Request is that request's bytes:
	// Claim fills it in (in the claim's own transaction); it is nil when
	// the row names none, when the request is gone, and on rows read by
	// Get, GetByKey and List.
	RequestID string
	Request   *Request
	// OutcomeUnknown is set once an attempt may have taken effect without
	// ackd learning it: it failed with FailUnknown (a timeout or a reset
	// after the request was sent, a 5xx, Slack's internal_error), or the
	// lease of a claim ran out with neither Complete nor Fail (the process
	// died, or was stopped, mid-call). Claim and Fail set it; nothing
	// clears it. A performer whose effect is not idempotent by shape (a
	// post) looks for its earlier result before acting again.
	OutcomeUnknown bool
	// FirstClaimedAt is when the row was first claimed: no attempt of it
	// began earlier. Zero until then.
	FirstClaimedAt time.Time
	// Note is what the successful attempt said about how it succeeded
	// (Completion.Note: a post found by its confirmation instead of posted
	// again, or posted because the lookup was impossible), or empty.
	Note string
}

// Request is Slack's request exactly as it arrived: the content type Slack
// sent and the body bytes, never re-encoded. One is stored per accepted
// request, however many rows use it.
type Request struct {
	ContentType string
	Body        []byte
}

// NewRow is an outbox row to enqueue. Enqueueing is idempotent by Key.
type NewRow struct {
	Key     string
	Effect  string
	Payload string // JSON written by ackd (sweep.Payload); the sweep parks a row it cannot decode
	// RequestID, when set, names the stored request the row is performed
	// from (its Intent's EventID; the Intent must carry Request).
	RequestID string
	// ClaimToken, when set, writes the row already leased to this token
	// until the store's now + ClaimLease: the inline attempt of a
	// synchronous answer owns the row before any sweep can see it. A row
	// that already existed (a redelivery) is not touched. Only
	// RecordIntent honours it.
	ClaimToken string
	ClaimLease time.Duration
	// Delay, when positive, makes the row first due Delay after the
	// store's now (its created_at, on the store's clock) instead of at
	// once: a timer, such as a workflow step's deadline. It must stay
	// within the longest backoff: a claim takes a row due further ahead
	// for one scheduled by a clock that was ahead, and makes it due now.
	Delay time.Duration
}

// Intent is what an accepted Slack request commits before it is acked: one
// receipt keyed by EventID (an event_id, or an operation id for commands and
// interactions) and the outbox rows it implies.
type Intent struct {
	EventID   string
	EventType string
	Rows      []NewRow
	// Request, when set, is stored once under EventID in the same
	// transaction (a redelivery stores nothing new), for the rows whose
	// RequestID names it.
	Request *Request
	// ResolveBy is how long RecordIntent may go on asking the database
	// what became of a COMMIT whose answer did not arrive before ctx ended
	// (Slack's own deadline, past the ack budget). Zero, or a time before
	// ctx's deadline: the last part of ctx's time is kept for asking.
	ResolveBy time.Time
}

// FailKind says how Fail reschedules a row.
type FailKind int

const (
	FailRetryable   FailKind = iota // spend an attempt, back off; park when attempts run out
	FailPermanent                   // park now
	FailRateLimited                 // retry at retryAfter, attempts unchanged
	// FailUnknown is FailRetryable for an attempt that may have taken
	// effect (its request was sent and no definite answer came back): the
	// row is also marked Row.OutcomeUnknown, for good.
	FailUnknown
)

// FailResult is what Fail did.
type FailResult struct {
	Held          bool // false: the lease was lost and nothing was written
	Status        string
	Attempts      int
	NextAttemptAt time.Time
}

// PruneResult counts what one Prune deleted.
type PruneResult struct {
	Receipts  int64
	Done      int64
	Discarded int64 // discarded rows, pruned on done rows' retention
	Requests  int64 // stored Slack requests no row needs any more
	Stops     int64 // users' stops (ackd_stream_stops), pruned on done rows' retention
}

// Queue is the cheap view of the outbox used by metrics, health and
// sd_notify: rows by status and the age of the oldest pending row.
type Queue struct {
	Pending, Done, Parked, Discarded int64
	// OldestPending is the age of the oldest pending row that no route
	// pause holds (0 when none): a paused route's rows wait for a resume,
	// not a sweep, and are counted apart (RoutePauses.PausedRoutes).
	OldestPending time.Duration
}

// Stats adds what the status command shows.
type Stats struct {
	Queue
	Receipts      int64
	Recovered     int64 // receipts of intents catch-up recorded (msg:…, mention:…)
	Leased        int64 // pending rows under an unexpired lease
	SchemaVersion int
	// Due counts, by effect, the pending rows that are due and under no
	// live lease: rows a sweep would take now (not a paused route's: no
	// sweep takes them, RoutePauses counts them). Rows that stay here are
	// waiting for a process that can perform them (the status command
	// compares them with what the running daemons perform).
	Due map[string]int64
}

// EventCheck is what CheckEvents found for a list of event ids.
type EventCheck struct {
	Receipts int      // ids with a receipt
	WithRows int      // ids with at least one outbox row keyed "{id}:…"
	Missing  []string // ids without a receipt (first few)
}

// Add counts one checked id: whether it has a receipt and rows. Missing
// keeps the first ten ids without a receipt.
func (c *EventCheck) Add(id string, receipt, rows bool) {
	if receipt {
		c.Receipts++
	} else if len(c.Missing) < 10 {
		c.Missing = append(c.Missing, id)
	}
	if rows {
		c.WithRows++
	}
}

// Instance is one running `ackd serve` on the database (table ackd_instances).
type Instance struct {
	ID          string // random per process start
	PID         int
	Host        string
	Listen      string
	StartedAt   time.Time
	HeartbeatAt time.Time // set by the store on Heartbeat
	// State is what the daemon says about itself (JSON, e.g. its Socket
	// Mode connections), refreshed by each Heartbeat; "" when it says
	// nothing. The store keeps it as it is.
	State string
	// Performs lists what the instance can perform: the effects it claims,
	// and capabilities such as "forward.signed" (sweep.Performs). nil: not
	// recorded (an ackd from before the column, or a schema without it).
	Performs []string
}

// JoinPerforms is how the engines store Instance.Performs: space-separated,
// nil as NULL.
func JoinPerforms(p []string) *string {
	if p == nil {
		return nil
	}
	s := strings.Join(p, " ")
	return &s
}

// SplitPerforms reads what JoinPerforms stored; valid false is NULL (nil).
func SplitPerforms(s string, valid bool) []string {
	if !valid {
		return nil
	}
	return append([]string{}, strings.Fields(s)...)
}

// CanPerform reports whether the instance can perform what (an effect or a
// capability); an instance that recorded nothing may.
func (in Instance) CanPerform(what string) bool {
	return in.Performs == nil || slices.Contains(in.Performs, what)
}
