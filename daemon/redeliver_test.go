package daemon_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/sweep"
)

// boltish is a local app that checks Slack's signature the way Bolt does
// and answers from a function.
type boltish struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
}

func newBoltish(t *testing.T, answer func(n int, body []byte) (status int, ctype, reply string)) *boltish {
	t.Helper()
	b := &boltish{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts, _ := strconv.ParseInt(r.Header.Get("X-Slack-Request-Timestamp"), 10, 64)
		if len(r.Header.Values("X-Slack-Signature")) != 1 || r.Header.Get("X-Slack-Signature") != sign(testSecret, ts, body) ||
			time.Since(time.Unix(ts, 0)) > 5*time.Minute {
			http.Error(w, "invalid signature", http.StatusUnauthorized)
			return
		}
		b.mu.Lock()
		b.bodies = append(b.bodies, body)
		b.heads = append(b.heads, r.Header.Clone())
		n := len(b.bodies)
		b.mu.Unlock()
		status, ctype, reply := answer(n, body)
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		io.WriteString(w, reply)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *boltish) seen() ([][]byte, []http.Header) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]byte(nil), b.bodies...), append([]http.Header(nil), b.heads...)
}

func redeliverConfig(url string) string {
	return fmt.Sprintf(`
[sweep]
interval = "100ms"
backoff = "100ms"
max_backoff = "200ms"

[[route]]
name   = "events"
event  = "*"
effect = "redeliver"
url    = %[1]q

[[route]]
name    = "commands"
command = "*"
effect  = "redeliver"
url     = %[1]q

[[route]]
name        = "interactions"
callback_id = "*"
effect      = "redeliver"
url         = %[1]q
`, url)
}

func ixBlockSuggestion(value string) map[string]any {
	return map[string]any{
		"type": "block_suggestion", "action_id": "pick", "block_id": "b1", "value": value,
		"team": map[string]any{"id": "T0001"}, "user": map[string]any{"id": "U061F7AUR"},
		"api_app_id": "A0KRD7HC3",
		"view":       map[string]any{"id": "V0MODAL01", "callback_id": "picker", "hash": "1.a"},
	}
}

func TestRedeliverRoutes(t *testing.T) {
	t.Parallel()

	t.Run("Slack's bytes are stored once and re-delivered exactly, for every event, command and interaction", func(t *testing.T) {
		app := newBoltish(t, func(int, []byte) (int, string, string) { return 200, "", "" })
		s := startServer(t, configFor(t, redeliverConfig(app.srv.URL+"/slack/events")), daemon.Options{})
		ev := eventBody("EvRD1", map[string]any{"type": "channel_created", "channel": map[string]any{"id": "C1"}})
		cmd := []byte("command=%2Fanything&text=x&trigger_id=1.2.rd&response_url=http%3A%2F%2F127.0.0.1%3A1%2Fr&user_id=U1")
		ix := ixForm(t, ixBlockActions("3.4.rd", "no_such_route_id", "1515449601.1", "http://127.0.0.1:1/r"))
		for _, r := range []response{s.postEvent(ev), s.postForm("/slack/commands", cmd), s.postForm("/slack/interactivity", ix)} {
			if r.Status != 200 || r.Body != "" {
				t.Fatalf("answer %d %q, want an empty 200", r.Status, r.Body)
			}
		}
		waitFor(t, "three re-deliveries", 10*time.Second, func() bool { b, _ := app.seen(); return len(b) == 3 })
		waitFor(t, "rows done", 10*time.Second, func() bool {
			return s.count(`SELECT count(*) FROM outbox WHERE status = 'done'`) == 3
		})
		bodies, heads := app.seen()
		want := map[string]string{string(ev): "application/json", string(cmd): "application/x-www-form-urlencoded",
			string(ix): "application/x-www-form-urlencoded"}
		for i, b := range bodies {
			ct, ok := want[string(b)]
			if !ok {
				t.Errorf("app got bytes Slack never sent: %q", b)
				continue
			}
			if heads[i].Get("Content-Type") != ct || heads[i].Get("X-Slack-Retry-Num") != "" {
				t.Errorf("headers %v", heads[i])
			}
		}
		if n := s.count(`SELECT count(*) FROM slack_requests`); n != 3 {
			t.Errorf("stored requests = %d, want 3", n)
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE request_id IS NULL OR json_extract(payload, '$.raw') IS NOT NULL`); n != 0 {
			t.Errorf("%d redeliver rows carry a copy of the request or name none", n)
		}
	})

	t.Run("a view_submission's answer from the app is ackd's answer, from one inline attempt", func(t *testing.T) {
		answer := `{"response_action":"errors","errors":{"service":"no such service"}}`
		app := newBoltish(t, func(int, []byte) (int, string, string) { return 200, "application/json", answer })
		s := startServer(t, configFor(t, redeliverConfig(app.srv.URL)), daemon.Options{})
		r := s.postForm("/slack/interactivity", ixForm(t, ixViewSubmission("9.9.vs", "deploy_modal")))
		if r.Status != 200 || r.Body != answer || r.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("answer %d %q (%s), want the app's", r.Status, r.Body, r.Header.Get("Content-Type"))
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE status = 'done' AND attempts = 1`); n != 1 {
			t.Fatalf("done rows = %d, want the inline attempt's row done", n)
		}
		// A duplicate answers empty and re-delivers nothing.
		if r := s.postForm("/slack/interactivity", ixForm(t, ixViewSubmission("9.9.vs", "deploy_modal"))); r.Body != "" {
			t.Fatalf("duplicate answered %q", r.Body)
		}
		s.Sweeper().RunOnce(t.Context())
		if b, _ := app.seen(); len(b) != 1 {
			t.Fatalf("app saw %d requests, want 1", len(b))
		}
	})

	t.Run("the other rows of an inline view_submission wait for the answer: nothing else reaches a third party first", func(t *testing.T) {
		hook := fakeslack.NewHook(t)
		var during atomic.Int64
		during.Store(-1)
		app := newBoltish(t, func(int, []byte) (int, string, string) {
			// The ticker runs every 100ms: give it several chances to take
			// the sibling row while ackd still owes Slack its answer.
			time.Sleep(500 * time.Millisecond)
			during.Store(int64(len(hook.Posts())))
			return 200, "application/json", `{"response_action":"clear"}`
		})
		cfg := redeliverConfig(app.srv.URL) + fmt.Sprintf(`
[[route]]
name        = "audit"
callback_id = "*"
effect      = "forward"
url         = %q
`, hook.URL())
		s := startServer(t, configFor(t, cfg), daemon.Options{})
		r := s.postForm("/slack/interactivity", ixForm(t, ixViewSubmission("9.9.sib", "deploy_modal")))
		if r.Status != 200 || !strings.Contains(r.Body, "clear") {
			t.Fatalf("answer %d %q, want the app's", r.Status, r.Body)
		}
		if n := during.Load(); n != 0 {
			t.Fatalf("the forward target got %d requests while the inline attempt still held the answer", n)
		}
		waitFor(t, "the sibling forward after the answer", 15*time.Second, func() bool { return len(hook.Posts()) == 1 })
	})

	t.Run("each block_suggestion keystroke gets the app's options, even the same text twice", func(t *testing.T) {
		app := newBoltish(t, func(n int, body []byte) (int, string, string) {
			return 200, "application/json", fmt.Sprintf(`{"options":[{"text":{"type":"plain_text","text":"opt%d"},"value":"v%d"}]}`, n, n)
		})
		s := startServer(t, configFor(t, redeliverConfig(app.srv.URL)), daemon.Options{})
		for i, v := range []string{"a", "ab", "a"} {
			r := s.postForm("/slack/interactivity", ixForm(t, ixBlockSuggestion(v)))
			if want := fmt.Sprintf("opt%d", i+1); r.Status != 200 || !strings.Contains(r.Body, want) {
				t.Fatalf("keystroke %d: answer %d %q, want options with %s", i+1, r.Status, r.Body, want)
			}
		}
		if n := s.count(`SELECT count(*) FROM slack_event_receipts`); n != 3 {
			t.Fatalf("receipts = %d, want 3 (each keystroke is a request)", n)
		}
	})

	t.Run("an app too slow for the ack budget: empty 200, then the sweep re-delivers", func(t *testing.T) {
		release := make(chan struct{})
		app := newBoltish(t, func(n int, body []byte) (int, string, string) {
			if n == 1 {
				<-release // answers only after ackd has answered Slack
			}
			return 200, "application/json", `{"response_action":"clear"}`
		})
		cfg := configFor(t, redeliverConfig(app.srv.URL))
		cfg.Ack.Budget = config.Duration{Duration: 300 * time.Millisecond}
		s := startServer(t, cfg, daemon.Options{})
		r := s.postForm("/slack/interactivity", ixForm(t, ixViewSubmission("8.8.slow", "deploy_modal")))
		close(release)
		if r.Status != 200 || r.Body != "" {
			t.Fatalf("answer %d %q, want an empty 200", r.Status, r.Body)
		}
		waitFor(t, "the sweep's re-delivery", 20*time.Second, func() bool {
			return s.count(`SELECT count(*) FROM outbox WHERE status = 'done'`) == 1
		})
		_, heads := app.seen()
		if len(heads) != 2 || heads[0].Get("X-Ackd-Attempt") != "1" || heads[1].Get("X-Ackd-Attempt") != "2" ||
			heads[0].Get("Idempotency-Key") != heads[1].Get("Idempotency-Key") {
			t.Fatalf("app saw %d requests: %v", len(heads), heads)
		}
	})

	t.Run("a command's ack body reaches its response_url once", func(t *testing.T) {
		var mu sync.Mutex
		var posted []string
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			posted = append(posted, string(b))
			mu.Unlock()
			io.WriteString(w, "ok")
		}))
		defer hook.Close()
		app := newBoltish(t, func(int, []byte) (int, string, string) { return 200, "", "Deploying prod" })
		s := startServer(t, configFor(t, redeliverConfig(app.srv.URL)), daemon.Options{})
		cmd := []byte("command=%2Fdeploy&text=prod&trigger_id=5.5.cmd&user_id=U1&response_url=" + hook.URL + "%2Fcommands%2F1")
		for range 2 {
			if r := s.postForm("/slack/commands", cmd); r.Status != 200 || r.Body != "" {
				t.Fatalf("answer %d %q", r.Status, r.Body)
			}
		}
		waitFor(t, "the follow-up", 10*time.Second, func() bool {
			return s.count(`SELECT count(*) FROM outbox WHERE status = 'done'`) == 2
		})
		mu.Lock()
		defer mu.Unlock()
		if len(posted) != 1 || !strings.Contains(posted[0], `"text":"Deploying prod"`) {
			t.Fatalf("response_url got %q", posted)
		}
	})
}

func TestRedeliverBadInput(t *testing.T) {
	t.Parallel()
	app := newBoltish(t, func(int, []byte) (int, string, string) { return 200, "", "" })
	cfg := configFor(t, redeliverConfig(app.srv.URL))
	cfg.Sweep.Interval = config.Duration{Duration: time.Hour} // only the sweeps this test runs
	cfg.Sweep.Immediate = false
	s := startServer(t, cfg, daemon.Options{})
	log := slog.New(slog.DiscardHandler)

	t.Run("a body over the cap is 413 and never reaches the outbox", func(t *testing.T) {
		big := append([]byte("payload="), bytes.Repeat([]byte("a"), ingress.MaxBody)...)
		if r := s.postForm("/slack/interactivity", big); r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", r.Status)
		}
		if n := s.count(`SELECT count(*) FROM slack_requests`) + s.count(`SELECT count(*) FROM outbox`); n != 0 {
			t.Fatalf("%d rows written", n)
		}
	})

	t.Run("a sweep without a signing secret leaves redeliver rows unclaimed", func(t *testing.T) {
		if r := s.postEvent(eventBody("EvNoSecret", mention("C1", "1.1", "hi"))); r.Status != 200 {
			t.Fatalf("status %d", r.Status)
		}
		ec := sweep.EffectConfig{Logger: log}
		sc := daemon.SweepConfig(cfg)
		sc.Skip = ec.Unavailable()
		sw := sweep.New(s.Store(), sweep.Effects(ec), sc, log, nil)
		if res, err := sw.RunOnce(t.Context()); err != nil || res.Claimed != 0 {
			t.Fatalf("sweep: %v %v, want nothing claimed", res, err)
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = 'EvNoSecret:events' AND status = 'pending' AND attempts = 0`); n != 1 {
			t.Fatal("the row was touched")
		}
	})

	t.Run("a performer without a signing secret parks the row as no_signing_secret (defence in depth)", func(t *testing.T) {
		sw := sweep.New(s.Store(), sweep.Effects(sweep.EffectConfig{Logger: log}), daemon.SweepConfig(cfg), log, nil)
		if res, err := sw.RunOnce(t.Context()); err != nil || res.Parked != 1 {
			t.Fatalf("sweep: %v %v", res, err)
		}
		var lastErr string
		if err := s.db().QueryRow(`SELECT last_error FROM outbox WHERE idempotency_key = 'EvNoSecret:events'`).Scan(&lastErr); err != nil ||
			!strings.HasPrefix(lastErr, "no_signing_secret") {
			t.Fatalf("last_error %q (%v)", lastErr, err)
		}
	})

	t.Run("a stored request that cannot be read parks the row with a clear last_error", func(t *testing.T) {
		if r := s.postEvent(eventBody("EvBadStored", mention("C1", "1.2", "hi"))); r.Status != 200 {
			t.Fatalf("status %d", r.Status)
		}
		if _, err := s.db().Exec(`UPDATE slack_requests SET content_type = 'text/html' WHERE event_id = 'EvBadStored'`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sweeper().RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		var status, lastErr string
		if err := s.db().QueryRow(`SELECT status, last_error FROM outbox WHERE idempotency_key = 'EvBadStored:events'`).Scan(&status, &lastErr); err != nil ||
			status != "parked" || !strings.Contains(lastErr, "bad_request") || !strings.Contains(lastErr, "text/html") {
			t.Fatalf("row %s %q (%v)", status, lastErr, err)
		}
		if b, _ := app.seen(); len(b) != 0 {
			t.Fatalf("the app got %d requests", len(b))
		}
	})
}

func TestRedeliverConfig(t *testing.T) {
	if _, err := config.Load("../examples/bolt/ackd.toml"); err != nil {
		t.Errorf("examples/bolt/ackd.toml: %v", err)
	}
	// Socket Mode without a signing secret: a redeliver route could never be performed.
	cfg := configFor(t, "[socket_mode]\nenabled = true\n"+redeliverConfig("http://127.0.0.1:1"))
	_, err := daemon.New(cfg, daemon.Options{Secrets: config.Secrets{AppToken: "xapp-1-test"}})
	if err == nil || !strings.Contains(err.Error(), "ACKD_REDELIVER_SECRET") {
		t.Errorf("no signing secret with a redeliver route: err = %v", err)
	}
	if _, err := daemon.New(cfg, daemon.Options{Secrets: config.Secrets{AppToken: "xapp-1-test", RedeliverSecret: "s"}}); err != nil {
		t.Errorf("with ACKD_REDELIVER_SECRET: %v", err)
	}
	for _, tc := range []struct{ toml, err string }{
		{"[[route]]\nname=\"r\"\nevent=\"*\"\neffect=\"redeliver\"\n", "needs url"},
		{"[[route]]\nname=\"r\"\ncommand=\"*\"\neffect=\"redeliver\"\nurl=\"http://127.0.0.1:1\"\n", ""},
		{"[[route]]\nname=\"r\"\ncallback_id=\"*\"\neffect=\"redeliver\"\nurl=\"http://127.0.0.1:1\"\n", ""},
		{"[[route]]\nname=\"r\"\ncommand=\"deploy\"\neffect=\"log\"\n", "must start with /"},
		{"[[route]]\nname=\"r\"\nevent=\"*\"\neffect=\"redeliver\"\nurl=\"http://127.0.0.1:1\"\nreaction=\"x\"\n", "not used by effect redeliver"},
	} {
		_, err := config.Parse([]byte(tc.toml))
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: err = %v, want %q", tc.toml, err, tc.err)
		}
	}
}
