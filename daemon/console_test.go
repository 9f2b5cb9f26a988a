package daemon_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
)

// [console] listen serves the console on its own listener only, behind its
// password; the Slack listener answers 404 on the console's paths; a
// console without a password stops startup.
func TestConsoleListener(t *testing.T) {
	t.Parallel()
	const toml = "[[route]]\nname = \"greet\"\nevent = \"app_mention\"\neffect = \"log\"\n[console]\nlisten = \"127.0.0.1:0\"\n"

	t.Run("the console is on its own listener, and 404 on the Slack one", func(t *testing.T) {
		s := startServer(t, configFor(t, toml), daemon.Options{Secrets: config.Secrets{ConsolePassword: "pw"}})
		if s.ConsoleAddr() == "" || s.ConsoleAddr() == s.Addr() {
			t.Fatalf("ConsoleAddr %q, Slack listener %q", s.ConsoleAddr(), s.Addr())
		}
		for _, path := range []string{"/", "/search?q=Ev1", "/rows/1", "/routes", "/bulk", "/static/style.css"} {
			req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
			req.SetBasicAuth("ackd", "pw")
			if r := s.do(req); r.Status != http.StatusNotFound {
				t.Errorf("Slack listener GET %s: %d, want 404", path, r.Status)
			}
		}
		for _, path := range []string{"/rows/1/retry", "/routes/pause", "/bulk"} {
			req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader("csrf=x"))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.SetBasicAuth("ackd", "pw")
			if r := s.do(req); r.Status != http.StatusNotFound {
				t.Errorf("Slack listener POST %s: %d, want 404", path, r.Status)
			}
		}
		console := "http://" + s.ConsoleAddr()
		req, _ := http.NewRequest(http.MethodGet, console+"/routes", nil)
		if r := s.do(req); r.Status != http.StatusUnauthorized {
			t.Errorf("console without a password: %d, want 401", r.Status)
		}
		req.SetBasicAuth("ackd", "pw")
		if r := s.do(req); r.Status != http.StatusOK || !strings.Contains(r.Body, `data-route="greet"`) {
			t.Errorf("console /routes: %d %q", r.Status, r.Body)
		}
		req, _ = http.NewRequest(http.MethodGet, console+"/slack/events", nil)
		req.SetBasicAuth("ackd", "pw")
		if r := s.do(req); r.Status != http.StatusNotFound {
			t.Errorf("console /slack/events: %d, want 404", r.Status)
		}
		if s.Logs.Find("msg", "ackd listening", "console_addr", s.ConsoleAddr()) == nil {
			t.Errorf("the start line does not name the console's address:\n%s", s.Logs)
		}
	})

	t.Run("a console without a password stops startup, naming the variable", func(t *testing.T) {
		_, err := daemon.New(configFor(t, toml), daemon.Options{Secrets: config.Secrets{SigningSecret: "s"}})
		if err == nil || !strings.Contains(err.Error(), "ACKD_CONSOLE_PASSWORD") {
			t.Fatalf("New without a console password: %v", err)
		}
	})

	t.Run("a console address that is not host:port, or is the Slack one, is refused", func(t *testing.T) {
		for toml, want := range map[string]string{
			"[console]\nlisten = \"3002\"\n":                                        "console.listen: \"3002\" is not host:port",
			"listen = \"127.0.0.1:3000\"\n[console]\nlisten = \"127.0.0.1:3000\"\n": "console.listen: \"127.0.0.1:3000\" is also listen",
		} {
			if _, err := config.Parse([]byte(toml)); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("config %q: error %v, want %q", toml, err, want)
			}
		}
	})
}
