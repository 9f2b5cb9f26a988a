package oauth

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ackd/ackd/store"
)

// metrics are the install flow's and the refresher's.
type metrics struct {
	installs   *prometheus.CounterVec
	refreshes  *prometheus.CounterVec
	uninstalls prometheus.Counter
	unknown    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, st store.Store, keys *Keys) *metrics {
	m := &metrics{
		installs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_oauth_installs_total",
			Help: "Install flows finished, by outcome: ok, or why they failed (state, denied, exchange, store).",
		}, []string{"outcome"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_oauth_token_refreshes_total",
			Help: "Token refreshes by outcome: ok; error (retried); failed (Slack refused for good: the team's rows park); lost (refreshed but not stored); lease_held (another process refreshes).",
		}, []string{"outcome"}),
		uninstalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_oauth_uninstalls_total",
			Help: "Installations removed by app_uninstalled or tokens_revoked.",
		}),
		unknown: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ackd_oauth_unknown_team_events_total",
			Help: "Slack requests from a team (or enterprise) with no installation, answered 200.",
		}),
	}
	for _, o := range []string{"ok", "state", "denied", "exchange", "store"} {
		m.installs.WithLabelValues(o)
	}
	for _, o := range []string{"ok", "error", "failed", "lost", "lease_held"} {
		m.refreshes.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.installs, m.refreshes, m.uninstalls, m.unknown, &installGauge{st: st, keys: keys,
			desc: prometheus.NewDesc("ackd_oauth_installations",
				"Installations by state: ok; unusable (a refused token refresh; rows park until a reinstall); sealed (its tokens do not open with ACKD_TOKEN_KEY nor ACKD_TOKEN_KEY_OLD: a wrong key; rows wait).",
				[]string{"state"}, nil),
			waiting: prometheus.NewDesc("ackd_oauth_rows_waiting", "Pending rows whose team has no installation yet (not_installed); they park after [oauth] not_installed_wait.", nil, nil)})
	}
	return m
}

func (m *metrics) refresh(outcome string) { m.refreshes.WithLabelValues(outcome).Inc() }

// installGauge counts installations, and rows waiting for one, at scrape time.
type installGauge struct {
	st            store.Store
	keys          *Keys // nil: no sealed state is told apart
	desc, waiting *prometheus.Desc
}

func (g *installGauge) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc; ch <- g.waiting }

func (g *installGauge) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	list, err := g.st.ListInstallations(ctx)
	if err != nil {
		return // the scrape shows no value rather than a wrong one
	}
	ok, bad, sealed := 0, 0, 0
	for _, in := range list {
		switch {
		case g.keys != nil && !g.keys.Opens(in.Key, in.Secret):
			sealed++
		case in.Error != "":
			bad++
		default:
			ok++
		}
	}
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(ok), "ok")
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(bad), "unusable")
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, float64(sealed), "sealed")
	if n, err := g.st.WaitingRows(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(g.waiting, prometheus.GaugeValue, float64(n))
	}
}
