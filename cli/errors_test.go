package cli

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/ingress"
)

// Errors a new user meets name the cause and the fix (issue 38.6).

func TestPortInUseSaysWhatToDo(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db := filepath.Join(t.TempDir(), "ackd.db")
	r := procRun(t, procEnv(), "serve", "--db", db, "--listen", ln.Addr().String())
	if r.Code == 0 {
		t.Fatalf("serve on a port in use exited 0:\n%s", r.Stderr)
	}
	for _, w := range []string{"listen " + ln.Addr().String(), "address already in use", "perhaps another ackd serve", "--listen or ACKD_LISTEN"} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("serve's error lacks %q:\n%s", w, r.Stderr)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a serve that could not listen left a database behind (%v)", err)
	}
}

func TestSendToADaemonWithoutHTTPRoutesSaysWhy(t *testing.T) {
	t.Parallel()
	// The real ingress of a daemon without a signing secret (Socket Mode
	// only) on a loopback listener.
	in := ingress.New(config.Default(), ingress.Options{}, slog.New(slog.DiscardHandler))
	mux := http.NewServeMux()
	in.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	payload := filepath.Join(t.TempDir(), "mention.json")
	if err := os.WriteFile(payload, []byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := procRun(t, procEnv(), "send", "--url", srv.URL+"/slack/events", payload)
	if r.Code == 0 || !strings.Contains(r.Stderr, "runs without SLACK_SIGNING_SECRET") || !strings.Contains(r.Stderr, "HTTP Slack routes are off") {
		t.Errorf("send to a daemon with HTTP routes off: exit %d\nstdout %s\nstderr %s", r.Code, r.Stdout, r.Stderr)
	}
	r = procRun(t, procEnv(), "send", "--url", srv.URL+"/elsewhere", payload)
	if r.Code == 0 || !strings.Contains(r.Stderr, "nothing answers") {
		t.Errorf("send to a path nothing serves: exit %d\nstderr %s", r.Code, r.Stderr)
	}
}
