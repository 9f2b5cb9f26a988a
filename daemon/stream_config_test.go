package daemon_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/sweep"
)

// Issue 33: stream routes and [stream] are checked at startup, with the
// problem named.
func TestStreamConfigRefusals(t *testing.T) {
	const agent = "url = \"http://127.0.0.1:8080/agent\"\n"
	for _, tc := range []struct {
		name, toml, want string
	}{
		{"no url", "[[route]]\nname = \"agent\"\nevent = \"app_mention\"\neffect = \"stream\"\n",
			`line 1: route "agent": effect stream needs url`},
		{"a slash command", "[[route]]\nname = \"agent\"\ncommand = \"/ask\"\neffect = \"stream\"\n" + agent,
			`line 1: route "agent": effect stream answers in a thread: use it with event or events among app_mention, message, assistant_thread_started`},
		{"an event with no thread", "[[route]]\nname = \"agent\"\nevent = \"reaction_added\"\neffect = \"stream\"\n" + agent,
			`route "agent": effect stream answers in a thread`},
		{"every event", "[[route]]\nname = \"agent\"\nevent = \"*\"\neffect = \"stream\"\n" + agent,
			`route "agent": effect stream answers in a thread`},
		{"one of several events", "[[route]]\nname = \"agent\"\nevents = [\"app_mention\", \"pin_added\"]\neffect = \"stream\"\n" + agent,
			`route "agent": effect stream answers in a thread`},
		{"an empty status", "[stream]\nstatus = \"\"\n",
			`stream.status: empty; it is the status shown in the thread while the agent works (default "is thinking…")`},
		{"max_chars of 0", "[stream]\nmax_chars = 0\n", "stream.max_chars: 0 must be between 1 and 200000"},
		{"max_chars too large", "[stream]\nmax_chars = 1000000\n", "stream.max_chars: 1000000 must be between 1 and 200000"},
		{"a mistyped key", "[stream]\nfailed_txt = \"sorry\"\n", `unknown key "stream.failed_txt"`},
		{"a stream key on a post route", "[[route]]\nname = \"p\"\nevent = \"app_mention\"\neffect = \"post\"\ntext = \"hi\"\n" + agent,
			`route "p": url is not used by effect post (only by forward, redeliver, step, stream)`},
		{"a timeout not under the lease", "[sweep]\nlease = \"1m\"\n[[route]]\nname = \"agent\"\nevent = \"app_mention\"\neffect = \"stream\"\ntimeout = \"5m\"\n" + agent,
			`route "agent": timeout 5m0s must be shorter than sweep.lease 1m0s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.toml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestStreamConfigAccepted(t *testing.T) {
	c, err := config.Parse([]byte(`
[sweep]
max_attempts = 5

[stream]
status      = "is looking it up…"
failed_text = "Sorry, no answer this time."
max_chars   = 30000

[[route]]
name   = "agent"
events = ["app_mention", "message", "assistant_thread_started"]
key    = "message"
effect = "stream"
url    = "http://127.0.0.1:8080/agent"
`))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Routes[0]; r.Timeout.Duration != 5*time.Minute || r.Key != "message" {
		t.Fatalf("route %+v: want the default stream timeout 5m", r)
	}
	ec := c.EffectConfig(config.Secrets{BotToken: "xoxb-1"}, slog.New(slog.DiscardHandler), nil)
	if want := (sweep.StreamConfig{Status: "is looking it up…", FailedText: "Sorry, no answer this time.", MaxChars: 30000}); ec.Stream != want || ec.MaxAttempts != 5 {
		t.Fatalf("effects get %+v and max attempts %d, want %+v and 5", ec.Stream, ec.MaxAttempts, want)
	}

	// Defaults, and a short lease shortens the default timeout.
	c, err = config.Parse([]byte("[sweep]\nlease = \"1m\"\n[[route]]\nname = \"agent\"\nevent = \"app_mention\"\neffect = \"stream\"\nurl = \"http://127.0.0.1:8080/agent\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := c.Routes[0].Timeout.Duration; d != 30*time.Second {
		t.Fatalf("timeout %s under a 1m lease, want 30s", d)
	}
	if s := c.Stream; s.Status != sweep.DefaultStreamStatus || s.MaxChars != sweep.DefaultStreamMaxChars || s.FailedText != "" {
		t.Fatalf("[stream] defaults %+v", s)
	}
}

// A stream row is performed from Slack's stored request (its agent gets the
// envelope, and assistant_thread_started names its thread only there), and
// is signed when the daemon signs forwards.
func TestStreamRouteRowCarriesTheRequest(t *testing.T) {
	cfg := configFor(t, "[[route]]\nname = \"agent\"\nevent = \"assistant_thread_started\"\neffect = \"stream\"\nurl = \"http://127.0.0.1:9/agent\"\n")
	srv := startServer(t, cfg, daemon.Options{Secrets: config.Secrets{ForwardSecret: "fwd"}})
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "event_id": "EvAT1", "team_id": "T1",
		"event": map[string]any{"type": "assistant_thread_started", "event_ts": "1700000000.000200",
			"assistant_thread": map[string]any{"user_id": "U1", "channel_id": "D1", "thread_ts": "1700000000.000100"}}})
	if r := srv.postEvent(body); r.Status != 200 {
		t.Fatalf("status %d", r.Status)
	}
	var effect, payload, reqID string
	if err := srv.db().QueryRow(`SELECT effect, payload, request_id FROM outbox WHERE idempotency_key = 'EvAT1:agent'`).Scan(&effect, &payload, &reqID); err != nil {
		t.Fatal(err)
	}
	p, err := sweep.DecodePayload(payload)
	if err != nil || effect != "stream" || reqID != "EvAT1" || !p.Params.Signed || p.Params.URL != "http://127.0.0.1:9/agent" {
		t.Fatalf("row %s %q %+v %v", effect, reqID, p, err)
	}
}
