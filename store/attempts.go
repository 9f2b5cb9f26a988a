package store

import (
	"context"
	"time"
)

// Attempt outcomes (Attempt.Outcome).
const (
	AttemptDone    = "done"    // the effect succeeded; the row is done
	AttemptRetry   = "retry"   // it failed and the row waits for another attempt
	AttemptParked  = "parked"  // it failed for good; the row is parked
	AttemptFenced  = "fenced"  // its claim had lost the lease: nothing of it was written to the row
	AttemptUnknown = "unknown" // its claimer ended neither way (died, or stopped, mid-effect): the lease ran out
	// AttemptUnrecorded is never stored: Attempts lists it for the
	// attempts a row counts that were made before the database kept their
	// history (an upgraded row), so that the list and the row's attempts
	// agree. Only their number is known.
	AttemptUnrecorded = "unrecorded"
)

// UnrecordedError is the Error of an AttemptUnrecorded attempt.
const UnrecordedError = "made before this database recorded attempts: only their count (the row's attempts) is known"

// WithUnrecorded puts in front of a row's recorded attempts (oldest first)
// one AttemptUnrecorded for each attempt the row counts (counted, its
// attempts column) beyond those in its history (each of which it may have
// counted: a fenced or unknown one was counted by the claim that took its
// lease), started at start (the row's first claim, or its creation), and
// numbers them all from 1.
func WithUnrecorded(got []Attempt, rowID int64, counted int, start time.Time) []Attempt {
	missing := counted - len(got)
	if missing <= 0 {
		return got
	}
	out := make([]Attempt, 0, missing+len(got))
	for range missing {
		out = append(out, Attempt{RowID: rowID, StartedAt: start, Outcome: AttemptUnrecorded, Error: UnrecordedError})
	}
	out = append(out, got...)
	for i := range out {
		out[i].N = i + 1
	}
	return out
}

// Attempt is one performance of a row, recorded in the database on both
// engines and pruned with its row (issue 31, DESIGN §11 "The console").
//
// One claim makes one attempt (the engines key an attempt by its claim
// token). Complete, CompleteBatch and Fail record it in their own
// transaction, with one statement however many rows they end; a late one,
// whose fence finds the lease lost, records it as fenced in the same
// transaction and changes nothing else. An attempt nobody ended is recorded
// as unknown by the claim (or the discard) that takes the row from its
// expired lease, inside that claim's statement, with the old claim's start;
// a later Complete or Fail of the same claim turns it into fenced.
//
// N numbers a row's attempts from 1 in the order they were recorded. It
// counts every claim that performed the row, so it matches the row's
// attempts column while each attempt ends in Complete or Fail or is taken
// over as unknown by the next claim (which counts it); it runs ahead of it
// by the attempts that column does not count (rate limited and fenced
// ones) and keeps counting across a requeue, which starts the column again
// from 0. A row whose attempts began before the history was kept lists
// those as AttemptUnrecorded (WithUnrecorded).
type Attempt struct {
	RowID     int64
	N         int       // 1 for the row's first attempt
	StartedAt time.Time // the claim's time on the store's clock
	EndedAt   time.Time // zero for an unknown outcome (nobody saw it end)
	Outcome   string    // AttemptDone, AttemptRetry, …
	Error     string    // the failure's text; "" when it succeeded
	// Status is the HTTP status of the handler's answer ("500") or Slack's
	// error ("channel_not_found"); "" when neither applies.
	Status string
	// Result is what the attempt produced: a Slack message ts, the
	// handler's status; "" when nothing.
	Result string
}

// AttemptLog reads the attempts of a row. Recording happens inside the
// sweep's own Complete/CompleteBatch/Fail transactions (never on the ack
// path).
type AttemptLog interface {
	// Attempts returns row id's attempts, oldest first (an empty list for a
	// row never attempted, or a database whose schema predates attempts;
	// ErrNotFound when there is no such row).
	Attempts(ctx context.Context, id int64) ([]Attempt, error)
}

// AttemptNote is what the performer knows of an attempt that the store
// does not, passed to Complete/CompleteBatch (Completion.Attempt) and Fail
// (Failure.Attempt) to be recorded with it.
type AttemptNote struct {
	// StartedAt is the claim's time (sweep's Job.ClaimedAt), or when the
	// performer began; zero records the attempt's end as its start.
	StartedAt time.Time
	Status    string // Attempt.Status: the handler's HTTP status or Slack's error
	Result    string // Attempt.Result: a message ts, the handler's status
}

// Failure is one failed attempt, for Fail.
type Failure struct {
	Kind FailKind
	// Msg is kept as the row's last_error and as the attempt's error.
	Msg string
	// RetryAfter is when a FailRateLimited row is due again.
	RetryAfter time.Duration
	Attempt    AttemptNote
	// GivenBack: nothing was attempted (this process lacks what the row
	// needs and hands it back for one that has it): no attempt is recorded.
	GivenBack bool
}
