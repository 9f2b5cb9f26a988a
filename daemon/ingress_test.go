package daemon_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ackd/ackd/daemon"
)

func TestSSLCheck(t *testing.T) {
	s := startServer(t, configFor(t, `
[[route]]
name = "deploy"
command = "/deploy"
effect = "log"
`), daemon.Options{})
	body := []byte("ssl_check=1&token=legacy-verification-token")

	t.Run("an unsigned ssl_check is answered 200 and writes nothing", func(t *testing.T) {
		r := s.do(mustRequest(t, http.MethodPost, s.URL+"/slack/commands", body, "application/x-www-form-urlencoded"))
		if r.Status != http.StatusOK {
			t.Fatalf("status %d, want 200", r.Status)
		}
		if rc, ob := s.rows(); rc+ob != 0 {
			t.Fatalf("rows written: receipts %d outbox %d", rc, ob)
		}
	})

	t.Run("an unsigned command is still 401", func(t *testing.T) {
		cmd := []byte("command=%2Fdeploy&text=x&trigger_id=1.2.3&ssl_check=1")
		r := s.do(mustRequest(t, http.MethodPost, s.URL+"/slack/commands", cmd, "application/x-www-form-urlencoded"))
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", r.Status)
		}
	})

	t.Run("an unsigned ssl_check on the events endpoint is 401", func(t *testing.T) {
		r := s.do(mustRequest(t, http.MethodPost, s.URL+"/slack/events", body, "application/x-www-form-urlencoded"))
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", r.Status)
		}
	})
}

func TestAppRateLimitedLogCarriesNoToken(t *testing.T) {
	s := startServer(t, configFor(t, ""), daemon.Options{})
	r := s.postEvent([]byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","type":"app_rate_limited","team_id":"T123ABC456","minute_rate_limited":1518467820,"api_app_id":"A123ABC456"}`))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d", r.Status)
	}
	waitFor(t, "the app_rate_limited warning", 5e9, func() bool {
		return strings.Contains(s.Logs.String(), "app_rate_limited: Slack dropped")
	})
	line := s.Logs.Find("team_id", "T123ABC456")
	if line == nil || line["minute_rate_limited"] != "2018-02-12T20:37:00Z" {
		t.Fatalf("warning lacks the team and minute: %v", line)
	}
	if strings.Contains(s.Logs.String(), "Jhj5dZrVaK7ZwHHjRyZWjbDl") {
		t.Fatal("the verification token reached the log")
	}
}

func mustRequest(tb testing.TB, method, url string, body []byte, ctype string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(string(body)))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	return req
}
