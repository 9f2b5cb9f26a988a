package store

import (
	"context"
	"strconv"
	"strings"
)

// StreamStop is a user's Stop of the agent's answers in one thread: Slack's
// agent_session_stopped event (DESIGN §12 "Agent sessions"). It cancels the
// stream rows of that channel and thread whose own event is older than the
// stop (StopTS, Slack's clock): a question asked after the stop is not
// cancelled by it.
type StreamStop struct {
	Channel  string
	ThreadTS string
	StopTS   string // the event's event_ts, as Slack wrote it ("1700000000.000200")
	EventID  string // the event that carried it
}

// StreamStops keeps users' stops in the database, so that every process on
// it (a replica streaming the answer, the sweep that claims a stream row
// later) sees them. One row per thread: the newest stop.
type StreamStops interface {
	// RecordStop keeps st as its thread's stop unless a newer one is
	// recorded already (a retried or reordered event changes nothing);
	// newer reports whether st is now the thread's stop. A StopTS that is
	// not a Slack ts is refused (ErrFilter).
	RecordStop(ctx context.Context, st StreamStop) (newer bool, err error)
	// StreamStopped returns the StopTS of the newest stop recorded for
	// the thread, "" when none: one primary-key read, made by a stream's
	// sweep, never on the ack path.
	StreamStopped(ctx context.Context, channel, threadTS string) (string, error)
}

// SlackTSMicros reads a Slack ts ("1700000000.000200") as microseconds,
// the order Slack's timestamps compare in (as text they compare wrongly
// once their lengths differ). ok is false for anything else.
func SlackTSMicros(ts string) (us int64, ok bool) {
	sec, frac, _ := strings.Cut(ts, ".")
	if sec == "" || len(frac) > 6 {
		return 0, false
	}
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || s < 0 || s > 1<<40 {
		return 0, false
	}
	f := int64(0)
	if frac != "" {
		f, err = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil || f < 0 {
			return 0, false
		}
	}
	return s*1_000_000 + f, true
}
