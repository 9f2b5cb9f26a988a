package slacksim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const benchSecret = "bench-secret"

// deliveries records, per event_id, how many deliveries a server saw and
// how many were marked as retries.
type deliveries struct {
	mu      sync.Mutex
	count   map[string]int
	retries int
}

func (d *deliveries) ids() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count
}

// recording wraps next: it decodes each request's envelope, counts it, and
// fails the test on a body that is not a well-formed event_callback.
func recording(t *testing.T, next http.Handler) (http.Handler, *deliveries) {
	d := &deliveries{count: map[string]int{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
			return
		}
		var env struct {
			Type    string `json:"type"`
			EventID string `json:"event_id"`
			Event   struct {
				Type, Channel, User, TS string
			} `json:"event"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Errorf("body is not JSON: %v", err)
		}
		if env.Type != "event_callback" || env.Event.Type != "message" || env.Event.Channel != "CBENCH" || env.Event.User != "UBENCH" || env.Event.TS == "" {
			t.Errorf("unexpected envelope: %s", body)
		}
		d.mu.Lock()
		d.count[env.EventID]++
		if r.Header.Get(HeaderRetryNum) == "1" && r.Header.Get(HeaderRetryReason) == "http_timeout" {
			d.retries++
		}
		d.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	}), d
}

func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/slack/events"
}

func mustBench(t *testing.T, opts BenchOptions) BenchResult {
	t.Helper()
	res, err := Bench(context.Background(), opts)
	if err != nil {
		t.Fatalf("Bench: %v", err)
	}
	return res
}

func checkPercentilesOrdered(t *testing.T, r BenchResult) {
	t.Helper()
	if !(r.P50 <= r.P90 && r.P90 <= r.P99 && r.P99 <= r.P999 && r.P999 <= r.Max) || r.Max <= 0 {
		t.Errorf("percentiles out of order: %v %v %v %v %v", r.P50, r.P90, r.P99, r.P999, r.Max)
	}
}

func TestBenchOpenLoopAgainstCeiling(t *testing.T) {
	h, seen := recording(t, CeilingHandler(benchSecret))
	url := newServer(t, h)

	res := mustBench(t, BenchOptions{
		URL: url, Secret: benchSecret,
		Rate: 200, Duration: 300 * time.Millisecond, DupFraction: 0.2, Seed: 7,
	})

	// 200/s for 300 ms schedules events at 0, 5, …, 295 ms: exactly 60.
	if res.Unique != 60 || res.Skipped != 0 {
		t.Fatalf("unique = %d skipped = %d, want 60 and 0", res.Unique, res.Skipped)
	}
	if res.Duplicates == 0 || res.Sent != res.Unique+res.Duplicates {
		t.Errorf("sent = %d unique = %d duplicates = %d", res.Sent, res.Unique, res.Duplicates)
	}
	if res.Errors != 0 || len(res.StatusCounts) != 1 || res.StatusCounts[200] != res.Sent {
		t.Errorf("status = %v errors = %d (%s), want all %d answered 200", res.StatusCounts, res.Errors, res.FirstError, res.Sent)
	}
	if res.Acked() != res.Sent {
		t.Errorf("Acked = %d, want %d", res.Acked(), res.Sent)
	}
	if len(res.EventIDs) != res.Unique {
		t.Errorf("len(EventIDs) = %d, want %d", len(res.EventIDs), res.Unique)
	}
	checkPercentilesOrdered(t, res)

	// The server saw each acknowledged id, duplicated ones twice and
	// marked as Slack's first retry.
	ids := seen.ids()
	twice := 0
	for id, n := range ids {
		if n == 2 {
			twice++
		} else if n != 1 {
			t.Errorf("%s delivered %d times", id, n)
		}
	}
	if twice != res.Duplicates || seen.retries != res.Duplicates {
		t.Errorf("server saw %d ids twice and %d retries, want %d", twice, seen.retries, res.Duplicates)
	}
	var serverIDs []string
	for id := range ids {
		serverIDs = append(serverIDs, id)
	}
	slices.Sort(serverIDs)
	got := slices.Sorted(slices.Values(res.EventIDs))
	if !slices.Equal(got, serverIDs) {
		t.Errorf("EventIDs differ from the ids the server saw:\n got %v\nwant %v", got, serverIDs)
	}
	slackLike := regexp.MustCompile(`^Ev[0-9A-Z]{13}$`)
	for _, id := range res.EventIDs {
		if !slackLike.MatchString(id) {
			t.Errorf("event id %q does not look like Slack's (Ev and 13 letters)", id)
		}
	}

	t.Run("the same seed duplicates the same events", func(t *testing.T) {
		again := mustBench(t, BenchOptions{
			URL: url, Secret: benchSecret,
			Rate: 200, Duration: 300 * time.Millisecond, DupFraction: 0.2, Seed: 7,
		})
		if again.Duplicates != res.Duplicates || again.RunID == res.RunID {
			t.Errorf("second run: duplicates %d (want %d), run id %q (want new)", again.Duplicates, res.Duplicates, again.RunID)
		}
	})
}

func TestBenchClosedLoop(t *testing.T) {
	h, seen := recording(t, CeilingHandler(benchSecret))
	url := newServer(t, h)
	var progress bytes.Buffer

	res := mustBench(t, BenchOptions{
		URL: url, Secret: benchSecret,
		Concurrency: 4, Duration: 100 * time.Millisecond, DupFraction: 0.5, PayloadBytes: 2048,
		Progress: &progress,
	})
	if res.Mode != "closed" || res.Unique == 0 || res.Sent != res.Unique+res.Duplicates {
		t.Fatalf("mode %s sent = %d unique = %d duplicates = %d", res.Mode, res.Sent, res.Unique, res.Duplicates)
	}
	if res.Errors != 0 || res.StatusCounts[200] != res.Sent {
		t.Errorf("status = %v errors = %d (%s)", res.StatusCounts, res.Errors, res.FirstError)
	}
	if len(res.EventIDs) != res.Unique || len(seen.ids()) != res.Unique || seen.retries != res.Duplicates {
		t.Errorf("EventIDs %d, server ids %d, retries %d; want %d, %d, %d",
			len(res.EventIDs), len(seen.ids()), seen.retries, res.Unique, res.Unique, res.Duplicates)
	}
	checkPercentilesOrdered(t, res)
	// A bytes.Buffer is not a terminal: plain lines, the last one final.
	if out := progress.String(); !strings.Contains(out, "sent ") || strings.Contains(out, "\r") || !strings.HasSuffix(out, "\n") {
		t.Errorf("progress = %q", out)
	}
}

func TestBenchCountsServerErrors(t *testing.T) {
	var n atomic.Int64
	var mu sync.Mutex
	failed := map[string]bool{}
	ceiling := CeilingHandler(benchSecret)
	h, _ := recording(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			var env struct {
				EventID string `json:"event_id"`
			}
			json.NewDecoder(r.Body).Decode(&env)
			mu.Lock()
			failed[env.EventID] = true
			mu.Unlock()
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		ceiling.ServeHTTP(w, r)
	}))
	url := newServer(t, h)

	res := mustBench(t, BenchOptions{URL: url, Secret: benchSecret, Rate: 200, Duration: 300 * time.Millisecond})
	if res.StatusCounts[500] != 20 || res.StatusCounts[200] != 40 || res.Sent != 60 {
		t.Fatalf("status = %v sent = %d, want 20×500 and 40×200 of 60", res.StatusCounts, res.Sent)
	}
	if res.Acked() != 40 || len(res.EventIDs) != 40 {
		t.Errorf("Acked = %d, EventIDs = %d, want 40", res.Acked(), len(res.EventIDs))
	}
	for _, id := range res.EventIDs {
		if failed[id] {
			t.Errorf("%s got 500 but is listed as acknowledged", id)
		}
	}
	var table bytes.Buffer
	res.WriteTable(&table)
	if !strings.Contains(table.String(), "500 × 20") {
		t.Errorf("table does not show the 500s:\n%s", table.String())
	}
}

func TestBenchSkipsAtInFlightCap(t *testing.T) {
	// The receiver never answers; the one in-flight slot stays held until
	// the request times out, so later scheduled events are skipped.
	release := make(chan struct{})
	url := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body to the end lets the server notice the client
		// hanging up, which cancels r.Context().
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	res := mustBench(t, BenchOptions{
		URL: url, Secret: benchSecret,
		Rate: 1000, Duration: 20 * time.Millisecond, MaxInFlight: 1, Timeout: 300 * time.Millisecond,
	})
	if res.Sent+res.Skipped != 20 || res.Sent < 1 || res.Skipped < 1 {
		t.Errorf("sent = %d skipped = %d, want both ≥ 1 summing to 20", res.Sent, res.Skipped)
	}
	if res.Errors != res.Sent || res.FirstError == "" || len(res.StatusCounts) != 0 || len(res.EventIDs) != 0 {
		t.Errorf("errors = %d (%q) status = %v ids = %d, want every request a timeout",
			res.Errors, res.FirstError, res.StatusCounts, len(res.EventIDs))
	}
}

func TestBenchStopsWhenCancelled(t *testing.T) {
	for name, opts := range map[string]BenchOptions{
		"open loop":   {Rate: 50, Duration: time.Hour},
		"closed loop": {Concurrency: 2, Duration: time.Hour},
	} {
		t.Run(name+" returns the partial result and ctx.Err()", func(t *testing.T) {
			arrived := make(chan struct{}, 1)
			ceiling := CeilingHandler(benchSecret)
			opts.URL = newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case arrived <- struct{}{}:
				default:
				}
				ceiling.ServeHTTP(w, r)
			}))
			opts.Secret = benchSecret
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				<-arrived
				cancel()
			}()
			res, err := Bench(ctx, opts)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if res.Sent == 0 || res.Sent != res.Acked()+res.Errors+res.Cancelled {
				t.Errorf("sent %d = acked %d + errors %d + cancelled %d?", res.Sent, res.Acked(), res.Errors, res.Cancelled)
			}
		})
	}
}

func TestBenchRejectsBadOptions(t *testing.T) {
	ok := BenchOptions{URL: "http://127.0.0.1:1/slack/events", Secret: "s", Rate: 1, Duration: time.Second}
	tests := []struct {
		name string
		edit func(*BenchOptions)
	}{
		{"no URL", func(o *BenchOptions) { o.URL = "" }},
		{"URL without scheme", func(o *BenchOptions) { o.URL = "127.0.0.1:8080/slack/events" }},
		{"no secret", func(o *BenchOptions) { o.Secret = "" }},
		{"no duration", func(o *BenchOptions) { o.Duration = 0 }},
		{"negative rate", func(o *BenchOptions) { o.Rate = -1 }},
		{"rate above MaxRate", func(o *BenchOptions) { o.Rate = 2 * MaxRate }},
		{"concurrency above max in flight", func(o *BenchOptions) { o.Rate, o.Concurrency, o.MaxInFlight = 0, 9, 8 }},
		{"dup fraction above 1", func(o *BenchOptions) { o.DupFraction = 1.5 }},
		{"payload above 1 MiB", func(o *BenchOptions) { o.PayloadBytes = maxBody + 1 }},
		{"run id with a quote", func(o *BenchOptions) { o.RunID = `a"b` }},
		{"an unknown kind", func(o *BenchOptions) { o.Kind = "function_execute" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.edit(&o)
			if _, err := Bench(context.Background(), o); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func TestEventBodies(t *testing.T) {
	t.Run("bodies are valid envelopes with unique ids and ts", func(t *testing.T) {
		g := &eventGen{run: "RUN", startMicro: 1_700_000_000_999_998}
		seenTS := map[string]bool{}
		for i := range 5 {
			ev := g.next()
			var env struct {
				Type      string `json:"type"`
				EventID   string `json:"event_id"`
				EventTime int64  `json:"event_time"`
				TeamID    string `json:"team_id"`
				Event     struct {
					Type, Channel, User, Text, TS string
					EventTS                       string `json:"event_ts"`
				} `json:"event"`
			}
			if err := json.Unmarshal(ev.body, &env); err != nil {
				t.Fatalf("event %d: %v\n%s", i, err, ev.body)
			}
			if env.EventID != g.id(int64(i)) || env.Type != "event_callback" || env.TeamID != "TBENCH" ||
				env.Event.Type != "message" || env.Event.Channel != "CBENCH" || env.Event.User != "UBENCH" ||
				env.Event.TS != env.Event.EventTS || env.EventTime == 0 {
				t.Errorf("event %d: unexpected envelope %s", i, ev.body)
			}
			if seenTS[env.Event.TS] {
				t.Errorf("ts %s repeated", env.Event.TS)
			}
			seenTS[env.Event.TS] = true
		}
		if !seenTS["1700000000.999999"] || !seenTS["1700000001.000000"] {
			t.Errorf("ts does not roll over seconds correctly: %v", seenTS)
		}
	})

	t.Run("padding makes the body exactly PayloadBytes", func(t *testing.T) {
		g := &eventGen{run: "RUN", startMicro: 1_700_000_000_000_000, size: 4096, pad: strings.Repeat("x", 4096)}
		ev := g.next()
		if len(ev.body) != 4096 || !json.Valid(ev.body) {
			t.Errorf("len = %d valid = %v", len(ev.body), json.Valid(ev.body))
		}
	})

	t.Run("function_executed bodies are workflow steps keyed by their event id, padded exactly too", func(t *testing.T) {
		for _, size := range []int{0, 4096} {
			g := &eventGen{run: "RUN", key: idKey("RUN"), step: true, startMicro: 1_700_000_000_000_000, size: size, pad: strings.Repeat("x", size)}
			ev := g.next()
			var env struct {
				EventID string `json:"event_id"`
				Event   struct {
					Type        string `json:"type"`
					ExecutionID string `json:"function_execution_id"`
					Token       string `json:"bot_access_token"`
					Function    struct {
						CallbackID string `json:"callback_id"`
					} `json:"function"`
					Inputs map[string]string `json:"inputs"`
				} `json:"event"`
			}
			if err := json.Unmarshal(ev.body, &env); err != nil {
				t.Fatalf("%v\n%s", err, ev.body)
			}
			if env.Event.Type != "function_executed" || env.Event.ExecutionID != g.id(0) || env.EventID != g.id(0) ||
				env.Event.Function.CallbackID != "bench_step" || !strings.HasPrefix(env.Event.Token, "xwfp-") || env.Event.Inputs["text"] == "" {
				t.Errorf("body %s", ev.body)
			}
			if size > 0 && len(ev.body) != size {
				t.Errorf("len = %d, want %d", len(ev.body), size)
			}
		}
	})

	t.Run("a size below the natural size leaves the body unpadded", func(t *testing.T) {
		g := &eventGen{run: "RUN", size: 10, pad: strings.Repeat("x", 10)}
		if ev := g.next(); !json.Valid(ev.body) || len(ev.body) < 100 {
			t.Errorf("body = %s", ev.body)
		}
	})
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 1000; i++ {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Millisecond},
		{0.9, 900 * time.Millisecond},
		{0.99, 990 * time.Millisecond},
		{0.999, 999 * time.Millisecond},
		{1, 1000 * time.Millisecond},
		{0, time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(s, tt.q); got != tt.want {
			t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
	if got := percentile(s[:1], 0.999); got != time.Millisecond {
		t.Errorf("percentile of one sample = %v", got)
	}
}

func TestBenchResultJSON(t *testing.T) {
	r := BenchResult{
		RunID: "R", Mode: "open", TargetRate: 2000, Sent: 10, Unique: 9, Duplicates: 1,
		StatusCounts: map[int]int{200: 9, 500: 1},
		P50:          1500 * time.Microsecond, P90: 2 * time.Millisecond, P99: 3 * time.Millisecond,
		P999: 4 * time.Millisecond, Max: 5 * time.Millisecond, Elapsed: 1500 * time.Millisecond, MaxLag: 250 * time.Microsecond,
		EventIDs: []string{"EvBR-0"},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["p50_ms"] != 1.5 || raw["max_ms"] != 5.0 || raw["elapsed_ms"] != 1500.0 {
		t.Errorf("durations not in ms: %s", b)
	}
	for _, hidden := range []string{"EventIDs", "P50", "Elapsed"} {
		if _, ok := raw[hidden]; ok {
			t.Errorf("%s leaked into JSON: %s", hidden, b)
		}
	}
	var back BenchResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	r.EventIDs = nil
	if back.P50 != r.P50 || back.Elapsed != r.Elapsed || back.MaxLag != r.MaxLag || back.StatusCounts[500] != 1 || back.Sent != 10 {
		t.Errorf("round trip: %+v", back)
	}
}

func TestBenchSpreadsOverReplicas(t *testing.T) {
	var urls []string
	var hits [3]atomic.Int64
	for i := range hits {
		urls = append(urls, newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			CeilingHandler(benchSecret).ServeHTTP(w, r)
		})))
	}
	res := mustBench(t, BenchOptions{URL: urls[0], URLs: urls, Secret: benchSecret, Concurrency: 3, Duration: 100 * time.Millisecond})
	if res.Errors != 0 || res.StatusCounts[200] != res.Sent {
		t.Fatalf("status = %v errors = %d (%s)", res.StatusCounts, res.Errors, res.FirstError)
	}
	var total int64
	for i := range hits {
		n := hits[i].Load()
		if n == 0 {
			t.Errorf("replica %d got no request of %d", i, res.Sent)
		}
		total += n
	}
	if total != int64(res.Sent) {
		t.Errorf("replicas got %d requests, bench sent %d", total, res.Sent)
	}
}

func TestEventIDs(t *testing.T) {
	t.Run("random ids are distinct within a run and differ between runs", func(t *testing.T) {
		a, b := &eventGen{run: "RUNA", key: idKey("RUNA")}, &eventGen{run: "RUNB", key: idKey("RUNB")}
		seen := make(map[string]bool, 200_000)
		for n := range int64(100_000) {
			for _, id := range []string{a.id(n), b.id(n)} {
				if seen[id] {
					t.Fatalf("id %s made twice (n=%d)", id, n)
				}
				seen[id] = true
			}
		}
	})
	t.Run("sequential ids carry the run and the number", func(t *testing.T) {
		g := &eventGen{run: "RUN", sequential: true}
		if id := g.id(42); id != "EvBRUN-42" {
			t.Fatalf("id = %q", id)
		}
	})
}
