package daemon

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
)

// Probes from anyone (issue 21, part 5): the database answers behind
// /healthz and /metrics are cached, so a flood of probes costs the database
// one write check and one count per second.

func TestCachedRunsOnceAtATimeAndOncePerInterval(t *testing.T) {
	t.Parallel()
	var runs, inFlight, most atomic.Int64
	c := newCached(100*time.Millisecond, time.Second, func(ctx context.Context) (int64, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
		return runs.Add(1), nil
	})
	start := time.Now()
	var wg sync.WaitGroup
	var calls atomic.Int64
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < time.Second {
				v, age, err := c.get(context.Background())
				if err != nil || v == 0 || age < 0 || age > time.Second {
					t.Errorf("get = %d, %s, %v", v, age, err)
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	// One run per 100 ms interval, each ending its interval's wait.
	if limit := int64(took/(100*time.Millisecond)) + 2; runs.Load() > limit {
		t.Errorf("%d runs in %s for %d calls, want at most %d", runs.Load(), took, calls.Load(), limit)
	}
	if most.Load() != 1 {
		t.Errorf("%d runs at once, want 1", most.Load())
	}
	t.Logf("%d calls, %d runs in %s", calls.Load(), runs.Load(), took)
}

// TestProbeFloodReachesTheDatabaseOncePerSecond sends /healthz and /metrics
// at about 1,000 a second each to a real server, on the Slack listener, and
// counts the database checks the probes caused.
func TestProbeFloodReachesTheDatabaseOncePerSecond(t *testing.T) {
	t.Parallel()
	schema, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DB = filepath.Join(t.TempDir(), "ackd.db")
	cfg.Listen = "127.0.0.1:0"
	srv, err := New(cfg, Options{Schema: string(schema), Secrets: config.Secrets{SigningSecret: "s"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + srv.Addr()

	// As fast as they go: about 1,000/s on a quiet machine without -race.
	const workers, flood = 16, 2 * time.Second
	var probes atomic.Int64
	var bodies sync.Map
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		path := "/healthz"
		if w%2 == 1 {
			path = "/metrics"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < flood {
				resp, err := http.Get(base + path)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s: %d %s", path, resp.StatusCode, b)
					return
				}
				if path == "/healthz" {
					bodies.Store(strings.TrimSpace(string(b)), true)
				}
				probes.Add(1)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	writes, counts := srv.probes.write.checks(), srv.metrics.page.checks()
	t.Logf("%d probes in %s (%.0f/s): %d write checks, %d /metrics renderings (each one outbox count)", probes.Load(), took.Round(time.Millisecond),
		float64(probes.Load())/took.Seconds(), writes, counts)
	limit := int(took/DefaultProbeEvery) + 2
	if writes > limit || counts > limit {
		t.Errorf("%d write checks and %d /metrics renderings in %s, want at most %d each", writes, counts, took, limit)
	}
	n := 0
	bodies.Range(func(k, _ any) bool {
		n++
		if !strings.HasPrefix(k.(string), "ok (database write checked ") || !strings.HasSuffix(k.(string), " ago)") {
			t.Errorf("/healthz body %q does not say the age of its check", k)
		}
		return true
	})
	if n < 2 {
		t.Errorf("%d distinct /healthz bodies: the age should move", n)
	}
}
