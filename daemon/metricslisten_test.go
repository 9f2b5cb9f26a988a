package daemon_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
)

// get answers a GET of url with its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// [metrics] listen moves /metrics and /healthz to a listener of their own,
// so that the Slack-facing port serves only /slack/*; unset, both stay on
// the Slack listener as before.
func TestMetricsListener(t *testing.T) {
	t.Parallel()

	t.Run("with [metrics] listen the Slack port serves only /slack/*", func(t *testing.T) {
		s := startServer(t, configFor(t, "[metrics]\nlisten = \"127.0.0.1:0\"\n"), daemon.Options{})
		ops := "http://" + s.MetricsAddr()
		if ops == s.URL {
			t.Fatalf("metrics listener is the Slack listener (%s)", ops)
		}
		for _, path := range []string{"/metrics", "/healthz"} {
			if code, _ := get(t, s.URL+path); code != http.StatusNotFound {
				t.Errorf("Slack port %s: status %d, want 404", path, code)
			}
		}
		if r := s.postEvent(eventBody("Ev0MLISTEN", mention("C1", "1.1", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("Slack port /slack/events: status %d %q, want 200", r.Status, r.Body)
		}

		if code, body := get(t, ops+"/healthz"); code != http.StatusOK || !strings.HasPrefix(body, "ok (database write checked ") {
			t.Errorf("metrics port /healthz: %d %q, want 200 ok", code, body)
		}
		code, body := get(t, ops+"/metrics")
		if code != http.StatusOK || !strings.Contains(body, `ackd_requests_total{endpoint="events",status="200"} 1`) {
			t.Errorf("metrics port /metrics: %d, want 200 with the event counted:\n%s", code, body)
		}
		req, _ := http.NewRequest(http.MethodPost, ops+"/slack/events", strings.NewReader(`{}`))
		if r := s.do(req); r.Status != http.StatusNotFound {
			t.Errorf("metrics port /slack/events: status %d, want 404", r.Status)
		}
	})

	t.Run("without it /metrics and /healthz stay on the Slack port", func(t *testing.T) {
		s := startServer(t, configFor(t, ""), daemon.Options{})
		if s.MetricsAddr() != s.Addr() {
			t.Errorf("MetricsAddr %s, want the Slack listener %s", s.MetricsAddr(), s.Addr())
		}
		for _, path := range []string{"/metrics", "/healthz"} {
			if code, _ := get(t, s.URL+path); code != http.StatusOK {
				t.Errorf("%s: status %d, want 200", path, code)
			}
		}
	})

	t.Run("a metrics listener on the Slack address, or not host:port, stops startup", func(t *testing.T) {
		for toml, want := range map[string]string{
			"listen = \"127.0.0.1:3000\"\n[metrics]\nlisten = \"127.0.0.1:3000\"\n": "metrics.listen: \"127.0.0.1:3000\" is also listen",
			"[metrics]\nlisten = \"9090\"\n":                                        "metrics.listen: \"9090\" is not host:port",
		} {
			_, err := config.Parse([]byte(toml))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("config %q: error %v, want %q", toml, err, want)
			}
		}
	})
}
