package daemon_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
)

// The forward path end to end (DESIGN §5): a signed app_mention is acked,
// forwarded to the team's handler signed with ACKD_FORWARD_SECRET, and the
// handler's JSON reply is posted in the mention's thread by a follow-up row.

const fwdSecret = "fwd"

// fwdConfig routes app_mention to forward to handlerURL, with Slack's Web API
// at apiURL, a quick ticker and a short backoff.
func fwdConfig(handlerURL, apiURL string) string {
	return fmt.Sprintf(`
[slack]
api_url = %q

[sweep]
interval    = "100ms"
backoff     = "50ms"
max_backoff = "100ms"

[[route]]
name    = "mention-to-app"
event   = "app_mention"
effect  = "forward"
url     = %q
timeout = "5s"
`, apiURL, handlerURL)
}

// fwdVerify checks a forward request's signature the way a team's handler
// would: HMAC-SHA256 under the forward secret over v0:{timestamp}:{body}.
func fwdVerify(tb testing.TB, p fakeslack.Post) {
	tb.Helper()
	ts := p.Header.Get("X-Ackd-Timestamp")
	sent, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		tb.Fatalf("X-Ackd-Timestamp %q is not unix seconds", ts)
	}
	if d := time.Since(time.Unix(sent, 0)); d < -time.Minute || d > 5*time.Minute {
		tb.Errorf("X-Ackd-Timestamp %s is %s away from now", ts, d)
	}
	mac := hmac.New(sha256.New, []byte(fwdSecret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(p.Body)
	want := "v0=" + hex.EncodeToString(mac.Sum(nil))
	if got := p.Header.Get("X-Ackd-Signature"); !hmac.Equal([]byte(got), []byte(want)) {
		tb.Errorf("X-Ackd-Signature = %q, want %q", got, want)
	}
}

func TestForwardEndToEnd(t *testing.T) {
	t.Parallel()
	opts := daemon.Options{Secrets: config.Secrets{BotToken: "xoxb-test", ForwardSecret: fwdSecret}}

	t.Run("mention is forwarded signed and the reply is posted once in its thread", func(t *testing.T) {
		fake := fakeslack.New(t, "xoxb-test")
		handler := fakeslack.NewHook(t)
		handler.Script(fakeslack.Response{Body: `{"text":"hi back"}`})
		s := startServer(t, configFor(t, fwdConfig(handler.URL(), fake.URL())), opts)

		body := eventBody("Ev0FWD0001", mention("C0LAN2Q65", "1515449522.000016", "<@U0LAN0Z89> hello"))
		if r := s.postEvent(body); r.Status != http.StatusOK {
			t.Fatalf("status %d %q", r.Status, r.Body)
		}

		reply := cmdWaitDone(t, s, "Ev0FWD0001:mention-to-app:reply")
		if reply.Effect != "post" {
			t.Errorf("follow-up effect = %q, want post", reply.Effect)
		}

		posts := handler.Posts()
		if len(posts) != 1 {
			t.Fatalf("handler got %d requests, want 1", len(posts))
		}
		fwd := posts[0]
		fwdVerify(t, fwd)
		if got := fwd.Header.Get("Idempotency-Key"); got != "Ev0FWD0001:mention-to-app" {
			t.Errorf("Idempotency-Key = %q, want {event_id}:{route} = Ev0FWD0001:mention-to-app", got)
		}
		if got := fwd.Header.Get("X-Ackd-Attempt"); got != "1" {
			t.Errorf("X-Ackd-Attempt = %q, want 1", got)
		}
		var fb struct {
			Envelope map[string]any `json:"envelope"`
		}
		fwd.JSON(t, &fb)
		var env map[string]any
		_ = json.Unmarshal(body, &env)
		if !reflect.DeepEqual(fb.Envelope, env) {
			t.Errorf("forwarded envelope is not the event envelope:\n got %v\nwant %v", fb.Envelope, env)
		}

		calls := fake.CallsTo("chat.postMessage")
		if len(calls) != 1 {
			t.Fatalf("chat.postMessage calls = %d, want exactly 1", len(calls))
		}
		p := calls[0].Params
		if p.Get("channel") != "C0LAN2Q65" || p.Get("thread_ts") != "1515449522.000016" || p.Get("text") != "hi back" {
			t.Errorf("chat.postMessage channel=%q thread_ts=%q text=%q, want C0LAN2Q65, 1515449522.000016, hi back",
				p.Get("channel"), p.Get("thread_ts"), p.Get("text"))
		}
		if calls[0].Token != "xoxb-test" {
			t.Errorf("posted with token %q, want the bot token", calls[0].Token)
		}

		var res struct{ Channel, TS string }
		if err := json.Unmarshal([]byte(reply.Result), &res); err != nil {
			t.Fatalf("follow-up result %q: %v", reply.Result, err)
		}
		if res.Channel != "C0LAN2Q65" || res.TS == "" {
			t.Errorf("follow-up result = %s, want the posted message's channel and ts", reply.Result)
		}
		if n := len(fake.Calls()); n != 1 {
			t.Errorf("fake Slack got %d calls in all, want 1", n)
		}
	})

	t.Run("handler answering 500 then 200 is done on attempt 2", func(t *testing.T) {
		fake := fakeslack.New(t, "xoxb-test")
		handler := fakeslack.NewHook(t)
		handler.Script(fakeslack.Status(http.StatusInternalServerError))
		s := startServer(t, configFor(t, fwdConfig(handler.URL(), fake.URL())), opts)

		if r := s.postEvent(eventBody("Ev0FWD0002", mention("C0LAN2Q65", "1515449523.000017", "<@U0LAN0Z89> again"))); r.Status != http.StatusOK {
			t.Fatalf("status %d %q", r.Status, r.Body)
		}
		cmdWaitDone(t, s, "Ev0FWD0002:mention-to-app")
		posts := handler.Posts()
		if len(posts) != 2 {
			t.Fatalf("handler got %d requests, want 2 (a 500, then a 200)", len(posts))
		}
		for i, p := range posts {
			if got, want := p.Header.Get("X-Ackd-Attempt"), strconv.Itoa(i+1); got != want {
				t.Errorf("request %d: X-Ackd-Attempt = %q, want %q", i+1, got, want)
			}
			if got := p.Header.Get("Idempotency-Key"); got != "Ev0FWD0002:mention-to-app" {
				t.Errorf("request %d: Idempotency-Key = %q, want the same key on every attempt", i+1, got)
			}
			fwdVerify(t, p)
		}
		// The default 200 {"ok":true} asks for nothing: no follow-up, no post.
		if _, ob := s.rows(); ob != 1 {
			t.Errorf("outbox rows = %d, want 1 (no follow-up for a reply without text)", ob)
		}
		if n := len(fake.Calls()); n != 0 {
			t.Errorf("fake Slack got %d calls, want 0", n)
		}
	})
}
