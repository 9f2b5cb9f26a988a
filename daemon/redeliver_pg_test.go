package daemon_test

import (
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/pgtest"
)

// TestRedeliverPostgres runs the redeliver effect on the PostgreSQL engine:
// Slack's bytes stored once per request (slack_requests), read back by the
// sweep's claim and re-delivered exactly, and a view_submission answered by
// the one inline attempt of a row written already leased.
func TestRedeliverPostgres(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()

	t.Run("events, commands and interactions are re-delivered exactly from the stored bytes", func(t *testing.T) {
		app := newBoltish(t, func(int, []byte) (int, string, string) { return 200, "", "" })
		cfg := configFor(t, redeliverConfig(app.srv.URL+"/slack/events"))
		cfg.DB = pgtest.URL(t)
		s := startServer(t, cfg, daemon.Options{})
		ev := eventBody("EvPG1", map[string]any{"type": "channel_created", "channel": map[string]any{"id": "C1"}})
		cmd := []byte("command=%2Fanything&text=x&trigger_id=1.2.pg&response_url=http%3A%2F%2F127.0.0.1%3A1%2Fr&user_id=U1")
		ix := ixForm(t, ixBlockActions("3.4.pg", "no_such_route_id", "1515449601.1", "http://127.0.0.1:1/r"))
		for _, r := range []response{s.postEvent(ev), s.postForm("/slack/commands", cmd), s.postForm("/slack/interactivity", ix)} {
			if r.Status != 200 || r.Body != "" {
				t.Fatalf("answer %d %q, want an empty 200", r.Status, r.Body)
			}
		}
		waitFor(t, "rows done", 20*time.Second, func() bool {
			return pgtest.Count(t, cfg.DB, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 3
		})
		bodies, heads := app.seen()
		want := map[string]string{string(ev): "application/json", string(cmd): "application/x-www-form-urlencoded",
			string(ix): "application/x-www-form-urlencoded"}
		if len(bodies) != 3 {
			t.Fatalf("app saw %d requests, want 3", len(bodies))
		}
		for i, b := range bodies {
			ct, ok := want[string(b)]
			if !ok {
				t.Errorf("app got bytes Slack never sent: %q", b)
				continue
			}
			if heads[i].Get("Content-Type") != ct {
				t.Errorf("headers %v", heads[i])
			}
		}
		if n := pgtest.Count(t, cfg.DB, `SELECT count(*) FROM slack_requests`); n != 3 {
			t.Errorf("stored requests = %d, want 3", n)
		}
		if n := pgtest.Count(t, cfg.DB, `SELECT count(*) FROM outbox WHERE request_id IS NULL`); n != 0 {
			t.Errorf("%d redeliver rows name no stored request", n)
		}
	})

	t.Run("a view_submission's answer comes from one inline attempt", func(t *testing.T) {
		answer := `{"response_action":"errors","errors":{"service":"no such service"}}`
		app := newBoltish(t, func(int, []byte) (int, string, string) { return 200, "application/json", answer })
		cfg := configFor(t, redeliverConfig(app.srv.URL))
		cfg.DB = pgtest.URL(t)
		s := startServer(t, cfg, daemon.Options{})
		r := s.postForm("/slack/interactivity", ixForm(t, ixViewSubmission("9.9.pg", "deploy_modal")))
		if r.Status != 200 || r.Body != answer {
			t.Fatalf("answer %d %q, want the app's", r.Status, r.Body)
		}
		if n := pgtest.Count(t, cfg.DB, `SELECT count(*) FROM outbox WHERE status = 'done' AND attempts = 1`); n != 1 {
			t.Fatalf("done rows = %d, want the inline attempt's row done", n)
		}
		if r := s.postForm("/slack/interactivity", ixForm(t, ixViewSubmission("9.9.pg", "deploy_modal"))); r.Body != "" {
			t.Fatalf("duplicate answered %q", r.Body)
		}
		s.Sweeper().RunOnce(t.Context())
		if b, _ := app.seen(); len(b) != 1 {
			t.Fatalf("app saw %d requests, want 1", len(b))
		}
	})
}
