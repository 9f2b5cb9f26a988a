package daemon

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/internal/buildinfo"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// metrics are the Prometheus series served on /metrics. Each Server has its
// own registry, so tests can run several servers in one process.
type metrics struct {
	reg  *prometheus.Registry
	page *cached[metricsPage] // /metrics, rendered at most once a second

	ackLatency    *prometheus.HistogramVec // endpoint, outcome
	requests      *prometheus.CounterVec   // endpoint, status
	attempts      *prometheus.CounterVec   // effect, outcome
	effectLatency *prometheus.HistogramVec // effect
	fenced        prometheus.Counter
	parked        prometheus.Counter
	sweepDuration prometheus.Histogram
	sweepErrors   prometheus.Counter
	rateLimited   prometheus.Counter     // Slack's app_rate_limited callbacks
	confirmations *prometheus.CounterVec // outcome

	recovered   *prometheus.CounterVec // outcome
	rateWaits   *prometheus.CounterVec // method, reason
	rateWaitSec *prometheus.CounterVec // method, reason

	stream *streamMetrics // metrics_stream.go
}

func newMetrics(st store.Store, every time.Duration) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		ackLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ackd_ack_latency_seconds",
			Help:    "Time from request arrival to the answer being written, by endpoint and outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 3},
		}, []string{"endpoint", "outcome"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_requests_total",
			Help: "HTTP requests answered, by endpoint and status code.",
		}, []string{"endpoint", "status"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_effect_attempts_total",
			Help: "Effect attempts by effect and outcome (done, retry, rate_limited, parked, fenced, abandoned).",
		}, []string{"effect", "outcome"}),
		effectLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ackd_effect_duration_seconds",
			Help:    "Time an effect attempt took, by effect.",
			Buckets: prometheus.DefBuckets,
		}, []string{"effect"}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_fence_rejections_total",
			Help: "Completions or failures rejected because the lease was lost (the lease is too short).",
		}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_parked_total",
			Help: "Outbox rows parked by this process (dead-lettered; see ackd outbox list --status parked).",
		}),
		sweepDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ackd_sweep_duration_seconds",
			Help:    "Duration of one sweep (claim, perform, complete).",
			Buckets: prometheus.DefBuckets,
		}),
		sweepErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_sweep_errors_total",
			Help: "Sweeps that failed on the database.",
		}),
		// No team label: with [oauth] the teams are unbounded; the warning
		// logged with each callback names the team.
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_slack_app_rate_limited_total",
			Help: "app_rate_limited callbacks from Slack (HTTP and Socket Mode): each is a minute in which Slack dropped a workspace's events over its 30,000 an hour.",
		}),
		confirmations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_post_confirmations_total",
			Help: "Lookups for an earlier post before a post is repeated after an unknown outcome, by outcome: found (not posted again), not_found (posted), impossible (history unreadable: posted, possibly a duplicate), rate_limited (waits for Retry-After).",
		}, []string{"outcome"}),
		recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_catchup_messages_total",
			Help: "Messages catch-up read from channel history, by outcome: recorded (the live path had missed them), duplicate (already recorded), filtered (the live path would have ignored them too).",
		}, []string{"outcome"}),
		rateWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_catchup_rate_limit_waits_total",
			Help: "Waits before a history call, by method and reason: pace ([backfill] rate) or retry_after (Slack answered 429).",
		}, []string{"method", "reason"}),
		rateWaitSec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_catchup_rate_limit_wait_seconds_total",
			Help: "Time spent waiting before history calls, by method and reason.",
		}, []string{"method", "reason"}),
	}
	for _, o := range sweep.ConfirmOutcomes {
		m.confirmations.WithLabelValues(o) // every outcome is scraped from the start, at 0
	}
	// The catch-up series exist from the start, so that a rule on them
	// has a value before the first catch-up.
	for _, o := range []string{catchup.OutcomeRecorded, catchup.OutcomeDuplicate, catchup.OutcomeFiltered} {
		m.recovered.WithLabelValues(o)
	}
	for _, method := range []string{catchup.MethodHistory, catchup.MethodReplies} {
		for _, r := range []string{"pace", "retry_after"} {
			m.rateWaits.WithLabelValues(method, r)
			m.rateWaitSec.WithLabelValues(method, r)
		}
	}
	m.reg.MustRegister(m.recovered, m.rateWaits, m.rateWaitSec, &markCollector{st: st})
	bi := buildinfo.Read()
	m.reg.MustRegister(m.ackLatency, m.requests, m.attempts, m.effectLatency, m.fenced, m.parked,
		m.sweepDuration, m.sweepErrors, m.rateLimited, m.confirmations,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "ackd_build_info",
			Help:        "Always 1; the labels say which ackd is running (ackd version prints the same).",
			ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Commit, "goversion": bi.GoVersion},
		}, func() float64 { return 1 }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "ackd_sqlite_busy_errors_total",
			Help: "SQLite SQLITE_BUSY/SQLITE_LOCKED errors (another connection or process held the write lock too long).",
		}, func() float64 { return float64(st.BusyErrors()) }),
		&queueCollector{st: st},
	)
	m.stream = newStreamMetrics(m.reg)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.page = newCached(every, 5*time.Second, func(context.Context) (metricsPage, error) { return m.render() })
	return m
}

// metricsPage is one rendering of /metrics, plain and gzipped.
type metricsPage struct{ plain, gz []byte }

// render gathers every series and encodes them in the text format.
func (m *metrics) render() (metricsPage, error) {
	fams, err := m.reg.Gather()
	if err != nil {
		return metricsPage{}, err
	}
	var plain, gz bytes.Buffer
	for _, mf := range fams {
		if _, err := expfmt.MetricFamilyToText(&plain, mf); err != nil {
			return metricsPage{}, err
		}
	}
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	_, _ = zw.Write(plain.Bytes())
	if err := zw.Close(); err != nil {
		return metricsPage{}, err
	}
	return metricsPage{plain: plain.Bytes(), gz: gz.Bytes()}, nil
}

// textFormat is the Content-Type of the text exposition format.
var textFormat = string(expfmt.NewFormat(expfmt.TypeTextPlain))

// handler serves /metrics from a page rendered at most once per ProbeEvery
// (probes.go): gathering (the outbox counts, /proc), encoding and gzipping
// are done once however often /metrics is scraped, and scrapes within a
// second of one another get the same page. Only the text format is served
// (every Prometheus accepts it), gzipped when the scraper asks.
func (m *metrics) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _, err := m.page.get(r.Context())
		if err != nil {
			http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		body := p.plain
		w.Header().Set("Content-Type", textFormat)
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			w.Header().Set("Content-Encoding", "gzip")
			body = p.gz
		}
		w.Header().Set("Vary", "Accept-Encoding")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0"
		}
	}
	return false
}

// Attempt implements sweep.Observer.
func (m *metrics) Attempt(effect, outcome string, took time.Duration) {
	m.attempts.WithLabelValues(effect, outcome).Inc()
	m.effectLatency.WithLabelValues(effect).Observe(took.Seconds())
	switch outcome {
	case sweep.OutcomeFenced:
		m.fenced.Inc()
	case sweep.OutcomeParked:
		m.parked.Inc()
	}
}

// confirmed counts one post confirmation lookup (sweep.EffectConfig.OnConfirm).
func (m *metrics) confirmed(outcome string) { m.confirmations.WithLabelValues(outcome).Inc() }

// Swept implements sweep.Observer.
func (m *metrics) Swept(took time.Duration, _ sweep.Result, err error) {
	m.sweepDuration.Observe(took.Seconds())
	if err != nil {
		m.sweepErrors.Inc()
	}
}

// Messages implements catchup.Observer.
func (m *metrics) Messages(outcome string, n int) {
	m.recovered.WithLabelValues(outcome).Add(float64(n))
}

// Waited implements catchup.Observer.
func (m *metrics) Waited(method, reason string, d time.Duration) {
	m.rateWaits.WithLabelValues(method, reason).Inc()
	m.rateWaitSec.WithLabelValues(method, reason).Add(d.Seconds())
}

// markCollector reads catch-up's marks at scrape time: one row per channel.
type markCollector struct{ st store.Store }

var markLagDesc = prometheus.NewDesc("ackd_catchup_mark_lag_seconds",
	"How far each channel's catch-up mark (the newest message known recorded) is behind now; a quiet channel's grows.", []string{"channel"}, nil)

func (c *markCollector) Describe(ch chan<- *prometheus.Desc) { ch <- markLagDesc }

func (c *markCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	marks, err := c.st.Marks(ctx)
	if err != nil {
		return // ackd_database_up says so
	}
	now := c.st.Now()
	for _, m := range marks {
		ch <- prometheus.MustNewConstMetric(markLagDesc, prometheus.GaugeValue, max(0, now.Sub(store.TSTime(m.TS)).Seconds()), m.Channel)
	}
}

// queueCollector reads the outbox counts from the database when /metrics
// is rendered, at most once a second (handler).
type queueCollector struct{ st store.Store }

var (
	rowsDesc = prometheus.NewDesc("ackd_outbox_rows",
		"Outbox rows by status, read from the database at scrape (at most once a second).", []string{"status"}, nil)
	oldestDesc = prometheus.NewDesc("ackd_outbox_oldest_pending_seconds",
		"Age of the oldest pending outbox row (0 when none).", nil, nil)
	upDesc = prometheus.NewDesc("ackd_database_up",
		"1 if the outbox could be read at scrape (at most once a second).", nil, nil)
)

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rowsDesc
	ch <- oldestDesc
	ch <- upDesc
}

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	qs, err := q.st.Queue(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(rowsDesc, prometheus.GaugeValue, float64(qs.Pending), store.StatusPending)
	ch <- prometheus.MustNewConstMetric(rowsDesc, prometheus.GaugeValue, float64(qs.Done), store.StatusDone)
	ch <- prometheus.MustNewConstMetric(rowsDesc, prometheus.GaugeValue, float64(qs.Parked), store.StatusParked)
	ch <- prometheus.MustNewConstMetric(rowsDesc, prometheus.GaugeValue, float64(qs.Discarded), store.StatusDiscarded)
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, qs.OldestPending.Seconds())
}
