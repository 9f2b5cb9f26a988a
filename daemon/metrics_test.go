package daemon_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/buildinfo"
	"github.com/ackd/ackd/internal/fakeslack"
)

// metricsScrape is one parsed GET /metrics.
type metricsScrape map[string]*dto.MetricFamily

// scrape fetches /metrics and parses it as the Prometheus text format with
// the classic (legacy) name rules, failing the test on any syntax error.
func (s *testServer) scrape() metricsScrape {
	s.t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("GET /metrics: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		s.t.Fatalf("GET /metrics Content-Type = %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		s.t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return fams
}

// metric returns the series of family name whose labels include every
// key=value pair in labels, or nil when there is none (a labelled vector
// exports no series before its first observation).
func (m metricsScrape) metric(name string, labels ...string) *dto.Metric {
	fam := m[name]
	if fam == nil {
		return nil
	}
	for _, mt := range fam.GetMetric() {
		have := map[string]string{}
		for _, lp := range mt.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				ok = false
				break
			}
		}
		if ok {
			return mt
		}
	}
	return nil
}

// value is a counter's or gauge's value, or a histogram's sample count; an
// absent series is 0, as Prometheus treats a vector that has not moved yet.
func (m metricsScrape) value(name string, labels ...string) float64 {
	mt := m.metric(name, labels...)
	switch {
	case mt == nil:
		return 0
	case mt.Counter != nil:
		return mt.Counter.GetValue()
	case mt.Gauge != nil:
		return mt.Gauge.GetValue()
	case mt.Histogram != nil:
		return float64(mt.Histogram.GetSampleCount())
	case mt.Untyped != nil:
		return mt.Untyped.GetValue()
	}
	return 0
}

// metricsNeedFamily fails unless the scrape exports name with type typ.
func metricsNeedFamily(tb testing.TB, m metricsScrape, name string, typ dto.MetricType) {
	tb.Helper()
	fam := m[name]
	if fam == nil {
		tb.Errorf("/metrics has no %s", name)
		return
	}
	if fam.GetType() != typ {
		tb.Errorf("%s is a %s, want a %s", name, fam.GetType(), typ)
	}
	if fam.GetHelp() == "" {
		tb.Errorf("%s has no HELP text", name)
	}
}

// metricsClock is a settable clock for the server (and its store).
type metricsClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *metricsClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *metricsClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// metricsQuietSweep turns off the immediate trigger and pushes the ticker out
// of the test's way, so rows stay pending until the test calls Trigger.
const metricsQuietSweep = `
[sweep]
interval  = "1h"
immediate = false
`

func TestMetrics(t *testing.T) {
	t.Parallel()

	t.Run("every series is Prometheus text and ackd's own are prefixed ackd_", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, configFor(t, ""), daemon.Options{})
		// Touch every labelled vector first, so that the check covers them.
		if r := srv.postEvent(eventBody("EvPrefix", message("C1", "1700000000.000100", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("event: %d %s", r.Status, r.Body)
		}
		waitFor(t, "the log effect to be done", 10*time.Second, func() bool {
			return srv.scrape().value("ackd_effect_attempts_total", "effect", "log", "outcome", "done") == 1
		})

		m := srv.scrape()
		var ackd int
		for name := range m {
			switch {
			case strings.HasPrefix(name, "ackd_"):
				ackd++
			case strings.HasPrefix(name, "go_"), strings.HasPrefix(name, "process_"):
				// the standard Go runtime and process collectors
			default:
				t.Errorf("series %q is neither ackd_ nor a standard go_/process_ collector", name)
			}
		}
		if ackd < 10 {
			t.Errorf("only %d ackd_ families exported", ackd)
		}
		for name, typ := range map[string]dto.MetricType{
			"ackd_requests_total":                dto.MetricType_COUNTER,
			"ackd_ack_latency_seconds":           dto.MetricType_HISTOGRAM,
			"ackd_effect_attempts_total":         dto.MetricType_COUNTER,
			"ackd_effect_duration_seconds":       dto.MetricType_HISTOGRAM,
			"ackd_fence_rejections_total":        dto.MetricType_COUNTER,
			"ackd_parked_total":                  dto.MetricType_COUNTER,
			"ackd_sqlite_busy_errors_total":      dto.MetricType_COUNTER,
			"ackd_sweep_duration_seconds":        dto.MetricType_HISTOGRAM,
			"ackd_sweep_errors_total":            dto.MetricType_COUNTER,
			"ackd_outbox_rows":                   dto.MetricType_GAUGE,
			"ackd_outbox_oldest_pending_seconds": dto.MetricType_GAUGE,
			"ackd_database_up":                   dto.MetricType_GAUGE,
			"go_goroutines":                      dto.MetricType_GAUGE,
			"process_cpu_seconds_total":          dto.MetricType_COUNTER,
		} {
			metricsNeedFamily(t, m, name, typ)
		}
		// Nothing was parked, fenced or busy: present, and zero.
		for _, name := range []string{"ackd_parked_total", "ackd_fence_rejections_total", "ackd_sqlite_busy_errors_total", "ackd_sweep_errors_total"} {
			if v := m.value(name); v != 0 {
				t.Errorf("%s = %v on a quiet server, want 0", name, v)
			}
		}
		if v := m.value("ackd_database_up"); v != 1 {
			t.Errorf("ackd_database_up = %v, want 1", v)
		}
	})

	t.Run("ackd_build_info is 1 with the version, commit and Go version ackd version prints", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, configFor(t, ""), daemon.Options{})
		m := srv.scrape()
		metricsNeedFamily(t, m, "ackd_build_info", dto.MetricType_GAUGE)
		bi := buildinfo.Read()
		if v := m.value("ackd_build_info", "version", bi.Version, "commit", bi.Commit, "goversion", runtime.Version()); v != 1 {
			t.Errorf("ackd_build_info{version=%q,commit=%q,goversion=%q} = %v, want 1; exported: %v",
				bi.Version, bi.Commit, runtime.Version(), v, m["ackd_build_info"].GetMetric())
		}
	})

	t.Run("a signed event moves the request, ack latency and effect series", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, configFor(t, ""), daemon.Options{})
		before := srv.scrape()

		if r := srv.postEvent(eventBody("EvMetrics", message("C1", "1700000000.000200", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("event: %d %s", r.Status, r.Body)
		}
		// The attempt is observed after its completion committed, so once it
		// shows, the row is done in the database too.
		waitFor(t, "ackd_effect_attempts_total{effect=log,outcome=done} to move", 10*time.Second, func() bool {
			return srv.scrape().value("ackd_effect_attempts_total", "effect", "log", "outcome", "done") ==
				before.value("ackd_effect_attempts_total", "effect", "log", "outcome", "done")+1
		})
		after := srv.scrape()

		for _, c := range []struct {
			name   string
			labels []string
			delta  float64
		}{
			{"ackd_requests_total", []string{"endpoint", "events", "status", "200"}, 1},
			{"ackd_ack_latency_seconds", []string{"endpoint", "events", "outcome", "first"}, 1},
			{"ackd_effect_duration_seconds", []string{"effect", "log"}, 1},
			{"ackd_requests_total", []string{"endpoint", "events", "status", "401"}, 0},
			{"ackd_ack_latency_seconds", []string{"endpoint", "events", "outcome", "duplicate"}, 0},
			{"ackd_parked_total", nil, 0},
			{"ackd_fence_rejections_total", nil, 0},
		} {
			if got := after.value(c.name, c.labels...) - before.value(c.name, c.labels...); got != c.delta {
				t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.delta)
			}
		}
		if h := after.metric("ackd_ack_latency_seconds", "endpoint", "events", "outcome", "first"); h == nil || h.Histogram.GetSampleSum() <= 0 {
			t.Errorf("ack latency histogram has no positive sum: %v", h)
		}
		// The counts are read at most once a second: the scrape before the
		// event may still be what after shows.
		waitFor(t, `ackd_outbox_rows{status="done"} to read 1`, 10*time.Second, func() bool {
			after = srv.scrape()
			return after.value("ackd_outbox_rows", "status", "done") == 1
		})
		if v := after.value("ackd_outbox_rows", "status", "pending"); v != 0 {
			t.Errorf(`ackd_outbox_rows{status="pending"} = %v, want 0`, v)
		}
		if v := after.value("ackd_outbox_oldest_pending_seconds"); v != 0 {
			t.Errorf("ackd_outbox_oldest_pending_seconds = %v with nothing pending, want 0", v)
		}

		// A redelivery is acked as a duplicate and performs nothing more.
		if r := srv.postEvent(eventBody("EvMetrics", message("C1", "1700000000.000200", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("redelivery: %d %s", r.Status, r.Body)
		}
		// /metrics is rendered at most once a second.
		var dup metricsScrape
		waitFor(t, `ack latency {outcome="duplicate"} count to read 1`, 10*time.Second, func() bool {
			dup = srv.scrape()
			return dup.value("ackd_ack_latency_seconds", "endpoint", "events", "outcome", "duplicate") == 1
		})
		if got := dup.value("ackd_requests_total", "endpoint", "events", "status", "200"); got != after.value("ackd_requests_total", "endpoint", "events", "status", "200")+1 {
			t.Errorf(`requests_total{status="200"} = %v after the redelivery, want one more`, got)
		}
	})

	t.Run("a request with a bad signature moves requests_total with status 401", func(t *testing.T) {
		t.Parallel()
		srv := startServer(t, configFor(t, ""), daemon.Options{})
		before := srv.scrape()

		body := eventBody("EvForged", message("C1", "1700000000.000300", "hi"))
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/slack/events", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		ts := time.Now().Unix()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("X-Slack-Signature", sign("not-the-secret", ts, body))
		if r := srv.do(req); r.Status != http.StatusUnauthorized {
			t.Fatalf("forged request: %d, want 401", r.Status)
		}

		// /metrics is rendered at most once a second: the page before the
		// request may still be served.
		var after metricsScrape
		waitFor(t, "ackd_requests_total{status=401} to move", 10*time.Second, func() bool {
			after = srv.scrape()
			return after.value("ackd_requests_total", "endpoint", "events", "status", "401") > before.value("ackd_requests_total", "endpoint", "events", "status", "401")
		})
		for _, c := range []struct {
			name   string
			labels []string
			delta  float64
		}{
			{"ackd_requests_total", []string{"endpoint", "events", "status", "401"}, 1},
			{"ackd_ack_latency_seconds", []string{"endpoint", "events", "outcome", "rejected"}, 1},
			{"ackd_requests_total", []string{"endpoint", "events", "status", "200"}, 0},
			{"ackd_ack_latency_seconds", []string{"endpoint", "events", "outcome", "first"}, 0},
		} {
			if got := after.value(c.name, c.labels...) - before.value(c.name, c.labels...); got != c.delta {
				t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.delta)
			}
		}
		if receipts, outbox := srv.rows(); receipts != 0 || outbox != 0 {
			t.Errorf("forged request wrote %d receipts and %d rows", receipts, outbox)
		}
	})

	t.Run("a parked row moves ackd_parked_total and the parked gauge", func(t *testing.T) {
		t.Parallel()
		// Slack's channel_not_found is permanent: the row parks at once.
		api := fakeslack.New(t, evBotToken)
		api.Script("chat.postMessage", fakeslack.Err("channel_not_found"))
		srv := startServer(t, configFor(t, fmt.Sprintf(`
[slack]
api_url = %q

[[route]]
name   = "say"
event  = "message"
effect = "post"
text   = "seen"
`, api.URL())), evBotOptions())
		if r := srv.postEvent(eventBody("EvPark", message("C1", "1700000000.000400", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("event: %d %s", r.Status, r.Body)
		}
		waitFor(t, "ackd_parked_total to move", 10*time.Second, func() bool {
			return srv.scrape().value("ackd_parked_total") == 1
		})
		m := srv.scrape()
		if v := m.value("ackd_effect_attempts_total", "effect", "post", "outcome", "parked"); v != 1 {
			t.Errorf(`ackd_effect_attempts_total{effect="post",outcome="parked"} = %v, want 1`, v)
		}
		// The counts are read at most once a second.
		waitFor(t, `ackd_outbox_rows{status="parked"} to read 1`, 10*time.Second, func() bool {
			return srv.scrape().value("ackd_outbox_rows", "status", "parked") == 1
		})
		if v := m.value("ackd_fence_rejections_total"); v != 0 {
			t.Errorf("ackd_fence_rejections_total = %v, want 0", v)
		}
	})

	t.Run("the queue gauges read the database at scrape time", func(t *testing.T) {
		t.Parallel()
		// Whole milliseconds: the database stores times in ms.
		clock := &metricsClock{t: time.UnixMilli(time.Now().UnixMilli())}
		srv := startServer(t, configFor(t, metricsQuietSweep+`
[[route]]
name   = "log"
event  = "message"
effect = "log"
`), daemon.Options{Now: clock.Now})
		if r := srv.postEvent(eventBody("EvQueue", message("C1", "1700000000.000500", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("event: %d %s", r.Status, r.Body)
		}
		clock.Advance(90 * time.Second)

		m := srv.scrape()
		if v := m.value("ackd_outbox_rows", "status", "pending"); v != 1 {
			t.Errorf(`ackd_outbox_rows{status="pending"} = %v, want 1`, v)
		}
		if v := m.value("ackd_outbox_oldest_pending_seconds"); v != 90 {
			t.Errorf("ackd_outbox_oldest_pending_seconds = %v, want 90 (the clock moved 90s since the intent)", v)
		}

		srv.Trigger()
		waitFor(t, "the triggered sweep to complete the row", 10*time.Second, func() bool {
			return srv.scrape().value("ackd_outbox_rows", "status", "done") == 1
		})
		m = srv.scrape()
		if v := m.value("ackd_outbox_rows", "status", "pending"); v != 0 {
			t.Errorf(`ackd_outbox_rows{status="pending"} = %v after the sweep, want 0`, v)
		}
		if v := m.value("ackd_outbox_oldest_pending_seconds"); v != 0 {
			t.Errorf("ackd_outbox_oldest_pending_seconds = %v after the sweep, want 0", v)
		}
	})

	t.Run("each sweep is observed in the sweep duration histogram", func(t *testing.T) {
		t.Parallel()
		t.Run("the immediate trigger", func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, configFor(t, metricsQuietSweep), daemon.Options{})
			n := srv.scrape().value("ackd_sweep_duration_seconds")
			srv.Trigger()
			waitFor(t, "the sweep histogram count to move", 10*time.Second, func() bool {
				return srv.scrape().value("ackd_sweep_duration_seconds") == n+1
			})
		})
		t.Run("the ticker", func(t *testing.T) {
			t.Parallel()
			srv := startServer(t, configFor(t, `
[sweep]
interval  = "20ms"
immediate = false
`), daemon.Options{})
			n := srv.scrape().value("ackd_sweep_duration_seconds")
			waitFor(t, "three ticker sweeps to be observed", 10*time.Second, func() bool {
				return srv.scrape().value("ackd_sweep_duration_seconds") >= n+3
			})
			if v := srv.scrape().value("ackd_sweep_errors_total"); v != 0 {
				t.Errorf("ackd_sweep_errors_total = %v, want 0", v)
			}
		})
	})
}
