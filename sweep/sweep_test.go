package sweep_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
	"github.com/ackd/ackd/sweep"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openStore(t *testing.T, now func() time.Time) store.Store {
	t.Helper()
	sch, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ackd.db"),
		store.Options{Schema: string(sch), Now: now, BackoffBase: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func enqueue(t *testing.T, s store.Store, n int, effect string) {
	t.Helper()
	for i := range n {
		p, _ := sweep.Payload{Route: "r", Source: sweep.SourceEvent}.Encode()
		_, err := s.RecordIntent(context.Background(), store.Intent{
			EventID: fmt.Sprintf("Ev%d", i), EventType: "message",
			Rows: []store.NewRow{{Key: fmt.Sprintf("Ev%d:r", i), Effect: effect, Payload: p}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// logSink captures log records for assertions.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logSink) find(sub string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if contains(s, sub) {
			return s
		}
	}
	return ""
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// countingStore counts how completions reach the store.
type countingStore struct {
	store.Store
	mu      sync.Mutex
	single  int
	calls   int
	batched map[int64]int
}

func (s *countingStore) Complete(ctx context.Context, id int64, token, result string, f []store.NewRow) (bool, error) {
	s.mu.Lock()
	s.single++
	s.mu.Unlock()
	return s.Store.Complete(ctx, id, token, result, f)
}

func (s *countingStore) CompleteBatch(ctx context.Context, token string, done []store.Completion) ([]bool, error) {
	s.mu.Lock()
	s.calls++
	if s.batched == nil {
		s.batched = map[int64]int{}
	}
	for _, c := range done {
		s.batched[c.ID]++
	}
	s.mu.Unlock()
	return s.Store.CompleteBatch(ctx, token, done)
}

func TestRunOnce(t *testing.T) {
	ctx := context.Background()

	t.Run("performs and completes every claimed row with bounded workers", func(t *testing.T) {
		s := openStore(t, nil)
		enqueue(t, s, 20, "slow")
		var running, peak, calls atomic.Int32
		reg := sweep.Registry{"slow": sweep.PerformerFunc(func(ctx context.Context, j sweep.Job) (sweep.Outcome, error) {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond) // widen the window in which workers overlap
			running.Add(-1)
			calls.Add(1)
			return sweep.Outcome{Result: `{"ok":true}`}, nil
		})}
		sw := sweep.New(s, reg, sweep.Config{Batch: 20, Workers: 3}, quiet(), nil)
		res, err := sw.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Claimed != 20 || res.Done != 20 || calls.Load() != 20 {
			t.Fatalf("result %+v, calls %d", res, calls.Load())
		}
		if p := peak.Load(); p > 3 {
			t.Fatalf("%d effects ran at once, workers = 3", p)
		}
		q, _ := s.Queue(ctx)
		if q.Done != 20 || q.Pending != 0 {
			t.Fatalf("queue %+v", q)
		}
	})

	t.Run("successes are recorded through CompleteBatch, every row once, none per row", func(t *testing.T) {
		s := &countingStore{Store: openStore(t, nil)}
		enqueue(t, s, 30, "log")
		sw := sweep.New(s, sweep.Registry{"log": sweep.LogEffect(quiet())}, sweep.Config{Batch: 30, Workers: 4}, quiet(), nil)
		res, err := sw.RunOnce(ctx)
		if err != nil || res.Done != 30 {
			t.Fatalf("result %+v err %v", res, err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.single != 0 || len(s.batched) != 30 {
			t.Fatalf("%d per-row completions, %d rows through CompleteBatch in %d calls; want 0 and 30",
				s.single, len(s.batched), s.calls)
		}
		for id, n := range s.batched {
			if n != 1 {
				t.Fatalf("row %d completed %d times", id, n)
			}
		}
	})

	t.Run("bounded batch: one sweep claims at most Batch rows", func(t *testing.T) {
		s := openStore(t, nil)
		enqueue(t, s, 10, "log")
		sw := sweep.New(s, sweep.Registry{"log": sweep.LogEffect(quiet())}, sweep.Config{Batch: 4}, quiet(), nil)
		res, _ := sw.RunOnce(ctx)
		if res.Claimed != 4 || res.Done != 4 {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("a row whose effect this ackd does not know is left pending for one that does", func(t *testing.T) {
		s := openStore(t, nil)
		enqueue(t, s, 1, "teleport")
		sw := sweep.New(s, sweep.Registry{"log": sweep.LogEffect(quiet())}, sweep.Config{}, quiet(), nil)
		if res, err := sw.RunOnce(ctx); err != nil || res.Claimed != 0 {
			t.Fatalf("result %+v err %v: a row of an unknown effect was claimed", res, err)
		}
		row, _ := s.GetByKey(ctx, "Ev0:r")
		if row.Status != store.StatusPending || row.ClaimToken != "" || row.Attempts != 0 {
			t.Fatalf("row %+v, want pending and untouched", row)
		}
		// A process that knows the effect performs it.
		known := sweep.Registry{"teleport": sweep.LogEffect(quiet())}
		if res, err := sweep.New(s, known, sweep.Config{}, quiet(), nil).RunOnce(ctx); err != nil || res.Done != 1 {
			t.Fatalf("result %+v err %v from the process that knows the effect", res, err)
		}
	})

	t.Run("failures follow their class", func(t *testing.T) {
		c := &clock{t: time.Unix(1_800_000_000, 0)}
		s := openStore(t, c.Now)
		enqueue(t, s, 3, "flaky")
		reg := sweep.Registry{"flaky": sweep.PerformerFunc(func(ctx context.Context, j sweep.Job) (sweep.Outcome, error) {
			switch j.Row.Key {
			case "Ev0:r":
				return sweep.Outcome{}, fmt.Errorf("connection reset") // unclassified: retryable
			case "Ev1:r":
				return sweep.Outcome{}, &sweep.Failure{Class: sweep.Permanent, Code: "channel_not_found"}
			default:
				return sweep.Outcome{}, &sweep.Failure{Class: sweep.RateLimited, Code: "ratelimited", RetryAfter: 30 * time.Second}
			}
		})}
		sw := sweep.New(s, reg, sweep.Config{}, quiet(), nil)
		res, err := sw.RunOnce(ctx)
		if err != nil || res.Retried != 2 || res.Parked != 1 {
			t.Fatalf("result %+v err %v", res, err)
		}
		r0, _ := s.GetByKey(ctx, "Ev0:r")
		r1, _ := s.GetByKey(ctx, "Ev1:r")
		r2, _ := s.GetByKey(ctx, "Ev2:r")
		if r0.Status != "pending" || r0.Attempts != 1 || r0.LastError != "connection reset" {
			t.Errorf("retryable row %+v", r0)
		}
		if r1.Status != "parked" || r1.LastError != "channel_not_found" {
			t.Errorf("permanent row %+v", r1)
		}
		if r2.Status != "pending" || r2.Attempts != 0 || !r2.NextAttemptAt.Equal(c.Now().Add(30*time.Second)) {
			t.Errorf("rate-limited row %+v", r2)
		}
	})

	t.Run("a completion after the lease was taken over is fenced and logged", func(t *testing.T) {
		c := &clock{t: time.Unix(1_800_000_000, 0)}
		s := openStore(t, c.Now)
		enqueue(t, s, 1, "slow")
		var performed atomic.Int32
		reg := sweep.Registry{"slow": sweep.PerformerFunc(func(ctx context.Context, j sweep.Job) (sweep.Outcome, error) {
			if performed.Add(1) == 1 {
				// While the first attempt is still running, its lease expires
				// and another sweep takes the row over.
				c.Advance(2 * time.Minute)
				if rows, err := s.Claim(ctx, "other", 10, time.Minute, nil); err != nil || len(rows) != 1 {
					t.Errorf("takeover claim: %v %v", rows, err)
				}
			}
			return sweep.Outcome{Result: `{"ts":"1"}`}, nil
		})}
		sink := &logSink{}
		sw := sweep.New(s, reg, sweep.Config{Lease: time.Minute, DefaultTimeout: 30 * time.Second},
			slog.New(slog.NewJSONHandler(sink, nil)), nil)
		res, err := sw.RunOnce(ctx)
		if err != nil || res.Fenced != 1 || res.Done != 0 {
			t.Fatalf("result %+v err %v", res, err)
		}
		row, _ := s.GetByKey(ctx, "Ev0:r")
		if row.Status != "pending" || row.ClaimToken != "other" || row.Result != "" {
			t.Fatalf("row after fenced completion %+v", row)
		}
		if line := sink.find("lease lost"); line == "" || !contains(line, `"key":"Ev0:r"`) || !contains(line, `"level":"WARN"`) {
			t.Fatalf("no warning naming the row; log: %v", sink.lines)
		}
	})

	t.Run("shutdown abandons in-flight effects to their lease", func(t *testing.T) {
		s := openStore(t, nil)
		enqueue(t, s, 1, "hang")
		started := make(chan struct{})
		reg := sweep.Registry{"hang": sweep.PerformerFunc(func(ctx context.Context, j sweep.Job) (sweep.Outcome, error) {
			close(started)
			<-ctx.Done()
			return sweep.Outcome{}, ctx.Err()
		})}
		sw := sweep.New(s, reg, sweep.Config{}, quiet(), nil)
		cctx, cancel := context.WithCancel(ctx)
		go func() { <-started; cancel() }()
		res, err := sw.RunOnce(cctx)
		if err != nil || res.Abandoned != 1 {
			t.Fatalf("result %+v err %v", res, err)
		}
		row, _ := s.GetByKey(ctx, "Ev0:r")
		if row.Status != "pending" || row.Attempts != 0 || row.ClaimToken == "" {
			t.Fatalf("abandoned row must keep its lease and attempts: %+v", row)
		}
	})

	t.Run("rows still waiting for a worker when shutdown begins are not started", func(t *testing.T) {
		// One worker: the first row's effect sees shutdown begin and
		// returns done (an effect that ignores ctx); the rows behind it
		// must not be started at all.
		s := openStore(t, nil)
		enqueue(t, s, 3, "deaf")
		var performed atomic.Int32
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		reg := sweep.Registry{"deaf": sweep.PerformerFunc(func(context.Context, sweep.Job) (sweep.Outcome, error) {
			performed.Add(1)
			cancel()
			return sweep.Outcome{}, nil
		})}
		res, err := sweep.New(s, reg, sweep.Config{Workers: 1}, quiet(), nil).RunOnce(cctx)
		if err != nil || performed.Load() != 1 || res.Abandoned != 2 || res.Done != 1 {
			t.Fatalf("performed %d, result %+v, err %v; want 1 performed and done, 2 abandoned", performed.Load(), res, err)
		}
	})

	t.Run("an effect that overruns its timeout is retried", func(t *testing.T) {
		s := openStore(t, nil)
		p, _ := sweep.Payload{Route: "r", TimeoutMS: 20}.Encode()
		s.RecordIntent(ctx, store.Intent{EventID: "Ev", EventType: "x",
			Rows: []store.NewRow{{Key: "Ev:r", Effect: "hang", Payload: p}}})
		reg := sweep.Registry{"hang": sweep.PerformerFunc(func(ctx context.Context, j sweep.Job) (sweep.Outcome, error) {
			<-ctx.Done()
			return sweep.Outcome{}, ctx.Err()
		})}
		res, err := sweep.New(s, reg, sweep.Config{}, quiet(), nil).RunOnce(ctx)
		if err != nil || res.Retried != 1 {
			t.Fatalf("result %+v err %v", res, err)
		}
	})

	t.Run("a row that could no longer finish inside the batch's lease is not started", func(t *testing.T) {
		// One worker, three rows of 1 s timeout under a 2 s lease: the
		// first runs; by the time it is done less than a timeout is left,
		// so the others are left to their lease rather than started late,
		// when another sweep may already have claimed them.
		s := openStore(t, nil)
		for i := range 3 {
			p, _ := sweep.Payload{Route: "r", TimeoutMS: 1000}.Encode()
			s.RecordIntent(ctx, store.Intent{EventID: fmt.Sprint("Ev", i), EventType: "x",
				Rows: []store.NewRow{{Key: fmt.Sprintf("Ev%d:r", i), Effect: "slow", Payload: p}}})
		}
		var started atomic.Int32
		reg := sweep.Registry{"slow": sweep.PerformerFunc(func(ctx context.Context, j sweep.Job) (sweep.Outcome, error) {
			started.Add(1)
			time.Sleep(1100 * time.Millisecond) // longer than the lease left for the next row's timeout
			return sweep.Outcome{}, nil
		})}
		sink := &logSink{}
		sw := sweep.New(s, reg, sweep.Config{Batch: 3, Workers: 1, Lease: 2 * time.Second},
			slog.New(slog.NewJSONHandler(sink, nil)), nil)
		res, err := sw.RunOnce(ctx)
		if err != nil || res.Done != 1 || res.Abandoned != 2 || started.Load() != 1 {
			t.Fatalf("result %+v, started %d, err %v", res, started.Load(), err)
		}
		rows, _ := s.List(ctx, store.StatusPending, 10)
		if len(rows) != 2 {
			t.Fatalf("pending rows %d, want 2", len(rows))
		}
		for _, r := range rows {
			if r.Attempts != 0 || r.ClaimToken == "" {
				t.Fatalf("a skipped row must keep its lease and attempts: %+v", r)
			}
		}
		if sink.find("effect not started") == "" {
			t.Fatal("no warning for the rows left to their lease")
		}
	})
}
