package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ackd/ackd/store"
)

// Probes from anyone. /healthz and /metrics may be served on the Slack
// listener, to anyone who can reach it, at any rate; each /healthz commits a
// write (on PostgreSQL every replica's probes contend for one row) and each
// /metrics counts the outbox (and reads /proc, and encodes and gzips every
// series). So their answers are cached: the write check and the /metrics
// page are made at most once per Options.ProbeEvery (a second), however
// many probes arrive,
// and a probe that comes while one is being made waits for it instead of
// starting another. 1,000 probes a second cost the database one write and
// one count a second.

// DefaultProbeEvery is the default for Options.ProbeEvery.
const DefaultProbeEvery = time.Second

// cached runs fn at most once per every and shares its result.
type cached[T any] struct {
	fn      func(ctx context.Context) (T, error)
	every   time.Duration
	timeout time.Duration // bounds one run of fn

	mu      sync.Mutex
	at      time.Time     // when the cached answer's check started; zero before the first
	val     T             // the cached answer: fn's value
	err     error         // and its error
	running chan struct{} // closed when the check in flight ends; nil when none
	runs    int           // checks made, for tests
}

func newCached[T any](every, timeout time.Duration, fn func(ctx context.Context) (T, error)) *cached[T] {
	return &cached[T]{fn: fn, every: every, timeout: timeout}
}

// get returns the answer of a check started at most every ago, running one
// when there is none (or waiting for the one in flight), and the age of the
// answer. The check runs under its own deadline, not ctx: a probe that goes
// away does not cancel the check others wait for.
func (c *cached[T]) get(ctx context.Context) (T, time.Duration, error) {
	c.mu.Lock()
	if !c.at.IsZero() && time.Since(c.at) < c.every {
		defer c.mu.Unlock()
		return c.val, time.Since(c.at), c.err
	}
	if running := c.running; running != nil {
		// The answer of the check in flight, however long it takes
		// (its timeout bounds it).
		c.mu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			var zero T
			return zero, 0, ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.val, time.Since(c.at), c.err
	}
	done := make(chan struct{})
	c.running = done
	c.runs++
	c.mu.Unlock()
	started := time.Now()
	cctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	val, err := c.fn(cctx)
	cancel()
	c.mu.Lock()
	c.at, c.val, c.err, c.running = started, val, err, nil
	c.mu.Unlock()
	close(done)
	return val, time.Since(started), err
}

// checks is how many times fn ran.
func (c *cached[T]) checks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs
}

// probeCache holds the database answer behind /healthz; /metrics has its
// own (metrics.handler).
type probeCache struct {
	write *cached[struct{}]
}

func newProbeCache(st store.Store, log *slog.Logger, every time.Duration) *probeCache {
	return &probeCache{
		write: newCached(every, time.Second, func(ctx context.Context) (struct{}, error) {
			err := st.CheckWrite(ctx)
			if err != nil {
				// Once per check, not per probe.
				log.Warn("health check failed", "err", err)
			}
			return struct{}{}, err
		}),
	}
}
