package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
)

// Socket Mode ingress, in process: a real Server against the fake's real
// WebSocket server on 127.0.0.1. The end-to-end suite (e2e/socket_test.go)
// covers crashes, a held write lock, refreshes under load, silence and
// invalid_auth with the real binary.

const sockAppToken = "xapp-1-A0FAKE-test"

const sockRoutes = `
[[route]]
name   = "log-mention"
event  = "app_mention"
effect = "log"

[[route]]
name     = "deploy"
command  = "/deploy"
ack_text = "On it."
effect   = "log"

[[route]]
name      = "approve"
action_id = "approve"
effect    = "log"
`

func sockConfig(tb testing.TB, api *fakeslack.Server, extra string) config.Config {
	tb.Helper()
	return configFor(tb, fmt.Sprintf("[slack]\napi_url = %q\n[socket_mode]\nenabled = true\n%s\n%s", api.URL(), extra, sockRoutes))
}

// startSocket starts a Socket Mode server (no signing secret: HTTP Slack
// routes off) and waits for its connections.
func startSocket(tb testing.TB, api *fakeslack.Server, sock *fakeslack.Socket, extra string, conns int) *testServer {
	tb.Helper()
	opts := daemon.Options{Secrets: config.Secrets{AppToken: sockAppToken}}
	s := startServerNoSecret(tb, sockConfig(tb, api, extra), opts)
	if !sock.Wait(10*time.Second, func() bool { return len(sock.Open()) >= conns }) {
		tb.Fatalf("%d connections open, want %d; log:\n%s", len(sock.Open()), conns, s.Logs)
	}
	return s
}

// startServerNoSecret is startServer without the default signing secret.
func startServerNoSecret(tb testing.TB, cfg config.Config, opts daemon.Options) *testServer {
	tb.Helper()
	opts.Secrets.SigningSecret = ""
	logs := &logBuffer{}
	opts.Schema = readSchema(tb)
	opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := daemon.New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	ts := &testServer{Server: srv, URL: "http://" + srv.Addr(), DB: cfg.DB, Logs: logs, t: tb}
	tb.Cleanup(func() {
		if err := srv.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return ts
}

func sockCommand(trigger, text string) map[string]any {
	return map[string]any{"token": "tok", "team_id": "T1", "team_domain": "acme", "channel_id": "C1",
		"channel_name": "general", "user_id": "U1", "user_name": "ann", "command": "/deploy", "text": text,
		"api_app_id": "A1", "is_enterprise_install": "false", "response_url": "https://hooks.slack.invalid/commands/1",
		"trigger_id": trigger}
}

func sockAction(trigger string) map[string]any {
	return map[string]any{"type": "block_actions", "trigger_id": trigger, "team": map[string]any{"id": "T1"},
		"user": map[string]any{"id": "U1"}, "channel": map[string]any{"id": "C1"},
		"response_url": "https://hooks.slack.invalid/actions/1",
		"actions":      []any{map[string]any{"action_id": "approve", "block_id": "b1", "value": "yes", "action_ts": "1700000000.1"}}}
}

func payloadOf(tb testing.TB, s *testServer, key string) string {
	tb.Helper()
	var p string
	if err := s.db().QueryRow(`SELECT payload FROM outbox WHERE idempotency_key = ?`, key).Scan(&p); err != nil {
		tb.Fatalf("outbox row %s: %v", key, err)
	}
	return p
}

func TestSocketModePipeline(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	s := startSocket(t, api, sock, "", 2)

	if r := s.postEvent(eventBody("Ev0HTTP", mention("C1", "1.1", "hi"))); r.Status != http.StatusNotFound || !strings.Contains(r.Body, "without SLACK_SIGNING_SECRET") {
		t.Errorf("HTTP /slack/events without a signing secret: %d %q, want 404 (routes off) saying why", r.Status, r.Body)
	}
	if r := lockGetHealth(t, s); r.Status != http.StatusOK {
		t.Fatalf("/healthz %d %q with live connections", r.Status, r.Body)
	}

	ev := json.RawMessage(eventBody("Ev0SOCK", mention("C1", "1700000000.000100", "<@UBOT> hi")))
	sock.Send("event", "events_api", ev)
	sock.Send("command", "slash_commands", sockCommand("T.cmd.1", "prod now"))
	sock.Send("action", "interactive", sockAction("T.ix.1"))
	sock.Send("other", "events_api", json.RawMessage(eventBody("Ev0UNROUTED", map[string]any{"type": "channel_created", "channel": map[string]any{"id": "C9"}})))
	for _, k := range []string{"event", "command", "action", "other"} {
		if !sock.Wait(10*time.Second, func() bool { return sock.Acked(k) }) {
			t.Fatalf("%s not acked; log:\n%s", k, s.Logs)
		}
	}
	for _, id := range []string{"Ev0SOCK", "cmd:T.cmd.1", "ix:T.ix.1"} {
		if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id = ?`, id); n != 1 {
			t.Errorf("receipt %s: %d, want 1", id, n)
		}
	}
	if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id = 'Ev0UNROUTED'`); n != 0 {
		t.Errorf("an unrouted event got a receipt")
	}
	for _, a := range sock.Acks() {
		switch a.Key {
		case "command":
			if !strings.Contains(string(a.Payload), `"text":"On it."`) || !strings.Contains(string(a.Payload), `"response_type":"ephemeral"`) {
				t.Errorf("command ack payload %s, want the route's ack_text as an ephemeral message", a.Payload)
			}
		case "event", "other":
			if len(a.Payload) != 0 {
				t.Errorf("%s ack has a payload %s", a.Key, a.Payload)
			}
		}
	}

	t.Run("rows are the ones the HTTP routes make for the same request", func(t *testing.T) {
		h := startServer(t, configFor(t, sockRoutes), daemon.Options{})
		if r := h.postEvent(ev); r.Status != http.StatusOK {
			t.Fatal(r)
		}
		form := url.Values{}
		for k, v := range sockCommand("T.cmd.1", "prod now") {
			form.Set(k, v.(string))
		}
		if r := h.postForm("/slack/commands", []byte(form.Encode())); r.Status != http.StatusOK || !strings.Contains(r.Body, "On it.") {
			t.Fatal(r)
		}
		ix, _ := json.Marshal(sockAction("T.ix.1"))
		if r := h.postForm("/slack/interactivity", []byte("payload="+url.QueryEscape(string(ix)))); r.Status != http.StatusOK {
			t.Fatal(r)
		}
		for _, key := range []string{"Ev0SOCK:log-mention", "cmd:T.cmd.1:deploy", "ix:T.ix.1:approve"} {
			if got, want := payloadOf(t, s, key), payloadOf(t, h, key); got != want {
				t.Errorf("%s: socket row payload\n%s\nHTTP row payload\n%s", key, got, want)
			}
		}
	})

	t.Run("the same envelope on two connections acts once", func(t *testing.T) {
		sock.SendToTwo("twice", "events_api", json.RawMessage(eventBody("Ev0TWICE", mention("C1", "1700000000.000200", "hi"))))
		if !sock.Wait(10*time.Second, func() bool {
			n := 0
			for _, a := range sock.Acks() {
				if a.Key == "twice" {
					n++
				}
			}
			return n == 2
		}) {
			t.Fatalf("both copies not acked: %+v", sock.Acks())
		}
		conns := map[int]bool{}
		for _, e := range sock.Sent() {
			if e.Key == "twice" {
				conns[e.Conn] = true
			}
		}
		if len(conns) != 2 {
			t.Fatalf("copies went to %d connections, want 2", len(conns))
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = 'Ev0TWICE:log-mention'`); n != 1 {
			t.Errorf("%d rows, want 1", n)
		}
		waitFor(t, "the second copy logged as a duplicate", 10*time.Second, func() bool {
			return s.Logs.Find("outcome", "duplicate", "event_id", "Ev0TWICE", "acked", true) != nil
		})
	})

	t.Run("a re-send of an acked event adds nothing", func(t *testing.T) {
		// Re-sending an acked event the way Slack does after a lost ack.
		sock.Send("again", "events_api", ev)
		if !sock.Wait(10*time.Second, func() bool { return sock.Acked("again") }) {
			t.Fatal("not acked")
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = 'Ev0SOCK:log-mention'`); n != 1 {
			t.Errorf("%d rows, want 1", n)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		wants := []string{
			"ackd_socket_connections 2",
			`ackd_socket_envelopes_total{outcome="first",type="events_api"} 2`,
			`ackd_socket_envelopes_total{outcome="duplicate",type="events_api"} 2`,
			`ackd_socket_envelopes_total{outcome="first",type="slash_commands"} 1`,
			`ackd_socket_envelopes_total{outcome="first",type="interactive"} 1`,
			`ackd_socket_envelopes_total{outcome="ignored",type="events_api"} 1`,
			`ackd_ack_latency_seconds_count{endpoint="socket",outcome="first"} 4`,
		}
		missing := func() []string {
			body := s.do(mustGet(t, s.URL+"/metrics")).Body
			var out []string
			for _, w := range wants {
				if !strings.Contains(body, w) {
					out = append(out, w)
				}
			}
			return out
		}
		// Counted right after each ack, so an ack can be seen first.
		deadline := time.Now().Add(10 * time.Second)
		for len(missing()) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		for _, w := range missing() {
			t.Errorf("/metrics lacks %q", w)
		}
	})

}

func mustGet(tb testing.TB, u string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

func TestSocketModeAckSize(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	big := strings.Repeat("x", 25*1024)
	cfg := configFor(t, fmt.Sprintf(`[slack]
api_url = %q
[socket_mode]
enabled = true
connections = 1
[[route]]
name     = "big"
command  = "/big"
ack_text = %q
effect   = "log"
`, api.URL(), big))
	s := startServerNoSecret(t, cfg, daemon.Options{Secrets: config.Secrets{AppToken: sockAppToken}})
	sock.Wait(10*time.Second, func() bool { return len(sock.Open()) == 1 })
	cmd := sockCommand("T.big", "")
	cmd["command"] = "/big"
	sock.Send("big", "slash_commands", cmd)
	if !sock.Wait(10*time.Second, func() bool { return sock.Acked("big") }) {
		t.Fatalf("an ack whose payload is over 20 KB must still be sent, without the payload; oversized=%d log:\n%s", len(sock.Oversized()), s.Logs)
	}
	if len(sock.Oversized()) != 0 {
		t.Errorf("%d acks of 20 KB or more were sent", len(sock.Oversized()))
	}
	if s.Logs.Find("msg", "socket mode: ack payload is over Slack's 20 KB limit; acking without it (shorten the route's ack_text)") == nil {
		t.Errorf("no error logged for the oversized ack")
	}
}

func TestSocketModeConfig(t *testing.T) {
	for _, tc := range []struct{ toml, want string }{
		{"[socket_mode]\nconnections = 0", "socket_mode.connections: 0 must be between 1 and 10"},
		{"[socket_mode]\nconnections = 11", "socket_mode.connections: 11 must be between 1 and 10"},
		{"[socket_mode]\nsilence = \"10ms\"", "socket_mode.silence"},
		{"[socket_mode]\nenable = true", `unknown key "socket_mode.enable"`},
	} {
		if _, err := config.Parse([]byte(tc.toml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.toml, err, tc.want)
		}
	}
	cfg := configFor(t, "[socket_mode]\nenabled = true")
	for _, tc := range []struct {
		sec  config.Secrets
		want string
	}{
		{config.Secrets{}, "set SLACK_APP_TOKEN or SLACK_APP_TOKEN_FILE"},
		{config.Secrets{AppToken: "xoxb-secret-bot-token"}, "must start with xapp-"},
	} {
		_, err := daemon.New(cfg, daemon.Options{Secrets: tc.sec})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("secrets %+v: err %v, want %q", tc.sec, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "xoxb-secret") {
			t.Errorf("the error prints the token: %v", err)
		}
	}
	if _, err := daemon.New(configFor(t, ""), daemon.Options{}); err == nil {
		t.Error("no signing secret and no Socket Mode: want an error")
	}
}

func TestSocketModeInvalidAuth(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, "xapp-1-the-real-one")
	s := startServerNoSecret(t, sockConfig(t, api, ""), daemon.Options{Secrets: config.Secrets{AppToken: sockAppToken}})
	waitFor(t, "the auth failure logged", 10*time.Second, func() bool {
		return s.Logs.Find("level", "ERROR", "error_code", "invalid_auth") != nil
	})
	r := lockGetHealth(t, s)
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Body, "invalid_auth") {
		t.Errorf("/healthz %d %q, want 503 naming invalid_auth", r.Status, r.Body)
	}
	if strings.Contains(s.Logs.String(), sockAppToken) {
		t.Error("the log contains the app-level token")
	}
	if n := sock.Opens(); n != 0 {
		t.Errorf("%d successful opens", n)
	}
}

func TestSocketModeBesideHTTP(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	s := startServer(t, sockConfig(t, api, ""), daemon.Options{Secrets: config.Secrets{AppToken: sockAppToken}})
	if !sock.Wait(10*time.Second, func() bool { return len(sock.Open()) == 2 }) {
		t.Fatalf("open %v", sock.Open())
	}
	if r := s.postEvent(eventBody("Ev0BOTH", mention("C1", "1700000000.000300", "hi"))); r.Status != http.StatusOK {
		t.Fatalf("HTTP beside Socket Mode: %d %q", r.Status, r.Body)
	}
	// The same event over the socket is a duplicate of the HTTP delivery.
	sock.Send("both", "events_api", json.RawMessage(eventBody("Ev0BOTH", mention("C1", "1700000000.000300", "hi"))))
	if !sock.Wait(10*time.Second, func() bool { return sock.Acked("both") }) {
		t.Fatal("not acked")
	}
	// The log line follows the ack.
	waitFor(t, "the socket delivery logged as a duplicate of the HTTP one", 10*time.Second, func() bool {
		return s.Logs.Find("endpoint", "socket", "outcome", "duplicate", "event_id", "Ev0BOTH") != nil
	})
}

func TestSocketModeRateLimitedOpen(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	api.Script("apps.connections.open", fakeslack.RateLimited("1"))
	s := startSocket(t, api, sock, "connections = 1", 1)
	calls := api.CallsTo("apps.connections.open")
	if len(calls) < 2 {
		t.Fatalf("%d calls", len(calls))
	}
	// A lower bound only: a slow machine makes the gap longer, never shorter.
	if gap := calls[1].Time.Sub(calls[0].Time); gap < time.Second {
		t.Errorf("apps.connections.open called again %s after a 429 with Retry-After: 1", gap)
	}
	if s.Logs.Find("msg", "socket mode: could not open a connection; retrying with backoff", "level", "WARN") == nil {
		t.Errorf("the 429 was not logged:\n%s", s.Logs)
	}
}

func TestSocketModeCloseLeavesNothingRunning(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	sock.RefreshGrace = 100 * time.Millisecond
	cfg := sockConfig(t, api, "silence = \"300ms\"")
	srv, err := daemon.New(cfg, daemon.Options{Schema: readSchema(t), Secrets: config.Secrets{AppToken: sockAppToken},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !sock.Wait(10*time.Second, func() bool { return len(sock.Open()) == 2 }) {
		t.Fatal("not connected")
	}
	// A refresh, a silent connection and an envelope in flight, then Close.
	sock.Refresh(1)
	sock.Silence(2)
	if !sock.Wait(10*time.Second, func() bool { return len(sock.Conns()) >= 4 && len(sock.Open()) == 2 }) {
		t.Fatalf("connections not replaced: %+v", sock.Conns())
	}
	sock.Send("last", "events_api", json.RawMessage(eventBody("Ev0LAST", mention("C1", "1700000000.000400", "hi"))))
	if !sock.Wait(10*time.Second, func() bool { return sock.Acked("last") }) {
		t.Fatal("not acked")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// The fake notices a close when its reader sees it.
	if !sock.Wait(5*time.Second, func() bool { return len(sock.Open()) == 0 }) {
		t.Errorf("connections %v still open after Close", sock.Open())
	}
	for _, c := range sock.Conns() {
		if !c.Refreshed && !c.Silenced && !c.ClosedByClient {
			t.Errorf("connection %d was not closed by ackd", c.ID)
		}
	}
	goleak.VerifyNone(t, ignore,
		// the fake's own server side, stopped at cleanup
		goleak.IgnoreAnyFunction("net/http/httptest.(*Server).goServe.func1"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("github.com/ackd/ackd/internal/fakeslack.(*Socket).reader"),
		goleak.IgnoreAnyFunction("github.com/ackd/ackd/internal/fakeslack.(*Socket).pinger"))
}

func TestSocketModeOwnPingsKeepAQuietConnection(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	sock.PingEvery = time.Hour // this Slack never pings, but answers pings
	s := startSocket(t, api, sock, "silence = \"300ms\"", 2)
	time.Sleep(2 * time.Second) // several silence bounds pass: the absence of replacements is the point
	if n := len(sock.Conns()); n != 2 {
		t.Errorf("%d connections opened, want 2: pongs to ackd's pings must count as received; log:\n%s", n, s.Logs)
	}
}

// A write that fails ends the connection (issue 21, part 7): once a write
// timed out, gorilla/websocket never writes on that connection again, so a
// connection left "live" after one took envelopes, committed them and never
// acked them. Here the fake stops reading from the only connection; ackd's
// acks fill the kernel's buffers until one times out, and ackd must close
// that connection and open another, on which Slack's re-sends are acked.
func TestSocketModeFailedWriteReplacesTheConnection(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	sock.AckTimeout = time.Second
	sock.MaxRetries = 20
	ackText := strings.Repeat("x", 15<<10) // each ack about 15 KB, under Slack's 20 KB
	cfg := configFor(t, fmt.Sprintf(`[slack]
api_url = %q
[socket_mode]
enabled = true
connections = 1
[[route]]
name     = "big"
command  = "/big"
ack_text = %q
effect   = "log"
`, api.URL(), ackText))
	s := startServerNoSecret(t, cfg, daemon.Options{Secrets: config.Secrets{AppToken: sockAppToken}})
	if !sock.Wait(10*time.Second, func() bool { return len(sock.Open()) == 1 }) {
		t.Fatalf("not connected; log:\n%s", s.Logs)
	}
	sock.Stall(1)

	// How much the kernel buffers before a write blocks depends on the
	// machine: send commands until ackd gives the connection up.
	replaced := func() bool { return len(sock.Conns()) >= 2 }
	var keys []string
	for batch := 0; !replaced() && batch < 40; batch++ {
		for range 25 {
			key := fmt.Sprintf("big%03d", len(keys))
			cmd := sockCommand("T."+key, "")
			cmd["command"] = "/big"
			sock.Send(key, "slash_commands", cmd)
			keys = append(keys, key)
		}
		sock.Wait(2*time.Second, replaced)
	}
	if !replaced() {
		t.Fatalf("%d commands sent on a connection the fake does not read, and ackd never replaced it; log:\n%.4000s", len(keys), s.Logs)
	}
	for _, k := range keys {
		if !sock.Wait(20*time.Second, func() bool { return sock.Acked(k) }) {
			t.Fatalf("%s never acked (of %d commands)", k, len(keys))
		}
	}
	t.Logf("%d commands sent before the replacement", len(keys))
	if c := sock.Conns()[0]; c.Closed.IsZero() || !c.ClosedByClient {
		t.Errorf("the stalled connection was not closed by ackd: %+v", c)
	}
	waitFor(t, "the replacement logged", 10*time.Second, func() bool {
		return s.Logs.Find("msg", "socket mode: a write on the connection failed (it cannot write again: acks on it would be lost); closed it, replacing it", "conn", 1) != nil
	})
	if got := s.scrape().value("ackd_socket_reconnects_total", "reason", "write_failed"); got != 1 {
		t.Errorf(`ackd_socket_reconnects_total{reason="write_failed"} = %v, want 1`, got)
	}
	// Each command acted once, whichever connection acked it.
	if n := s.count(`SELECT count(*) FROM slack_event_receipts`); n != len(keys) {
		t.Errorf("%d receipts for %d commands", n, len(keys))
	}
	if n := s.count(`SELECT count(*) FROM outbox`); n != len(keys) {
		t.Errorf("%d outbox rows for %d commands", n, len(keys))
	}
}
