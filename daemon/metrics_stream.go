package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ackd/ackd/sweep"
)

// streamMetrics are the stream effect's series (sweep.StreamObserver): agent
// replies streamed into Slack.
type streamMetrics struct {
	started, rolled, recovered prometheus.Counter
	cut                        *prometheus.CounterVec // reason
	firstText, appendLatency   prometheus.Histogram
}

func newStreamMetrics(reg prometheus.Registerer) *streamMetrics {
	m := &streamMetrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_stream_messages_started_total",
			Help: "Messages stream rows began in Slack (chat.startStream, or a post finishing a recovered answer).",
		}),
		rolled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_stream_rollovers_total",
			Help: "Streams Slack ended mid-answer (message_not_in_streaming_state); the answer went on in a new message.",
		}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_stream_recoveries_total",
			Help: "Answers finished in the messages an earlier attempt started (after a crash, a lost lease or a dropped agent connection).",
		}),
		cut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_stream_answers_cut_total",
			Help: "Answers cut, by reason: max_chars ([stream] max_chars) or timeout (the route's timeout).",
		}, []string{"reason"}),
		firstText: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ackd_stream_first_text_seconds",
			Help:    "Time from asking the agent to its first text.",
			Buckets: []float64{.1, .25, .5, 1, 2, 5, 10, 20, 30, 60, 120},
		}),
		appendLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ackd_stream_append_seconds",
			Help:    "Time Slack took to answer one chat.appendStream.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	for _, r := range []string{"max_chars", "timeout"} {
		m.cut.WithLabelValues(r) // scraped from the start, at 0
	}
	reg.MustRegister(m.started, m.rolled, m.recovered, m.cut, m.firstText, m.appendLatency)
	return m
}

// Streamed implements sweep.StreamObserver.
func (m *streamMetrics) Streamed(event, reason string) {
	switch event {
	case sweep.StreamStarted:
		m.started.Inc()
	case sweep.StreamRolledOver:
		m.rolled.Inc()
	case sweep.StreamRecovered:
		m.recovered.Inc()
	case sweep.StreamCut:
		m.cut.WithLabelValues(reason).Inc()
	}
}

// FirstText implements sweep.StreamObserver.
func (m *streamMetrics) FirstText(d time.Duration) { m.firstText.Observe(d.Seconds()) }

// Appended implements sweep.StreamObserver.
func (m *streamMetrics) Appended(d time.Duration) { m.appendLatency.Observe(d.Seconds()) }
