package daemon

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/store"
)

// pauseCollector reads the paused routes (issue 31.2) when /metrics is
// rendered: a series per route of the config, 0 when it is not paused, so
// that a rule on them has a value from the start, and one per paused route
// the config does not name. Reading them costs one query, and one pass over
// the pending rows only while a route is paused (store.PausedRoutes).
type pauseCollector struct {
	st     store.Store
	routes []string // the config's route names
}

var (
	routePausedDesc = prometheus.NewDesc("ackd_route_paused",
		"1 while the route is paused (ackd route pause): its requests are acked, its rows wait unclaimed; 0 otherwise.", []string{"route"}, nil)
	routePausedSecondsDesc = prometheus.NewDesc("ackd_route_paused_seconds",
		"How long the route has been paused (0 when it is not).", []string{"route"}, nil)
	routePausedPendingDesc = prometheus.NewDesc("ackd_route_paused_pending_rows",
		"Pending rows of a paused route, waiting for its resume (0 when it is not paused).", []string{"route"}, nil)
	routePausedOldestDesc = prometheus.NewDesc("ackd_route_paused_oldest_pending_seconds",
		"Age of the oldest pending row of a paused route (0 when it is not paused or has none).", []string{"route"}, nil)
)

func newPauseCollector(st store.Store, routes []config.Route) *pauseCollector {
	c := &pauseCollector{st: st}
	for _, r := range routes {
		if !slices.Contains(c.routes, r.Name) {
			c.routes = append(c.routes, r.Name)
		}
	}
	return c
}

func (c *pauseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- routePausedDesc
	ch <- routePausedSecondsDesc
	ch <- routePausedPendingDesc
	ch <- routePausedOldestDesc
}

func (c *pauseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	paused, err := c.st.PausedRoutes(ctx)
	if err != nil {
		return // ackd_database_up says so
	}
	now := c.st.Now()
	emit := func(route string, paused, seconds, pending, oldest float64) {
		ch <- prometheus.MustNewConstMetric(routePausedDesc, prometheus.GaugeValue, paused, route)
		ch <- prometheus.MustNewConstMetric(routePausedSecondsDesc, prometheus.GaugeValue, seconds, route)
		ch <- prometheus.MustNewConstMetric(routePausedPendingDesc, prometheus.GaugeValue, pending, route)
		ch <- prometheus.MustNewConstMetric(routePausedOldestDesc, prometheus.GaugeValue, oldest, route)
	}
	for _, name := range c.routes {
		if !slices.ContainsFunc(paused, func(p store.RoutePause) bool { return p.Route == name }) {
			emit(name, 0, 0, 0, 0)
		}
	}
	for _, p := range paused {
		oldest := 0.0
		if !p.OldestPending.IsZero() {
			oldest = max(0, now.Sub(p.OldestPending).Seconds())
		}
		emit(p.Route, 1, max(0, now.Sub(p.PausedAt).Seconds()), float64(p.Pending), oldest)
	}
}
