package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/testreq"
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

// A database this user may not read or write names the path, the user, the
// owner and the fix, for serve, for a sweep, and for a command that only
// reads (SQLite writes -wal and -shm beside the file even then).
func TestDatabasePermissionErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	testreq.Need(t, os.Geteuid() == 0, "running ackd as another user (nobody) needs root (CI runs as root)")
	dir, err := os.MkdirTemp("", "ackd-perm-") // t.TempDir's parent is 0700: nobody could not run the binary
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ackd")
	b, err := os.ReadFile(procBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "ackd.db")
	procMustRun(t, procEnv(), "migrate", "--db", db)
	run := func(mode os.FileMode, args ...string) (int, string) {
		t.Helper()
		if err := os.Chmod(db, mode); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, append(args, "--db", db)...)
		cmd.Env = procEnv("SLACK_SIGNING_SECRET=" + procSecret)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("ackd %v as nobody: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	for _, tc := range []struct {
		mode os.FileMode
		args []string
	}{
		{0o644, []string{"status"}},
		{0o600, []string{"status"}},
		{0o644, []string{"sweep", "--once"}},
		{0o644, []string{"serve", "--listen", "127.0.0.1:0"}},
	} {
		code, out := run(tc.mode, tc.args...)
		if code == 0 {
			t.Errorf("ackd %v as nobody on a %v root-owned database: exit 0\n%s", tc.args, tc.mode, out)
			continue
		}
		for _, w := range []string{"database " + db, "runs as nobody (uid 65534)", "owned by root", "-wal", "run ackd as root, its owner", "chown or chmod"} {
			if !strings.Contains(out, w) {
				t.Errorf("ackd %v (%v): the error lacks %q:\n%s", tc.args, tc.mode, w, out)
			}
		}
	}
}

// serve and config check ask auth.test once and name a wrong bot token.
func TestWrongBotTokenIsNamedAtStart(t *testing.T) {
	t.Parallel()
	api := fakeslack.New(t, "xoxb-the-right-one")
	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf("[slack]\napi_url = %q\n\n[[route]]\nname = \"eyes\"\nevent = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n", api.URL()))
	db := filepath.Join(dir, "ackd.db")
	check := func(token string) procResult {
		return procRun(t, procEnv("ACKD_SLACK_CHECK=", "SLACK_BOT_TOKEN="+token), "config", "check", "--config", cfg, "--db", db)
	}
	if r := check("xoxb-the-right-one"); r.Code != 0 || !strings.Contains(r.Stdout, "SLACK_BOT_TOKEN is bot") {
		t.Errorf("the right token: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	r := check("xoxb-a-wrong-one")
	if r.Code == 0 || !strings.Contains(r.Stdout, "Slack refuses SLACK_BOT_TOKEN (auth.test: invalid_auth)") || !strings.Contains(r.Stdout, "OAuth & Permissions") ||
		!strings.Contains(r.Stderr, "serve would start, but its Web API rows would park") {
		t.Errorf("a wrong token: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if strings.Contains(r.Stdout+r.Stderr, "xoxb-a-wrong-one") {
		t.Errorf("config check printed the token:\n%s", r.Stdout)
	}
	if r := check("xapp-1-A1-1-abc"); r.Code == 0 || !strings.Contains(r.Stdout, "app-level token (xapp-…), which is SLACK_APP_TOKEN's") {
		t.Errorf("an app token as the bot token: exit %d\n%s", r.Code, r.Stdout)
	}
	// Slack out of reach: said, not failed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	off := procWriteConfig(t, dir, "off.toml", "[slack]\napi_url = \"http://"+closed+"/api/\"\n\n[[route]]\nname = \"eyes\"\nevent = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n")
	if r := procRun(t, procEnv("ACKD_SLACK_CHECK=", "SLACK_BOT_TOKEN=xoxb-x"), "config", "check", "--config", off, "--db", db); r.Code != 0 || !strings.Contains(r.Stdout, "SLACK_BOT_TOKEN not checked") {
		t.Errorf("Slack out of reach: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// serve starts, and says it at once.
	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv("ACKD_SLACK_CHECK=", "SLACK_BOT_TOKEN=xoxb-a-wrong-one")})
	procWaitFor(t, "serve's word on the token", 10*time.Second, func() bool {
		return strings.Contains(d.Stderr.String(), "Slack refuses SLACK_BOT_TOKEN (auth.test: invalid_auth)")
	})
	d.stop()
}
