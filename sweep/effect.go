package sweep

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ackd/ackd/store"
)

// Job is one claimed outbox row handed to a performer.
type Job struct {
	Row     store.Row
	Payload Payload
	// Attempt numbers this request to the handler or agent (X-Ackd-Attempt):
	// 1 for the first, one more for every claim of the row, 429 waits,
	// crashes and requeues included, so a handler never sees a number twice
	// for one row (Row.Deliveries; Row.Attempts + 1 for a row not claimed
	// by Claim). It is not the budget max_attempts spends: that is
	// Row.Attempts (see Job.last).
	Attempt int
	// ClaimedAt is when this attempt's claim was stamped, on the store's
	// clock (the lease's end less its length); zero when not known.
	ClaimedAt time.Time
	// Timeout is the effect's deadline as the sweep set it (the route's
	// timeout, within the lease and an inline attempt's budget); zero when
	// not known (a performer called directly).
	Timeout time.Duration
	// Progress keeps what this attempt has done so far in the row, fenced
	// by its claim token (store.Store.SaveProgress): an effect that works
	// for long (a stream) saves there what the next attempt needs to
	// finish it. A sweep always sets it; nil when a performer is called
	// directly (a test).
	Progress Progress
	// Stops is the store's record of users' stops (stop.go): a stream
	// reads its thread's, a stream_stop row writes one. A sweep always
	// sets it; nil when a performer is called directly.
	Stops store.StreamStops
}

// attemptNumber is the X-Ackd-Attempt of a request made for row (see
// Job.Attempt).
func attemptNumber(row store.Row) int {
	if row.Deliveries > 0 {
		return row.Deliveries
	}
	return row.Attempts + 1
}

// last reports whether this attempt is the row's last one before it parks
// (a retryable failure now spends the last of max attempts).
func (j Job) last(max int) bool { return max > 0 && j.Row.Attempts+1 >= max }

// Progress is one claimed row's saved progress (see Job.Progress).
type Progress interface {
	// Load returns what the row's attempts saved last ("" when nothing).
	Load(ctx context.Context) (string, error)
	// Save replaces it if the claim still holds the row; held == false:
	// the lease was lost and nothing was written.
	Save(ctx context.Context, progress string) (held bool, err error)
}

// Outcome is what a successful effect reports. Result is stored in
// outbox.result (JSON, or empty); FollowUps are enqueued in the same
// transaction as the fenced completion, and only if the fence holds.
type Outcome struct {
	Result    string
	FollowUps []store.NewRow
	// Reply and ReplyType are the target's answer body and content type
	// (redeliver), for an inline attempt whose caller answers Slack with
	// them. They are not stored.
	Reply     []byte
	ReplyType string
	// Note is stored in the row's note (store.Row.Note): how the attempt
	// succeeded, when that is worth an operator's reading (a post found by
	// its confirmation, or posted because the lookup was impossible).
	Note string
}

// Performer performs one effect kind. It must honour ctx (the effect's
// timeout, shorter than the lease) and return nil or an error; errors that
// are not a *Failure are treated as retryable.
type Performer interface {
	Perform(ctx context.Context, job Job) (Outcome, error)
}

// PerformerFunc adapts a function to Performer.
type PerformerFunc func(ctx context.Context, job Job) (Outcome, error)

// Perform calls f.
func (f PerformerFunc) Perform(ctx context.Context, job Job) (Outcome, error) { return f(ctx, job) }

// Registry maps an outbox row's effect name to its performer.
type Registry map[string]Performer

// Class says what the sweep does with a failed attempt.
type Class int

const (
	Retryable   Class = iota // back off and try again; park when attempts run out
	Permanent                // park now: retrying cannot help
	RateLimited              // try again after RetryAfter without spending an attempt
	Unavailable              // this process cannot perform the row (a credential is missing): give it back untouched
	Waiting                  // not yet: the row's team has no installation, or its tokens do not open with the key; try again after RetryAfter without spending an attempt
)

func (c Class) String() string {
	switch c {
	case Permanent:
		return "permanent"
	case RateLimited:
		return "rate_limited"
	case Unavailable:
		return "unavailable"
	case Waiting:
		return "waiting"
	default:
		return "retryable"
	}
}

// Failure is a classified effect error.
type Failure struct {
	Class      Class
	RetryAfter time.Duration // RateLimited and Waiting only
	Code       string        // short machine code: a Slack error ("channel_not_found"), "http_503", "timeout"…
	Err        error
	// Needs (Unavailable only) names the capability this process lacks, as
	// instances record it (Sweeper.Performs): a row past HandBackLimit parks
	// only when no live instance has it. Empty: park at the limit.
	Needs string
	// NotSent: the attempt's request never left (a refused connection, a
	// name that did not resolve, a lookup that stopped before the call), so
	// a retryable failure cannot have taken effect. A retryable failure
	// without it may have (its outcome is unknown: store.FailUnknown).
	NotSent bool
}

func (f *Failure) Error() string {
	if f.Code != "" && f.Err != nil && f.Err.Error() != f.Code {
		return fmt.Sprintf("%s: %v", f.Code, f.Err)
	}
	if f.Err != nil {
		return f.Err.Error()
	}
	return f.Code
}

func (f *Failure) Unwrap() error { return f.Err }

// AsFailure classifies any error: a *Failure as itself, anything else as retryable.
func AsFailure(err error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	return &Failure{Class: Retryable, Err: err}
}

// completion is o as row id's store.Completion, with the attempt's details
// (started: its recorded start).
func (o Outcome) completion(id int64, started time.Time) store.Completion {
	status, res := o.attemptResult()
	return store.Completion{ID: id, Result: o.Result, FollowUps: o.FollowUps, Note: o.Note,
		Attempt: store.AttemptNote{StartedAt: started, Status: status, Result: res}}
}

// attemptResult reads what a successful attempt's history shows from its
// stored result (each effect's JSON): status is the handler's HTTP status
// ("status": forward, redeliver, step, stream), result the message's ts
// when there is one (post, update, react, stream), else that status.
func (o Outcome) attemptResult() (status, result string) {
	if o.Result == "" {
		return "", ""
	}
	var r struct {
		Status json.Number `json:"status"`
		TS     string      `json:"ts"`
	}
	if json.Unmarshal([]byte(o.Result), &r) != nil {
		return "", ""
	}
	status = r.Status.String()
	return status, cmp.Or(r.TS, status)
}

// status is what a failed attempt's history shows as its status: the HTTP
// status of an answer ("http_503" → "503"), else the failure's code,
// Slack's error among them ("channel_not_found", "ratelimited", "timeout").
func (f *Failure) status() string {
	if n, ok := strings.CutPrefix(f.Code, "http_"); ok {
		return n
	}
	return f.Code
}
