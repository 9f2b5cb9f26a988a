package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/sqlitelock"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
	"github.com/ackd/ackd/sweep"
)

// Issue 38 §5: a completion that could not be written is written again
// while its lease holds, so the effect is not repeated when the database
// comes back within the lease.

// flakyStore fails the first fails CompleteBatch calls with err (after
// writing them when commit is set: a commit whose answer was lost), and
// tells onFail of each failure.
type flakyStore struct {
	store.Store
	err    error
	commit bool
	fails  atomic.Int32
	calls  atomic.Int32
	onFail func()
}

func (s *flakyStore) CompleteBatch(ctx context.Context, token string, done []store.Completion) ([]bool, error) {
	s.calls.Add(1)
	if s.fails.Add(-1) >= 0 {
		if s.commit {
			if _, err := s.Store.CompleteBatch(ctx, token, done); err != nil {
				return nil, err
			}
		}
		if s.onFail != nil {
			s.onFail()
		}
		return nil, s.err
	}
	return s.Store.CompleteBatch(ctx, token, done)
}

func countingEffect(n *atomic.Int32) sweep.Registry {
	return sweep.Registry{"log": sweep.PerformerFunc(func(ctx context.Context, j sweep.Job) (sweep.Outcome, error) {
		n.Add(1)
		return sweep.Outcome{Result: `{"ok":true}`}, nil
	})}
}

func TestCompletionWrittenAgainWhileTheLeaseHolds(t *testing.T) {
	ctx := context.Background()

	t.Run("the database away for three writes: the row is done, its effect performed once", func(t *testing.T) {
		s := &flakyStore{Store: openStore(t, nil), err: fmt.Errorf("complete: %w", store.ErrUnavailable)}
		s.fails.Store(3)
		enqueue(t, s, 2, "log")
		var performed atomic.Int32
		sw := sweep.New(s, countingEffect(&performed), sweep.Config{Lease: time.Minute}, quiet(), nil)
		res, err := sw.RunOnce(ctx)
		if err != nil || res.Done != 2 {
			t.Fatalf("RunOnce = %+v, %v; want both rows done", res, err)
		}
		if s.calls.Load() < 4 {
			t.Fatalf("%d writes, want the three failed ones and one more", s.calls.Load())
		}
		mustRows(t, s, store.StatusDone, 1)
		// The next sweep finds nothing: the effect is not repeated.
		if res, err := sw.RunOnce(ctx); err != nil || res.Claimed != 0 {
			t.Fatalf("second RunOnce = %+v, %v", res, err)
		}
		if n := performed.Load(); n != 2 {
			t.Fatalf("effects performed %d times, want 2 (once per row)", n)
		}
	})

	t.Run("a commit whose answer was lost is found done, not written again as lost", func(t *testing.T) {
		s := &flakyStore{Store: openStore(t, nil), err: fmt.Errorf("complete: %w", store.ErrCommitUnknown), commit: true}
		s.fails.Store(1)
		enqueue(t, s, 1, "log")
		var performed atomic.Int32
		sw := sweep.New(s, countingEffect(&performed), sweep.Config{Lease: time.Minute}, quiet(), nil)
		if res, err := sw.RunOnce(ctx); err != nil || res.Done != 1 || res.Fenced != 0 {
			t.Fatalf("RunOnce = %+v, %v; want the row done", res, err)
		}
		r := mustRows(t, s, store.StatusDone, 1)[0]
		got, err := s.Attempts(ctx, r.ID)
		if err != nil || len(got) != 1 || got[0].Outcome != store.AttemptDone {
			t.Fatalf("attempts %+v, %v; want one, done", got, err)
		}
	})

	t.Run("a database that stays away: the writes stop with the lease, the row is left to it", func(t *testing.T) {
		s := &flakyStore{Store: openStore(t, nil), err: fmt.Errorf("complete: %w", store.ErrUnavailable)}
		s.fails.Store(1 << 30)
		enqueue(t, s, 1, "log")
		var performed atomic.Int32
		sw := sweep.New(s, countingEffect(&performed), sweep.Config{Lease: time.Second, DefaultTimeout: 100 * time.Millisecond}, quiet(), nil)
		res, err := sw.RunOnce(ctx)
		if !errors.Is(err, store.ErrUnavailable) || res.Done != 0 {
			t.Fatalf("RunOnce = %+v, %v; want the write's error", res, err)
		}
		if s.calls.Load() < 2 {
			t.Fatalf("%d writes, want it tried again", s.calls.Load())
		}
		if r := mustRows(t, s, store.StatusPending, 1)[0]; r.ClaimToken == "" {
			t.Fatalf("row %+v: want it still under its lease", r)
		}
	})

	t.Run("SQLite's write lock held by another process: done once it is let go", func(t *testing.T) {
		sch, err := os.ReadFile("../schema.sql")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "ackd.db")
		st, err := sqlite.Open(ctx, path, store.Options{Schema: string(sch), BusyTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		var (
			holder *sqlitelock.Holder
			once   sync.Once
		)
		enqueue(t, st, 1, "log")
		reg := sweep.Registry{"log": sweep.PerformerFunc(func(ctx context.Context, j sweep.Job) (sweep.Outcome, error) {
			// The effect succeeds; meanwhile an operator's sqlite3 takes
			// the write lock.
			holder = sqlitelock.Hold(t, path)
			return sweep.Outcome{Result: `{"ok":true}`}, nil
		})}
		released := make(chan struct{})
		wrapped := &busyWatch{Store: st, onBusy: func() { once.Do(func() { holder.Release(t); close(released) }) }}
		sw := sweep.New(wrapped, reg, sweep.Config{Lease: time.Minute}, quiet(), nil)
		res, err := sw.RunOnce(ctx)
		if err != nil || res.Done != 1 {
			t.Fatalf("RunOnce = %+v, %v; want the row done after the lock was let go", res, err)
		}
		select {
		case <-released:
		default:
			t.Fatal("the completion never met the held lock")
		}
		mustRows(t, st, store.StatusDone, 1)
	})
}

// busyWatch tells onBusy when a CompleteBatch fails on lock contention.
type busyWatch struct {
	store.Store
	onBusy func()
}

func (s *busyWatch) CompleteBatch(ctx context.Context, token string, done []store.Completion) ([]bool, error) {
	held, err := s.Store.CompleteBatch(ctx, token, done)
	if store.IsBusy(err) {
		s.onBusy()
	}
	return held, err
}

func mustRows(t *testing.T, s store.Store, status string, n int) []store.Row {
	t.Helper()
	rows, err := s.List(context.Background(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Row
	for _, r := range rows {
		if r.Status != status {
			t.Fatalf("row %d is %s, want %s: %+v", r.ID, r.Status, status, r)
		}
		out = append(out, r)
	}
	if len(out) < n {
		t.Fatalf("%d rows, want %d", len(out), n)
	}
	return out
}
