package daemon_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
)

// Issue 39.8: Slack's side of the app's health, in /metrics.

// appRateLimited is Slack's documented app_rate_limited callback.
const appRateLimited = `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","type":"app_rate_limited","team_id":"T123ABC456","minute_rate_limited":1518467820,"api_app_id":"A123ABC456"}`

// waitMetric waits until /metrics (rendered at most once a second) shows
// want for the series of name with labels.
func waitMetric(tb testing.TB, s *testServer, want float64, name string, labels ...string) {
	tb.Helper()
	var got float64
	for deadline := time.Now().Add(10 * time.Second); ; {
		if got = s.scrape().value(name, labels...); got == want {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s = %v, want %v", name, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAppRateLimitedCountedOverHTTP(t *testing.T) {
	s := startServer(t, configFor(t, ""), daemon.Options{})
	m := s.scrape()
	metricsNeedFamily(t, m, "ackd_slack_app_rate_limited_total", dto.MetricType_COUNTER)
	if v := m.value("ackd_slack_app_rate_limited_total"); v != 0 {
		t.Fatalf("ackd_slack_app_rate_limited_total = %v before any callback", v)
	}
	for range 2 {
		if r := s.postEvent([]byte(appRateLimited)); r.Status != http.StatusOK {
			t.Fatalf("app_rate_limited answered %d, want 200", r.Status)
		}
	}
	waitMetric(t, s, 2, "ackd_slack_app_rate_limited_total")
	// An ordinary event is not counted.
	if r := s.postEvent(eventBody("Ev0RL1", mention("C1", "1700000000.000100", "hi"))); r.Status != http.StatusOK {
		t.Fatalf("event answered %d", r.Status)
	}
	waitMetric(t, s, 3, "ackd_requests_total", "endpoint", "events", "status", "200")
	if v := s.scrape().value("ackd_slack_app_rate_limited_total"); v != 2 {
		t.Errorf("ackd_slack_app_rate_limited_total = %v after an ordinary event, want 2", v)
	}
}

func TestSocketModeAppRateLimitedCounted(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	s := startSocket(t, api, sock, "connections = 1", 1)
	sock.Send("rl", "events_api", json.RawMessage(appRateLimited))
	if !sock.Wait(10*time.Second, func() bool { return sock.Acked("rl") }) {
		t.Fatal("app_rate_limited envelope not acked")
	}
	waitMetric(t, s, 1, "ackd_slack_app_rate_limited_total")
}

// Slack's hello says how many connections it counts for the app; ackd
// exports it beside what it held at that hello, so that ghosts (counted by
// Slack, held by no one) show as the difference.
func TestSocketModeSlackConnections(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	s := startSocket(t, api, sock, "connections = 1", 1)
	m := s.scrape()
	for _, name := range []string{"ackd_socket_slack_connections", "ackd_socket_connections_at_hello"} {
		metricsNeedFamily(t, m, name, dto.MetricType_GAUGE)
	}
	waitMetric(t, s, 1, "ackd_socket_slack_connections")
	waitMetric(t, s, 1, "ackd_socket_connections_at_hello")

	// Two registrations left behind by half-open reconnects; the next hello
	// (a refresh: the replacement is dialled before the old one closes)
	// counts them, the old connection and the new one.
	sock.Ghosts(2)
	sock.Refresh(sock.Open()[0])
	if !sock.Wait(15*time.Second, func() bool {
		conns := sock.Conns()
		return len(conns) == 2 && !conns[0].Closed.IsZero() && conns[1].Closed.IsZero()
	}) {
		t.Fatalf("the refreshed connection was not replaced: %+v", sock.Conns())
	}
	waitMetric(t, s, 4, "ackd_socket_slack_connections")
	waitMetric(t, s, 2, "ackd_socket_connections_at_hello")
	waitMetric(t, s, 1, "ackd_socket_connections")
}
