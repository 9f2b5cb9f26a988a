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
)

// Attempt is one performance of a row, recorded in the database on both
// engines and pruned with its row (issue 31, DESIGN §11 "The console").
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
	// row never attempted; ErrNotFound when there is no such row).
	Attempts(ctx context.Context, id int64) ([]Attempt, error)
}
