package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/sweep"
)

// Issue 33 with the real binary: agent replies survive a SIGKILL mid-answer,
// and two replicas and a hand-run sweep answer once.

const procStreamToken = "xoxb-proc-stream"

// procAgent is a team's agent on 127.0.0.1: each request gets the next of
// its answers (the last again when they run out); it records the key and
// attempt of each.
type procAgent struct {
	*httptest.Server
	mu      sync.Mutex
	asked   []string // "key#attempt"
	answers []func(w http.ResponseWriter, r *http.Request)
}

func procNewAgent(tb testing.TB, answers ...func(w http.ResponseWriter, r *http.Request)) *procAgent {
	a := &procAgent{answers: answers}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		n := len(a.asked)
		a.asked = append(a.asked, r.Header.Get(sweep.HeaderIdempotencyKey)+"#"+r.Header.Get(sweep.HeaderAttempt))
		h := a.answers[min(n, len(a.answers)-1)]
		a.mu.Unlock()
		h(w, r)
	}))
	tb.Cleanup(a.Close)
	return a
}

func (a *procAgent) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// procNDJSON streams words, gap apart, then ends (or, with hang, holds the
// connection until the client goes).
func procNDJSON(gap time.Duration, hang bool, words ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		for _, word := range words {
			b, _ := json.Marshal(map[string]string{"text": word})
			fmt.Fprintf(w, "%s\n", b)
			w.(http.Flusher).Flush()
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
		}
		if hang {
			<-r.Context().Done()
		}
	}
}

// procThread is the bot's messages in the thread of the mention procMention
// makes (C1, 1700000000.000100).
func procThread(s *fakeslack.Server) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range s.Messages("C1") {
		if m.BotID != "" && m.ThreadTS == "1700000000.000100" {
			out = append(out, m)
		}
	}
	return out
}

func procStreamConfig(tb testing.TB, dir, slackURL, agentURL, sweep string) string {
	return procWriteConfig(tb, dir, "ackd.toml", fmt.Sprintf(`
[sweep]
%s

[slack]
api_url = %q

[[route]]
name    = "agent"
event   = "app_mention"
effect  = "stream"
url     = %q
timeout = "3s"
`, sweep, slackURL, agentURL))
}

// procStreamStatus reads a row's status (SQLite or PostgreSQL).
func procStreamStatus(tb testing.TB, db, key string) string {
	tb.Helper()
	var status string
	if err := procOpenDB(tb, db).QueryRow(`SELECT status FROM outbox WHERE idempotency_key = $1`, key).Scan(&status); err != nil {
		return ""
	}
	return status
}

// procProgress reads a row's saved progress from the database.
func procProgress(tb testing.TB, db, key string) (text string, tss []string) {
	tb.Helper()
	h := procOpenDB(tb, db)
	var raw *string
	if err := h.QueryRow(`SELECT progress FROM outbox WHERE idempotency_key = $1`, key).Scan(&raw); err != nil || raw == nil {
		return "", nil
	}
	var p struct {
		Text string `json:"text"`
		Msgs []struct {
			TS string `json:"ts"`
		} `json:"msgs"`
	}
	if err := json.Unmarshal([]byte(*raw), &p); err != nil {
		tb.Fatalf("progress %q: %v", *raw, err)
	}
	for _, m := range p.Msgs {
		tss = append(tss, m.TS)
	}
	return p.Text, tss
}

// ackd is SIGKILLed while it streams an answer into Slack. The restarted
// daemon takes the row when the dead lease runs out, asks the agent again
// with the same Idempotency-Key, and shows the new answer in the message the
// dead one started: one message, the full answer.
func TestStreamSIGKILLMidAnswerFinishedAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	slack := fakeslack.New(t, procStreamToken)
	agent := procNewAgent(t,
		procNDJSON(50*time.Millisecond, true, "The ", "first ", "attempt ", "streams ", "slowly ", "and ", "never ", "ends"),
		procNDJSON(10*time.Millisecond, false, "The ", "answer, ", "asked ", "again."))
	cfg := procStreamConfig(t, dir, slack.URL(), agent.URL, "interval = \"200ms\"\nlease = \"4s\"\nbackoff = \"100ms\"\nmax_backoff = \"1s\"")
	env := procEnv("SLACK_BOT_TOKEN=" + procStreamToken)
	const key = "EvKill1:agent"

	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	d.mustPostEvent(procMention("EvKill1", "<@UBOT> tell me"))
	var started []string
	procWaitFor(t, "text streaming into a message the row has saved", 20*time.Second, func() bool {
		text, tss := procProgress(t, db, key)
		started = tss
		return len(tss) == 1 && strings.HasPrefix(text, "The first attempt") && len(procThread(slack)) == 1 &&
			strings.HasPrefix(procThread(slack)[0].Text, "The first")
	})
	d.kill() // mid-answer: the stream is open at Slack, the row leased by a dead process
	if !slack.Streaming("C1", started[0]) {
		t.Fatal("the message is not streaming at the kill")
	}

	d2 := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	procWaitFor(t, "the row done after the dead lease ran out", 30*time.Second, func() bool {
		return procStreamStatus(t, db, key) == "done"
	})
	metrics := procScrape(t, d2.URL)
	d2.stop()

	msgs := procThread(slack)
	if len(msgs) != 1 || msgs[0].TS != started[0] || msgs[0].Text != "The answer, asked again." {
		t.Fatalf("thread %+v, want the message %s with the second answer", msgs, started[0])
	}
	if got := slack.MessagesWithKey("C1", key); len(got) != 1 || slack.Streaming("C1", got[0].TS) {
		t.Fatalf("messages with the row's key %+v, want the one, ended", got)
	}
	// Asked again with the same key, under a new attempt number (issue 38:
	// X-Ackd-Attempt never repeats for a row; the dead attempt counts).
	if calls := agent.calls(); len(calls) != 2 || calls[0] != key+"#1" || calls[1] != key+"#2" {
		t.Fatalf("agent asked %v, want %s as attempts 1 and 2", calls, key)
	}
	if n := len(slack.CallsTo("chat.startStream")); n != 1 {
		t.Fatalf("%d streams started, want the one", n)
	}
	if !regexp.MustCompile(`(?m)^ackd_stream_recoveries_total 1$`).MatchString(metrics) {
		t.Fatalf("metrics lack recoveries=1:\n%s", procGrep(metrics, "ackd_stream"))
	}
	id, _, _ := procRowByKey(t, db, key)
	show := procMustRun(t, procEnv(), "outbox", "show", fmt.Sprint(id), "--db", db).Stdout
	if !strings.Contains(show, "recovered: an earlier attempt had started 1 message(s)") {
		t.Errorf("outbox show lacks the recovery note:\n%s", show)
	}
}

// The same with the first attempt rolled over into two messages (Slack
// ended its first stream) before the kill: the restarted daemon lays the
// new, shorter answer out over them in order, so it ends up in the first
// message, and deletes the second: one message, the full answer.
func TestStreamSIGKILLAfterRolloverFinishedInFirstMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	slack := fakeslack.New(t, procStreamToken)
	slack.SetStreamLifetime(400 * time.Millisecond)
	var words []string
	for i := range 60 {
		words = append(words, fmt.Sprintf("w%02d ", i))
	}
	agent := procNewAgent(t,
		procNDJSON(40*time.Millisecond, true, words...),
		procNDJSON(10*time.Millisecond, false, "A short ", "second answer."))
	cfg := procStreamConfig(t, dir, slack.URL(), agent.URL, "interval = \"200ms\"\nlease = \"4s\"\nbackoff = \"100ms\"\nmax_backoff = \"1s\"")
	env := procEnv("SLACK_BOT_TOKEN=" + procStreamToken)
	const key = "EvKill2:agent"

	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	d.mustPostEvent(procMention("EvKill2", "<@UBOT> tell me more"))
	var started []string
	procWaitFor(t, "the answer rolled over into a second message, saved", 20*time.Second, func() bool {
		_, started = procProgress(t, db, key)
		return len(started) == 2
	})
	d.kill()
	if len(procThread(slack)) != 2 {
		t.Fatalf("%d messages at the kill, want 2", len(procThread(slack)))
	}

	d2 := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	procWaitFor(t, "the row done after the dead lease ran out", 30*time.Second, func() bool {
		return procStreamStatus(t, db, key) == "done"
	})
	d2.stop()

	msgs := procThread(slack)
	if len(msgs) != 1 || msgs[0].TS != started[0] || msgs[0].Text != "A short second answer." {
		t.Fatalf("thread %+v, want the first message %s with the second answer", msgs, started[0])
	}
	if _, ok := slack.Message("C1", started[1]); ok {
		t.Fatalf("the second message %s is still there", started[1])
	}
	if calls := agent.calls(); len(calls) != 2 || calls[0] != key+"#1" || calls[1] != key+"#2" {
		t.Fatalf("agent asked %v, want twice with one key, as attempts 1 and 2", calls)
	}
}

// Two replicas on one PostgreSQL database and hand-run `ackd sweep --once`
// loops, all racing for the row while the agent streams slowly: the agent
// is asked once and the thread holds one answer.
func TestStreamReplicasAndSweepOncePostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.URL(t)
	dir := t.TempDir()
	slack := fakeslack.New(t, procStreamToken)
	words := []string{"one ", "answer ", "from ", "a ", "slow ", "agent"}
	agent := procNewAgent(t, procNDJSON(150*time.Millisecond, false, words...))
	cfg := procStreamConfig(t, dir, slack.URL(), agent.URL, "immediate = false\ninterval = \"50ms\"\nlease = \"10s\"")
	env := procEnv("SLACK_BOT_TOKEN=" + procStreamToken)
	const key = "EvRep1:agent"

	a := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	b := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var runs atomic.Int32
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				cmd := exec.Command(procBin, "sweep", "--once", "--config", cfg, "--db", db)
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("sweep --once: %v\n%s", err, out)
					return
				}
				runs.Add(1)
			}
		})
	}
	a.mustPostEvent(procMention("EvRep1", "<@UBOT> hi"))
	procWaitFor(t, "the answer", 30*time.Second, func() bool {
		return procStreamStatus(t, db, key) == "done"
	})
	close(stop)
	wg.Wait()
	a.stop()
	b.stop()
	if runs.Load() == 0 {
		t.Fatal("no hand-run sweep ran beside the replicas")
	}

	if calls := agent.calls(); len(calls) != 1 || calls[0] != key+"#1" {
		t.Fatalf("agent asked %v, want once", calls)
	}
	msgs := procThread(slack)
	if len(msgs) != 1 || msgs[0].Text != strings.Join(words, "") {
		t.Fatalf("thread %+v, want one answer", msgs)
	}
}

// Issue 33: the dashboard shows the stream series (TestMonitoringUsesExportedMetrics
// checks each is one a running ackd exports).
func TestStreamDashboardPanels(t *testing.T) {
	dashboard, _ := monitoringExprs(t)
	joined := strings.Join(dashboard, "\n")
	for _, want := range []string{"ackd_stream_messages_started_total", "ackd_stream_rollovers_total",
		"ackd_stream_recoveries_total", "ackd_stream_answers_cut_total", "by (reason)",
		"ackd_stream_first_text_seconds_bucket", "ackd_stream_append_seconds_bucket"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}
