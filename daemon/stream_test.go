package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/sweep"
)

// Issue 33 through the daemon: Slack's deliveries of one mention become one
// answer, and the ack never waits for the agent.

// streamAgent answers NDJSON; while hold is open (not nil, not closed) it
// holds every request before answering.
type streamAgent struct {
	*httptest.Server
	mu    sync.Mutex
	keys  []string
	hold  chan struct{}
	asked chan struct{}
}

func newStreamAgent(t *testing.T, hold bool, lines ...string) *streamAgent {
	a := &streamAgent{asked: make(chan struct{}, 16)}
	if hold {
		a.hold = make(chan struct{})
	}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.keys = append(a.keys, r.Header.Get(sweep.HeaderIdempotencyKey)+"#"+r.Header.Get(sweep.HeaderAttempt))
		a.mu.Unlock()
		a.asked <- struct{}{}
		if a.hold != nil {
			select {
			case <-a.hold:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, l := range lines {
			fmt.Fprintf(w, "{\"text\":%q}\n", l)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *streamAgent) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.keys...)
}

func streamDaemonConfig(t *testing.T, slackURL, agentURL string) config.Config {
	return configFor(t, fmt.Sprintf(`
[sweep]
interval = "100ms"

[slack]
api_url = %q

[[route]]
name   = "agent"
events = ["app_mention", "message"]
key    = "message"
effect = "stream"
url    = %q
`, slackURL, agentURL))
}

// botReplies counts the bot's messages in the thread of ts.
func botReplies(s *fakeslack.Server, ch, ts string) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range s.Messages(ch) {
		if m.BotID != "" && m.ThreadTS == ts && m.TS != ts {
			out = append(out, m)
		}
	}
	return out
}

func TestStreamAckDoesNotWaitForTheAgent(t *testing.T) {
	t.Parallel()
	slack := fakeslack.New(t, "xoxb-stream")
	agent := newStreamAgent(t, true, "an answer")
	srv := startServer(t, streamDaemonConfig(t, slack.URL(), agent.URL), daemon.Options{Secrets: config.Secrets{BotToken: "xoxb-stream"}})

	// The first mention's agent is asked and holds; the next mentions are
	// answered by Slack's clock while it still holds.
	if r := srv.postEvent(eventBody("EvA0", mention("C1", "1700000000.000100", "<@UBOT> one"))); r.Status != http.StatusOK {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	<-agent.asked
	var slowest time.Duration
	for i := 1; i <= 3; i++ {
		start := time.Now()
		r := srv.postEvent(eventBody(fmt.Sprintf("EvA%d", i), mention("C1", fmt.Sprintf("1700000000.00010%d", i), "<@UBOT> more")))
		took := time.Since(start)
		if r.Status != http.StatusOK {
			t.Fatalf("mention %d while the agent holds: %d %s", i, r.Status, r.Body)
		}
		slowest = max(slowest, took)
	}
	select {
	case <-agent.hold:
		t.Fatal("the agent was released before the acks")
	default:
	}
	t.Logf("slowest ack while the agent held its answer: %s (budget %s)", slowest, config.Default().Ack.Budget.Duration)
	close(agent.hold)
	waitFor(t, "four answers", 20*time.Second, func() bool {
		return srv.count(`SELECT count(*) FROM outbox WHERE status = 'done'`) == 4
	})
	for i := range 4 {
		if n := len(botReplies(slack, "C1", fmt.Sprintf("1700000000.00010%d", i))); n != 1 {
			t.Fatalf("mention %d has %d answers", i, n)
		}
	}
}

// Three concurrent deliveries of one mention, its message event, and
// Slack's retry of it an hour later (after pruning) make one answer: one
// agent call, one message.
func TestStreamOneAnswerPerMention(t *testing.T) {
	t.Parallel()
	slack := fakeslack.New(t, "xoxb-stream")
	agent := newStreamAgent(t, false, "the ", "answer")
	clock := &metricsClock{t: time.UnixMilli(time.Now().UnixMilli())}
	srv := startServer(t, streamDaemonConfig(t, slack.URL(), agent.URL),
		daemon.Options{Now: clock.Now, Secrets: config.Secrets{BotToken: "xoxb-stream"}})
	const ts = "1700000000.000100"
	body := eventBody("EvOne", mention("C1", ts, "<@UBOT> hi"))
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if r := srv.postEvent(body); r.Status != http.StatusOK {
				t.Errorf("delivery: %d %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	// The same message as a message event (a mention in a channel the app
	// reads): keyed by the message, the same row.
	if r := srv.postEvent(eventBody("EvOneMsg", message("C1", ts, "<@UBOT> hi"))); r.Status != http.StatusOK {
		t.Fatal(r.Status)
	}
	waitFor(t, "the answer", 20*time.Second, func() bool {
		return srv.count(`SELECT count(*) FROM outbox WHERE status = 'done'`) == 1
	})

	clock.Advance(time.Hour)
	if _, err := srv.Store().Prune(context.Background(), config.Default().Retention.Receipts.Duration, config.Default().Retention.Done.Duration, 0); err != nil {
		t.Fatal(err)
	}
	// Signed an hour later, on the daemon's clock.
	at := clock.Now().Unix()
	retry := http.Header{"X-Slack-Retry-Num": {"3"}, "X-Slack-Retry-Reason": {"http_timeout"},
		"X-Slack-Request-Timestamp": {strconv.FormatInt(at, 10)}, "X-Slack-Signature": {sign(testSecret, at, body)}}
	if r := srv.post("/slack/events", "application/json", body, retry); r.Status != http.StatusOK {
		t.Fatalf("retry an hour later: %d", r.Status)
	}
	srv.Trigger()
	if n := srv.count(`SELECT count(*) FROM outbox`); n != 1 {
		t.Fatalf("%d outbox rows, want the one", n)
	}
	if calls := agent.calls(); len(calls) != 1 || calls[0] != "C1:"+ts+":agent#1" {
		t.Fatalf("agent calls %v, want one", calls)
	}
	msgs := botReplies(slack, "C1", ts)
	if len(msgs) != 1 || msgs[0].Text != "the answer" {
		t.Fatalf("thread %+v, want one answer", msgs)
	}
}
