package sqlite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

func TestFutureLease(t *testing.T) {
	testFutureLease(t, func(t *testing.T, now func() time.Time, log *slog.Logger) store.Store {
		return mustOpen(t, filepath.Join(t.TempDir(), "ackd.db"), store.Options{Now: now, Logger: log})
	})
}

// testFutureLease is engine-agnostic (it speaks only store.Store), ready for
// store/storetest: open returns a fresh, empty store whose clock is now and
// whose logger is log.
//
// The rule: a lease ending later than now + its own length (each claim
// records the length it stamped) cannot have been stamped with a right
// clock, so a claim treats it as expired and logs the row once with both
// times. One lease period of slack (expired beyond now + twice its length)
// keeps a small step back from taking rows a sweeper is still working on. Rows due beyond the
// longest backoff (+ the same slack) are made due now, likewise.
func testFutureLease(t *testing.T, open func(t *testing.T, now func() time.Time, log *slog.Logger) store.Store) {
	const lease = 10 * time.Minute
	ctx := context.Background()

	t.Run("rows recorded and leased while the clock ran a year ahead are taken once the clock is set right, and logged once per row with both times", func(t *testing.T) {
		c, logs := newClock(), &syncBuffer{}
		s := open(t, c.Now, slog.New(slog.NewJSONHandler(logs, nil)))
		right := c.Now()
		c.Advance(365 * 24 * time.Hour) // booted with a wrong clock
		if _, err := s.RecordIntent(ctx, intent("EvAhead", "a", "b")); err != nil {
			t.Fatal(err)
		}
		ahead, err := s.Claim(ctx, "A", 10, lease, nil)
		if err != nil || len(ahead) != 2 {
			t.Fatalf("claim ahead: %d rows, %v", len(ahead), err)
		}
		stamped := ahead[0].ClaimExpiresAt

		c.Advance(-365 * 24 * time.Hour) // NTP steps the clock back; sweeper A is gone
		got, err := s.Claim(ctx, "B", 10, lease, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Fatalf("after the clock was set right, a claim got %d rows; the year-ahead lease still holds them", len(got))
		}
		for _, r := range got {
			if !r.ClaimExpiresAt.Equal(right.Add(lease)) {
				t.Errorf("row %d leased until %s, want now+lease %s", r.ID, r.ClaimExpiresAt, right.Add(lease))
			}
		}
		// The fence still holds: the old token lost the rows, the new one has them.
		if held, err := s.Complete(ctx, ahead[0].ID, "A", "", nil); err != nil || held {
			t.Fatalf("complete with the year-ahead token: held=%v err=%v, want lease lost", held, err)
		}
		if held, err := s.Complete(ctx, got[0].ID, "B", "", nil); err != nil || !held {
			t.Fatalf("complete with the new token: held=%v err=%v", held, err)
		}

		warns := logs.records("treated as expired")
		if len(warns) != 2 {
			t.Fatalf("%d log records about the future lease, want one per row (2):\n%s", len(warns), logs)
		}
		ids := map[float64]bool{}
		for _, w := range warns {
			ids[w["id"].(float64)] = true
			if w["level"] != "WARN" {
				t.Errorf("logged at %v, want WARN", w["level"])
			}
			if w["lease_until"] != stamped.UTC().Format(time.RFC3339Nano) || w["now"] != right.UTC().Format(time.RFC3339Nano) {
				t.Errorf("log has lease_until=%v now=%v, want %s and %s", w["lease_until"], w["now"], stamped.UTC().Format(time.RFC3339Nano), right.UTC().Format(time.RFC3339Nano))
			}
		}
		if len(ids) != 2 {
			t.Fatalf("logged rows %v, want both rows once", ids)
		}
		// Recorded while the clock was ahead, the rows were also due a year
		// ahead: made due now, and logged once each.
		if due := logs.records("made due now"); len(due) != 2 {
			t.Fatalf("%d log records about the future due time, want 2:\n%s", len(due), logs)
		}

		// Claims after that neither take the rows again nor log them again.
		c.Advance(time.Minute)
		if again, err := s.Claim(ctx, "C", 10, lease, nil); err != nil || len(again) != 0 {
			t.Fatalf("a later claim got %d rows (%v); B's lease is valid", len(again), err)
		}
		c.Advance(2 * lease)
		if _, err := s.Claim(ctx, "D", 10, lease, nil); err != nil {
			t.Fatal(err)
		}
		if n := len(logs.records("treated as expired")) + len(logs.records("made due now")); n != 4 {
			t.Fatalf("%d log records after more claims, want still 4", n)
		}
	})

	t.Run("a lease stamped with a right clock is honoured until it expires, through small steps back, and nothing is logged", func(t *testing.T) {
		c, logs := newClock(), &syncBuffer{}
		s := open(t, c.Now, slog.New(slog.NewJSONHandler(logs, nil)))
		if _, err := s.RecordIntent(ctx, intent("EvFair", "a")); err != nil {
			t.Fatal(err)
		}
		if rows, err := s.Claim(ctx, "A", 10, lease, nil); err != nil || len(rows) != 1 {
			t.Fatalf("claim: %d rows, %v", len(rows), err)
		}
		c.Advance(lease - time.Second)
		if rows, err := s.Claim(ctx, "B", 10, lease, nil); err != nil || len(rows) != 0 {
			t.Fatalf("a claim inside A's lease got %d rows (%v)", len(rows), err)
		}
		c.Advance(-5 * time.Second) // a small step back: A's lease still ends before now+lease
		if rows, err := s.Claim(ctx, "B", 10, lease, nil); err != nil || len(rows) != 0 {
			t.Fatalf("after a small step back a claim got %d rows (%v); A's lease is still fair", len(rows), err)
		}
		c.Advance(10 * time.Second)
		if rows, err := s.Claim(ctx, "B", 10, lease, nil); err != nil || len(rows) != 1 {
			t.Fatalf("after A's lease expired a claim got %d rows (%v)", len(rows), err)
		}
		// B has just stamped its lease; the clock steps back by most of a
		// lease period (NTP stepping a clock that drifted): B keeps the row.
		c.Advance(-(lease - time.Second))
		if rows, err := s.Claim(ctx, "C", 10, lease, nil); err != nil || len(rows) != 0 {
			t.Fatalf("after a step back shorter than a lease a claim took %d rows (%v) from a sweeper still working on them", len(rows), err)
		}
		if n := len(logs.records("treated as expired")); n != 0 {
			t.Fatalf("%d log records about future leases, want none:\n%s", n, logs)
		}
	})

	t.Run("a live lease longer than this claim's lease is another configuration's, not a time from the future: it holds", func(t *testing.T) {
		c, logs := newClock(), &syncBuffer{}
		s := open(t, c.Now, slog.New(slog.NewJSONHandler(logs, nil)))
		if _, err := s.RecordIntent(ctx, intent("EvLong", "a")); err != nil {
			t.Fatal(err)
		}
		// The daemon runs with lease = "24h"; a hand-run sweep with the
		// default lease comes along while the daemon works on the row.
		if rows, err := s.Claim(ctx, "Long", 10, 24*time.Hour, nil); err != nil || len(rows) != 1 {
			t.Fatalf("claim: %d rows, %v", len(rows), err)
		}
		c.Advance(lease)
		rows, err := s.Claim(ctx, "B", 10, lease, nil)
		if err != nil || len(rows) != 0 {
			t.Fatalf("a %s claim took %d rows (%v) from a live 24h lease", lease, len(rows), err)
		}
		if n := len(logs.records("treated as expired")); n != 0 {
			t.Fatalf("%d log records about future leases, want none:\n%s", n, logs)
		}
		if held, err := s.Complete(ctx, 1, "Long", "", nil); err != nil || !held {
			t.Fatalf("the 24h holder's Complete: held=%v err=%v", held, err)
		}
	})
}

// syncBuffer collects JSON log records from concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records returns the records whose message contains msg.
func (b *syncBuffer) records(msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.Contains(m["msg"].(string), msg) {
			out = append(out, m)
		}
	}
	return out
}
