package slacksim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
)

// Defaults applied by Bench to zero-valued options.
const (
	DefaultMaxInFlight    = 4096
	DefaultConcurrency    = 32
	DefaultRequestTimeout = 10 * time.Second

	// MaxRate bounds the open-loop rate: event ts values are spaced one
	// microsecond apart, so a faster run could reuse a later run's ts.
	MaxRate = 1e6
)

// BenchOptions configures a load test of an ackd's /slack/events.
type BenchOptions struct {
	URL string // full URL of /slack/events
	// URLs, when set, are several replicas' /slack/events: requests go to
	// them round-robin, as a load balancer would send them (URL is then
	// only the first of them).
	URLs   []string
	Secret string // signing secret

	// Rate > 0 runs open loop: requests are scheduled at Rate events per
	// second whatever the receiver does, and latency is measured from each
	// scheduled time. Rate == 0 runs closed loop: Concurrency workers each
	// send, wait for the answer, and send again.
	Rate        float64
	Concurrency int // closed loop only; 0 means DefaultConcurrency; at most MaxInFlight

	Duration time.Duration // how long to generate load; in-flight requests then finish

	// DupFraction of the events are delivered a second time, concurrently
	// with the original and marked X-Slack-Retry-Num: 1, the way Slack's
	// near-instant http_timeout retry arrives. 0 ≤ DupFraction ≤ 1.
	DupFraction float64

	// PayloadBytes pads each event's text so the body is about this size;
	// 0 leaves the natural size (about 600 bytes). At most 1 MiB.
	PayloadBytes int

	// Progress receives a one-line status every second: rewritten in place
	// with \r when it is a terminal, one line each otherwise. nil: none.
	Progress io.Writer

	// Client sends the requests; nil means a keep-alive transport sized
	// for the in-flight cap (recommended).
	Client *http.Client

	// Seed drives which events are duplicated; 0 picks one at random. The
	// seed used is reported in BenchResult.
	Seed int64

	MaxInFlight int           // in-flight request cap; 0 means DefaultMaxInFlight
	Timeout     time.Duration // per request; 0 means DefaultRequestTimeout
	RunID       string        // event id infix; "" picks a random one
	// SequentialIDs names event n "EvB{RunID}-{n}", in insertion order;
	// the default is Slack-like random ids ("Ev" and 13 base-32 letters),
	// which land all over the receipt and outbox key indexes as Slack's do.
	SequentialIDs bool

	// Kind is the inner event sent: KindMessage (the default) or
	// KindFunctionExecuted, a workflow step (callback_id "bench_step",
	// with an execution token) whose function_execution_id is the
	// event's id, so that a step route's row, keyed by the execution,
	// is found by the same "{event_id}:…" check as any other.
	Kind string
}

// Event kinds a bench sends.
const (
	KindMessage          = "message"
	KindFunctionExecuted = "function_executed"
)

// BenchResult is what a Bench run measured. Durations are time.Duration in
// Go and milliseconds (float) in JSON.
type BenchResult struct {
	RunID       string  `json:"run_id"`
	Seed        int64   `json:"seed"`
	Mode        string  `json:"mode"` // "open" or "closed"
	TargetRate  float64 `json:"target_rate,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	MaxInFlight int     `json:"max_in_flight,omitempty"`

	Sent       int `json:"sent"`       // requests sent, duplicates included
	Unique     int `json:"unique"`     // distinct events sent
	Duplicates int `json:"duplicates"` // second deliveries sent
	Skipped    int `json:"skipped"`    // requests not sent because the in-flight cap was reached

	StatusCounts map[int]int `json:"status_counts"` // answers by HTTP status
	Errors       int         `json:"errors"`        // transport errors and timeouts
	FirstError   string      `json:"first_error,omitempty"`
	Cancelled    int         `json:"cancelled,omitempty"` // requests cut short by the caller's ctx

	// Latency of requests that got an answer (any status), from the
	// scheduled send time (open loop) or the actual send time (closed loop)
	// to the end of the response body. Exact nearest-rank percentiles.
	P50, P90, P99, P999, Max time.Duration `json:"-"`

	AchievedRate float64       `json:"achieved_rate"` // answered requests per second of Elapsed
	Elapsed      time.Duration `json:"-"`

	// MaxLag is, in open loop, the longest a request left after its
	// scheduled time (client-side stalls: GC, CPU starvation, the timer).
	// Open-loop latency includes it; a MaxLag near Max means the client,
	// not the receiver, was the bottleneck.
	MaxLag time.Duration `json:"-"`

	// EventIDs lists, in generation order, the events for which at least
	// one delivery got a 2xx: each must have a receipt in the database.
	EventIDs []string `json:"-"`
}

// Acked returns the number of requests answered 2xx.
func (r BenchResult) Acked() int {
	n := 0
	for code, c := range r.StatusCounts {
		if code >= 200 && code < 300 {
			n += c
		}
	}
	return n
}

type benchResultAlias BenchResult

type benchResultJSON struct {
	*benchResultAlias
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	P999      float64 `json:"p999_ms"`
	Max       float64 `json:"max_ms"`
	ElapsedMs float64 `json:"elapsed_ms"`
	MaxLag    float64 `json:"max_lag_ms,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fromMs(f float64) time.Duration { return time.Duration(math.Round(f * float64(time.Millisecond))) }

// MarshalJSON writes durations as float milliseconds (p50_ms … elapsed_ms).
func (r BenchResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(benchResultJSON{
		benchResultAlias: (*benchResultAlias)(&r),
		P50:              ms(r.P50), P90: ms(r.P90), P99: ms(r.P99), P999: ms(r.P999), Max: ms(r.Max),
		ElapsedMs: ms(r.Elapsed), MaxLag: ms(r.MaxLag),
	})
}

// UnmarshalJSON reads what MarshalJSON writes (EventIDs excepted).
func (r *BenchResult) UnmarshalJSON(b []byte) error {
	var j benchResultJSON
	j.benchResultAlias = (*benchResultAlias)(r)
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	r.P50, r.P90, r.P99, r.P999, r.Max = fromMs(j.P50), fromMs(j.P90), fromMs(j.P99), fromMs(j.P999), fromMs(j.Max)
	r.Elapsed, r.MaxLag = fromMs(j.ElapsedMs), fromMs(j.MaxLag)
	return nil
}

// WriteTable prints the result for a person.
func (r BenchResult) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "run\t%s (seed %d)\n", r.RunID, r.Seed)
	switch r.Mode {
	case "open":
		fmt.Fprintf(tw, "mode\topen loop, %g events/s target, at most %d in flight\n", r.TargetRate, r.MaxInFlight)
	default:
		fmt.Fprintf(tw, "mode\tclosed loop, %d workers\n", r.Concurrency)
	}
	fmt.Fprintf(tw, "elapsed\t%.2fs\n", r.Elapsed.Seconds())
	fmt.Fprintf(tw, "requests\t%d sent = %d events + %d duplicates; %d skipped at the in-flight cap\n",
		r.Sent, r.Unique, r.Duplicates, r.Skipped)
	fmt.Fprintf(tw, "achieved\t%.1f answered requests/s\n", r.AchievedRate)
	codes := make([]int, 0, len(r.StatusCounts))
	for c := range r.StatusCounts {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var st []string
	for _, c := range codes {
		st = append(st, fmt.Sprintf("%d × %d", c, r.StatusCounts[c]))
	}
	if len(st) == 0 {
		st = append(st, "none")
	}
	fmt.Fprintf(tw, "status\t%s\n", strings.Join(st, ", "))
	fmt.Fprintf(tw, "errors\t%d", r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(tw, " (first: %s)", r.FirstError)
	}
	fmt.Fprintln(tw)
	if r.Cancelled > 0 {
		fmt.Fprintf(tw, "cancelled\t%d\n", r.Cancelled)
	}
	from := "actual"
	if r.Mode == "open" {
		from = "scheduled"
	}
	fmt.Fprintf(tw, "latency\tms, from %s send time to end of response\n", from)
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{"p50", r.P50}, {"p90", r.P90}, {"p99", r.P99}, {"p99.9", r.P999}, {"max", r.Max}} {
		fmt.Fprintf(tw, "  %s\t%.3f\n", p.name, ms(p.d))
	}
	if r.Mode == "open" {
		fmt.Fprintf(tw, "client lag\t%.3f ms at most between a scheduled and an actual send\n", ms(r.MaxLag))
	}
	tw.Flush()
}

// Bench loads opts.URL with signed event_callback envelopes for
// opts.Duration, waits for the requests still in flight (each bounded by
// opts.Timeout), and reports what it measured. If ctx is cancelled, Bench
// stops promptly and returns the partial result together with ctx.Err().
func Bench(ctx context.Context, opts BenchOptions) (BenchResult, error) {
	b, err := newBench(opts)
	if err != nil {
		return BenchResult{}, err
	}
	if b.ownTransport != nil {
		defer b.ownTransport.CloseIdleConnections()
	}

	start := time.Now()
	b.gen.startMicro = start.UnixMicro()

	stopProgress := func() {}
	if opts.Progress != nil {
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			b.progress(opts.Progress, start, stop)
		}()
		stopProgress = func() { close(stop); <-done }
	}

	var unique, dups, skipped int
	if b.opts.Rate > 0 {
		unique, dups, skipped = b.openLoop(ctx, start)
	} else {
		unique, dups = b.closedLoop(ctx, start)
	}
	elapsed := time.Since(start)
	stopProgress()

	res := b.result(elapsed)
	res.Unique, res.Duplicates, res.Skipped = unique, dups, skipped
	return res, ctx.Err()
}

type bench struct {
	opts         BenchOptions // with defaults applied
	client       *http.Client
	ownTransport *http.Transport // non-nil when Bench built the client
	gen          *eventGen
	rec          recorder
	next         atomic.Int64 // round-robin over opts.URLs
}

func newBench(o BenchOptions) (*bench, error) {
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		return nil, errors.New("bench: no URL")
	case err != nil:
		return nil, fmt.Errorf("bench: url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, fmt.Errorf("bench: url %q: want http(s)://host/path", o.URL)
	case o.Secret == "":
		return nil, errors.New("bench: no signing secret")
	case o.Duration <= 0:
		return nil, errors.New("bench: duration must be positive")
	case !(o.Rate >= 0 && o.Rate <= MaxRate):
		return nil, fmt.Errorf("bench: rate %v: want 0..%g (0 = closed loop)", o.Rate, float64(MaxRate))
	case o.Concurrency < 0:
		return nil, fmt.Errorf("bench: concurrency %d: want ≥ 0", o.Concurrency)
	case !(o.DupFraction >= 0 && o.DupFraction <= 1):
		return nil, fmt.Errorf("bench: dup fraction %v: want 0..1", o.DupFraction)
	case o.PayloadBytes < 0 || o.PayloadBytes > maxBody:
		return nil, fmt.Errorf("bench: payload bytes %d: want 0..%d", o.PayloadBytes, maxBody)
	case o.MaxInFlight < 0:
		return nil, fmt.Errorf("bench: max in flight %d: want ≥ 0", o.MaxInFlight)
	case o.Timeout < 0:
		return nil, fmt.Errorf("bench: timeout %v: want ≥ 0", o.Timeout)
	case strings.ContainsAny(o.RunID, "\"\\") || strings.IndexFunc(o.RunID, func(r rune) bool { return r < 0x20 }) >= 0:
		return nil, fmt.Errorf("bench: run id %q: must be plain text", o.RunID)
	case o.Kind != "" && o.Kind != KindMessage && o.Kind != KindFunctionExecuted:
		return nil, fmt.Errorf("bench: kind %q: want %s or %s", o.Kind, KindMessage, KindFunctionExecuted)
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultRequestTimeout
	}
	if o.Rate == 0 && o.Concurrency > o.MaxInFlight {
		return nil, fmt.Errorf("bench: concurrency %d: want at most %d (max in flight)", o.Concurrency, o.MaxInFlight)
	}
	if o.RunID == "" {
		o.RunID = rand.Text()[:8]
	}
	if o.Seed == 0 {
		o.Seed = int64(mrand.Uint64() >> 1)
		if o.Seed == 0 {
			o.Seed = 1
		}
	}
	b := &bench{opts: o, client: o.Client}
	b.rec.status = make(map[int]int)
	if b.client == nil {
		conns := o.MaxInFlight
		if o.Rate == 0 {
			conns = 2 * o.Concurrency // each worker, and its duplicate
		}
		b.ownTransport = &http.Transport{
			Proxy: nil, // never route load through a proxy
			DialContext: (&net.Dialer{
				Timeout:   5 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns, // keep every connection the load needs alive
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			TLSHandshakeTimeout: 5 * time.Second,
		}
		b.client = &http.Client{Transport: b.ownTransport}
	}
	b.gen = &eventGen{run: o.RunID, sequential: o.SequentialIDs, key: idKey(o.RunID), step: o.Kind == KindFunctionExecuted}
	if o.PayloadBytes > 0 {
		b.gen.pad = strings.Repeat("x", o.PayloadBytes)
		b.gen.size = o.PayloadBytes
	}
	return b, nil
}

// openLoop schedules event i at start + i/Rate until Duration, whatever
// the receiver does. A request that would exceed MaxInFlight is skipped.
func (b *bench) openLoop(ctx context.Context, start time.Time) (unique, dups, skipped int) {
	rng := mrand.New(mrand.NewPCG(uint64(b.opts.Seed), 0))
	sem := make(chan struct{}, b.opts.MaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	acquire := func() bool {
		select {
		case sem <- struct{}{}:
			return true
		default:
			return false
		}
	}
	send := func(ev *benchEvent, retry int, sched time.Time) {
		wg.Go(func() {
			defer func() { <-sem }()
			b.fire(ctx, ev, retry, sched)
		})
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := int64(0); ; i++ {
		off := time.Duration(float64(i) * float64(time.Second) / b.opts.Rate)
		if off >= b.opts.Duration {
			return
		}
		sched := start.Add(off)
		if d := time.Until(sched); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		// Draw before the cap check so the duplicate pattern depends on
		// the seed alone.
		dup := rng.Float64() < b.opts.DupFraction
		if !acquire() {
			skipped++
			if dup {
				skipped++
			}
			continue
		}
		ev := b.gen.next()
		send(ev, 0, sched)
		unique++
		if dup {
			if acquire() {
				send(ev, 1, sched)
				dups++
			} else {
				skipped++
			}
		}
	}
}

// closedLoop runs Concurrency workers that each send one event (and its
// duplicate, concurrently), wait for the answers, and go again.
func (b *bench) closedLoop(ctx context.Context, start time.Time) (unique, dups int) {
	deadline := start.Add(b.opts.Duration)
	var nUnique, nDups atomic.Int64
	var wg sync.WaitGroup
	for w := range b.opts.Concurrency {
		rng := mrand.New(mrand.NewPCG(uint64(b.opts.Seed), uint64(w)))
		wg.Go(func() {
			var dupWG sync.WaitGroup
			for ctx.Err() == nil && time.Now().Before(deadline) {
				ev := b.gen.next()
				nUnique.Add(1)
				from := time.Now()
				if rng.Float64() < b.opts.DupFraction {
					nDups.Add(1)
					dupWG.Go(func() { b.fire(ctx, ev, 1, from) })
				}
				b.fire(ctx, ev, 0, from)
				dupWG.Wait()
			}
		})
	}
	wg.Wait()
	return int(nUnique.Load()), int(nDups.Load())
}

// fire delivers one request for ev and records the outcome, with latency
// measured from `from`.
func (b *bench) fire(ctx context.Context, ev *benchEvent, retry int, from time.Time) {
	b.rec.sent.Add(1)
	b.rec.inFlight.Add(1)
	defer b.rec.inFlight.Add(-1)

	rctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	now := time.Now()
	b.rec.lagged(now.Sub(from))
	target := b.opts.URL
	if len(b.opts.URLs) > 0 {
		target = b.opts.URLs[int(b.next.Add(1))%len(b.opts.URLs)]
	}
	req, err := newSlackRequest(rctx, target, b.opts.Secret, now, ev.body, "application/json", retry)
	if err != nil {
		b.rec.fail(err, false)
		return
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.rec.fail(err, ctx.Err() != nil)
		return
	}
	// Read the body to the end so the connection is reused.
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	resp.Body.Close()
	if err != nil {
		b.rec.fail(fmt.Errorf("read response: %w", err), ctx.Err() != nil)
		return
	}
	b.rec.answer(resp.StatusCode, time.Since(from), ev)
}

// recorder collects outcomes from every request goroutine.
type recorder struct {
	sent, inFlight atomic.Int64 // read by progress without the lock

	mu        sync.Mutex
	samples   []time.Duration
	status    map[int]int
	answered  int
	non2xx    int
	errors    int
	firstErr  string
	cancelled int
	acked     []int64 // event numbers with at least one 2xx
	maxLag    time.Duration
}

func (r *recorder) lagged(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxLag = max(r.maxLag, d)
}

func (r *recorder) answer(code int, lat time.Duration, ev *benchEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, lat)
	r.status[code]++
	r.answered++
	if code < 200 || code > 299 {
		r.non2xx++
		return
	}
	if ev.acked.CompareAndSwap(false, true) {
		r.acked = append(r.acked, ev.n)
	}
}

func (r *recorder) fail(err error, cancelled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cancelled {
		r.cancelled++
		return
	}
	r.errors++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

func (b *bench) result(elapsed time.Duration) BenchResult {
	r := &b.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	res := BenchResult{
		RunID:        b.opts.RunID,
		Seed:         b.opts.Seed,
		Sent:         int(r.sent.Load()),
		StatusCounts: maps.Clone(r.status),
		Errors:       r.errors,
		FirstError:   r.firstErr,
		Cancelled:    r.cancelled,
		Elapsed:      elapsed,
	}
	if b.opts.Rate > 0 {
		res.Mode, res.TargetRate, res.MaxInFlight = "open", b.opts.Rate, b.opts.MaxInFlight
		res.MaxLag = r.maxLag
	} else {
		res.Mode, res.Concurrency = "closed", b.opts.Concurrency
	}
	if elapsed > 0 {
		res.AchievedRate = float64(r.answered) / elapsed.Seconds()
	}
	s := slices.Clone(r.samples)
	slices.Sort(s)
	res.P50, res.P90, res.P99, res.P999 = percentile(s, 0.50), percentile(s, 0.90), percentile(s, 0.99), percentile(s, 0.999)
	if len(s) > 0 {
		res.Max = s[len(s)-1]
	}
	acked := slices.Clone(r.acked)
	slices.Sort(acked)
	res.EventIDs = make([]string, len(acked))
	for i, n := range acked {
		res.EventIDs[i] = b.gen.id(n)
	}
	return res
}

// percentile returns the nearest-rank q-quantile of sorted samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// progress writes a status line every second until stop is closed, then a
// final one.
func (b *bench) progress(w io.Writer, start time.Time, stop <-chan struct{}) {
	term := isTerminal(w)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastAnswered int
	last := start
	line := func(final bool) {
		r := &b.rec
		r.mu.Lock()
		answered, non2xx, errs := r.answered, r.non2xx, r.errors
		r.mu.Unlock()
		now := time.Now()
		rate := float64(answered-lastAnswered) / now.Sub(last).Seconds()
		if final {
			rate = float64(answered) / now.Sub(start).Seconds()
		}
		lastAnswered, last = answered, now
		s := fmt.Sprintf("%6.1fs  sent %d  answered %d  non-2xx %d  errors %d  in flight %d  %.0f/s",
			now.Sub(start).Seconds(), r.sent.Load(), answered, non2xx, errs, r.inFlight.Load(), rate)
		if term {
			// \r rewrites the line; \x1b[K clears what a longer one left.
			s = "\r" + s + "\x1b[K"
			if final {
				s += "\n"
			}
		} else {
			s += "\n"
		}
		io.WriteString(w, s)
	}
	for {
		select {
		case <-stop:
			line(true)
			return
		case <-tick.C:
			line(false)
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// eventGen makes unique event_callback envelopes: event n of run R has a
// random-looking event_id that is a bijection of (R, n) (or "EvB{R}-{n}"
// when sequential) and ts startMicro+n microseconds, so ts is unique
// within a run and, at under a million events a second, across runs started
// one after another.
type eventGen struct {
	run        string
	sequential bool
	key        uint64 // from run: the random ids of two runs differ
	startMicro int64
	pad        string // PayloadBytes of padding to slice from
	size       int    // target body size; 0 = natural
	step       bool   // function_executed events (KindFunctionExecuted)
	n          atomic.Int64
}

type benchEvent struct {
	n     int64
	body  []byte
	acked atomic.Bool
}

func (g *eventGen) id(n int64) string {
	if g.sequential {
		return "EvB" + g.run + "-" + strconv.FormatInt(n, 10)
	}
	// splitmix64's finalizer is a bijection of uint64: distinct n, distinct id.
	x := g.key + uint64(n)
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	var b [15]byte
	b[0], b[1] = 'E', 'v'
	for i := 14; i >= 2; i-- { // 13 letters of 5 bits hold all 64
		b[i] = idAlphabet[x&31]
		x >>= 5
	}
	return string(b[:])
}

const idAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// idKey derives a run's id key from its run id (FNV-1a).
func idKey(run string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(run); i++ {
		h = (h ^ uint64(run[i])) * 1099511628211
	}
	return h
}

func (g *eventGen) next() *benchEvent {
	n := g.n.Add(1) - 1
	return &benchEvent{n: n, body: g.body(n)}
}

// body builds the envelope by hand: every field is generated ASCII, and
// knowing each part's length lets the padding hit PayloadBytes exactly.
func (g *eventGen) body(n int64) []byte {
	us := g.startMicro + n
	ts := strconv.FormatInt(us/1e6, 10) + "." + fmt.Sprintf("%06d", us%1e6)
	id := g.id(n)

	prefix := `{"token":"bench","team_id":"TBENCH","api_app_id":"ABENCH","event":{"type":"message","channel":"CBENCH","channel_type":"channel","user":"UBENCH","ts":"` +
		ts + `","event_ts":"` + ts + `","text":"bench event ` + strconv.FormatInt(n, 10)
	inner := `"}`
	if g.step {
		// The execution is the event: its id keys the step row.
		prefix = `{"token":"bench","team_id":"TBENCH","api_app_id":"ABENCH","event":{"type":"function_executed","function_execution_id":"` + id +
			`","workflow_execution_id":"WfBENCH","bot_access_token":"xwfp-bench-` + id + `","event_ts":"` + ts +
			`","function":{"id":"FnBENCH","callback_id":"bench_step","title":"Bench step","type":"app","app_id":"ABENCH"},"inputs":{"text":"bench event ` +
			strconv.FormatInt(n, 10)
		inner = `"}}`
	}
	suffix := inner + `,"type":"event_callback","event_id":"` + id + `","event_time":` + strconv.FormatInt(us/1e6, 10) +
		`,"event_context":"EC-bench","authorizations":[{"enterprise_id":null,"team_id":"TBENCH","user_id":"UBENCHBOT","is_bot":true,"is_enterprise_install":false}],` +
		`"is_ext_shared_channel":false,"context_team_id":"TBENCH","context_enterprise_id":null}`

	pad := 0
	if g.size > 0 {
		pad = max(0, g.size-len(prefix)-len(suffix)-1) // -1 for the space before the padding
	}
	buf := make([]byte, 0, len(prefix)+1+pad+len(suffix))
	buf = append(buf, prefix...)
	if pad > 0 {
		buf = append(buf, ' ')
		buf = append(buf, g.pad[:pad]...)
	}
	return append(buf, suffix...)
}
