package store

import (
	"context"
	"time"
)

// Catch-up (package catchup) is a third ingress: it reads messages Slack
// never delivered from conversations.history and records the intents the
// live message (and app_mention) events would have recorded. Its position
// in each channel is a mark kept in the database (table catchup_marks);
// Slack's cursors are not kept (they expire).
//
// A mark is a Slack ts. TS is the newest message known to be recorded: the
// live path and catch-up only ever move it forward. ResumeFrom is set while
// a catch-up that started from the mark is under way: every message up to
// it has been recorded, so a catch-up cut short (a crash, a kill) resumes
// there even though live events moved TS past the messages it had yet to
// record.

// Mark is one channel's position.
type Mark struct {
	Channel    string
	TS         string // newest message ts known to be recorded
	ResumeFrom string // "" unless a catch-up from the mark is under way
	UpdatedAt  time.Time
}

// Recovered is what catch-up records for one message it read from history.
type Recovered struct {
	// Intents are what the live path would have recorded: the message's,
	// and its app_mention's when it mentions the bot. Only an intent some
	// of whose rows are new gets its receipt (and its Request) written, so
	// receipts count messages catch-up acted on, not ones it found done.
	Intents []Intent
	// Channel and TS advance the channel's mark (never back), unless
	// NoMark: a caller that did not read from the mark (a backfill from a
	// later time) must not move it past messages it never read.
	Channel, TS string
	NoMark      bool
	// Resume also advances the channel's resume point, when one is set:
	// the caller has recorded every message of the channel up to TS since
	// it began (a catch-up from the mark, oldest first).
	Resume bool
}

// MarkStore is the part of Store that catch-up uses.
type MarkStore interface {
	// RecordRecovered commits recs, in order, in one transaction and
	// returns the number of outbox rows each inserted: 0 means every row
	// was there already (the live delivery, or an earlier catch-up, came
	// first). On error nothing was written.
	RecordRecovered(ctx context.Context, recs []Recovered) (rows []int, err error)
	// AdvanceMarks moves each channel's mark to its TS when that is newer,
	// creating marks for channels without one. ResumeFrom is ignored.
	AdvanceMarks(ctx context.Context, marks []Mark) error
	// BeginCatchUp sets the channel's resume point to its mark unless one
	// is set already, and returns the mark; ok is false when the channel
	// has no mark (nothing was ever recorded there).
	BeginCatchUp(ctx context.Context, channel string) (m Mark, ok bool, err error)
	// EndCatchUp clears the channel's resume point: the catch-up finished.
	EndCatchUp(ctx context.Context, channel string) error
	// Marks returns every channel's mark, by channel.
	Marks(ctx context.Context) ([]Mark, error)
}

// Receipt prefixes of recovered intents: a recovered message's own
// ("msg:{team}:{channel}:{ts}") and its app_mention's ("mention:…").
const (
	RecoveredMessagePrefix = "msg:"
	RecoveredMentionPrefix = "mention:"
)

// ValidTS reports whether ts has Slack's shape ("1700000000.000100"): ten
// digits, a dot, six digits. Marks are compared as text, which orders such
// values by time.
func ValidTS(ts string) bool {
	if len(ts) != 17 || ts[10] != '.' {
		return false
	}
	for i := 0; i < len(ts); i++ {
		if i != 10 && (ts[i] < '0' || ts[i] > '9') {
			return false
		}
	}
	return true
}

// TSTime is the time a Slack ts stands for (zero when it is not one).
func TSTime(ts string) time.Time {
	if !ValidTS(ts) {
		return time.Time{}
	}
	var sec, us int64
	for _, c := range ts[:10] {
		sec = sec*10 + int64(c-'0')
	}
	for _, c := range ts[11:] {
		us = us*10 + int64(c-'0')
	}
	return time.Unix(sec, us*1000)
}

// TimeTS is t as a Slack ts.
func TimeTS(t time.Time) string {
	us := t.UnixMicro()
	s := make([]byte, 0, 17)
	s = appendPadded(s, us/1e6, 10)
	s = append(s, '.')
	return string(appendPadded(s, us%1e6, 6))
}

func appendPadded(b []byte, v int64, width int) []byte {
	digits := make([]byte, width)
	for i := width - 1; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, digits...)
}
