package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", to read a replica's database

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
)

// A user's Stop with the real binary (issue 39): the agent_session_stopped
// event, signed and delivered as Slack does, cancels the answer being
// streamed; without the event, chat.appendStream's stopped_by_user does the
// same; a SIGKILL mid-answer leaves the session processing until the
// restarted daemon finishes the answer and sets it active.

const (
	stopToken   = "xoxb-e2e-stop"
	stopChannel = "C0STOP"
	stopThread  = "1700000000.000100"
)

// stopAgent is a team's agent: the first request is answered one word at
// a time until ackd closes it (closed is then closed); later ones get a
// short whole answer.
type stopAgent struct {
	srv    *httptest.Server
	closed chan struct{}

	mu    sync.Mutex
	calls int
	once  sync.Once
}

func newStopAgent(t *testing.T) *stopAgent {
	a := &stopAgent{closed: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.calls++
		n := a.calls
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		if n > 1 {
			fmt.Fprintln(w, `{"text":"The whole answer."}`)
			return
		}
		defer a.once.Do(func() { close(a.closed) })
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(w, "{\"text\":\"word%d \"}\n", i); err != nil {
				return
			}
			fl.Flush()
			select {
			case <-time.After(100 * time.Millisecond):
			case <-r.Context().Done():
				return
			}
		}
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func writeStopConfig(t *testing.T, path, addr, db, slackURL, agentURL string) {
	t.Helper()
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval = "100ms"
lease    = "4s"
backoff  = "100ms"

[slack]
api_url = %q

[[route]]
name    = "agent"
event   = "app_mention"
effect  = "stream"
url     = %q
timeout = "3s"
`, addr, db, slackURL, agentURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// stopRig is one daemon, its fake Slack and agent.
type stopRig struct {
	r     *rig
	api   *fakeslack.Server
	agent *stopAgent
	url   string
	db    string
}

func newStopRig(t *testing.T, seed uint64) *stopRig {
	dir := t.TempDir()
	return newStopRigOn(t, seed, dir, filepath.Join(dir, "ackd.db"), fakeslack.New(t, stopToken), newStopAgent(t))
}

// newStopRigOn is a daemon on db (a PostgreSQL URL: a replica) with the
// given Slack and agent.
func newStopRigOn(t *testing.T, seed uint64, dir, db string, api *fakeslack.Server, agent *stopAgent) *stopRig {
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), seed))
	s := &stopRig{api: api, agent: agent, db: db}
	addr := freeAddr(t, rng)
	cfg := filepath.Join(dir, fmt.Sprintf("ackd-%d.toml", seed))
	writeStopConfig(t, cfg, addr, s.db, s.api.URL(), s.agent.srv.URL)
	s.r = newRig(t, ackdBin, dir, cfg, addr, map[string]string{"SLACK_SIGNING_SECRET": boltSecret, "SLACK_BOT_TOKEN": stopToken})
	s.r.prefix = fmt.Sprintf("r%d-", seed)
	s.url = "http://" + addr + "/slack/events"
	if err := s.r.start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *stopRig) send(t *testing.T, body map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	if code, resp, _ := slackSend(t, s.url, "application/json", b, time.Now().Unix(), nil); code != 200 {
		t.Fatalf("ack %d %s", code, resp)
	}
}

func (s *stopRig) ask(t *testing.T) {
	t.Helper()
	s.send(t, map[string]any{"type": "event_callback", "event_id": "EvAsk", "team_id": "T0E2E", "api_app_id": "A0E2E",
		"event_time": time.Now().Unix(), "event": map[string]any{"type": "app_mention", "user": "U0E2E", "text": "<@U0FAKEBOT> explain",
			"channel": stopChannel, "ts": stopThread, "event_ts": stopThread}})
	waitUntil(t, "text in the thread", 20*time.Second, func() bool { return len(s.api.CallsTo("chat.appendStream")) >= 2 })
}

// row is the stream row's status and note.
func (s *stopRig) row(t *testing.T) (status, note string) {
	t.Helper()
	driver, dsn := "sqlite", "file:"+s.db+"?mode=ro&_pragma=busy_timeout(10000)"
	if strings.HasPrefix(s.db, "postgres") {
		driver, dsn = "pgx", s.db
	}
	h, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var n sql.NullString
	if err := h.QueryRow(`SELECT status, note FROM outbox WHERE effect = 'stream'`).Scan(&status, &n); err != nil {
		t.Fatal(err)
	}
	return status, n.String
}

func (s *stopRig) stoppedOnce(t *testing.T, why string) {
	t.Helper()
	select {
	case <-s.agent.closed:
	case <-time.After(15 * time.Second):
		t.Fatal("the agent's request was not closed")
	}
	waitUntil(t, "the row done", 20*time.Second, func() bool { st, _ := s.row(t); return st == "done" })
	if _, note := s.row(t); note != "stopped by the user ("+why+")" && (why != "" || !strings.HasPrefix(note, "stopped by the user (")) {
		t.Fatalf("note %q", note)
	}
	var bot int
	for _, m := range s.api.Messages(stopChannel) {
		if m.BotID != "" {
			bot++
		}
	}
	if bot != 1 || len(s.api.CallsTo("chat.startStream")) != 1 || len(s.api.CallsTo("chat.postMessage")) != 0 {
		t.Fatalf("%d bot messages, %d starts, %d posts; want one message", bot, len(s.api.CallsTo("chat.startStream")), len(s.api.CallsTo("chat.postMessage")))
	}
	waitUntil(t, "the session active", 10*time.Second, func() bool { return s.api.SessionStatus(stopChannel, stopThread) == "active" })
	s.agent.mu.Lock()
	asked := s.agent.calls
	s.agent.mu.Unlock()
	if asked != 1 {
		t.Fatalf("the agent was asked %d times", asked)
	}
}

func TestStopE2E(t *testing.T) {
	t.Run("with the event", func(t *testing.T) {
		t.Parallel()
		s := newStopRig(t, 39)
		s.ask(t)
		ev := s.api.StopByUser(stopChannel, stopThread, "U0E2E")
		s.send(t, fakeslack.StoppedEnvelope("EvStopE2E", "T0E2E", ev))
		s.send(t, fakeslack.StoppedEnvelope("EvStopE2E", "T0E2E", ev)) // Slack's retry: a duplicate
		s.stoppedOnce(t, "agent_session_stopped")
		t.Logf("the thread's Web API calls, in order, for a stopped answer (real binary):\n\t%s",
			strings.Join(s.api.ThreadCalls(stopChannel, stopThread), "\n\t"))
	})
	t.Run("without the event", func(t *testing.T) {
		t.Parallel()
		s := newStopRig(t, 40)
		s.ask(t)
		s.api.StopByUser(stopChannel, stopThread, "U0E2E")
		s.stoppedOnce(t, "chat.appendStream answered stopped_by_user")
	})
	t.Run("SIGKILL mid-answer, then the session set active", func(t *testing.T) {
		t.Parallel()
		s := newStopRig(t, 41)
		s.ask(t)
		if err := s.r.kill("kill-mid-answer"); err != nil {
			t.Fatal(err)
		}
		if st := s.api.SessionStatus(stopChannel, stopThread); st != "processing" {
			t.Fatalf("session %q after the kill", st)
		}
		if err := s.r.start(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the row done", 30*time.Second, func() bool { st, _ := s.row(t); return st == "done" })
		if st := s.api.SessionStatus(stopChannel, stopThread); st != "active" {
			t.Fatalf("session %q after the restart finished the answer", st)
		}
		var texts []string
		for _, m := range s.api.Messages(stopChannel) {
			if m.BotID != "" {
				texts = append(texts, m.Text)
			}
		}
		if len(texts) != 1 || texts[0] != "The whole answer." {
			t.Fatalf("the thread shows %q", texts)
		}
	})
}

// Stop with two replicas on PostgreSQL, real processes: the question
// reaches replica 0, the stop replica 1. Whichever streams the answer
// closes the agent's request and ends the row done; one message.
func TestStopE2EReplicasPostgres(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()
	dir, db := t.TempDir(), pgtest.URL(t)
	api, agent := fakeslack.New(t, stopToken), newStopAgent(t)
	r0 := newStopRigOn(t, 50, dir, db, api, agent)
	r1 := newStopRigOn(t, 51, dir, db, api, agent)
	r0.ask(t)
	ev := api.StopByUser(stopChannel, stopThread, "U0E2E")
	r1.send(t, fakeslack.StoppedEnvelope("EvStopRep", "T0E2E", ev))
	// Heard from the stop (in-process or from the database) or from
	// chat.appendStream's stopped_by_user, whichever comes first.
	r0.stoppedOnce(t, "")
	t.Logf("the thread's Web API calls, in order (two replicas):\n\t%s",
		strings.Join(api.ThreadCalls(stopChannel, stopThread), "\n\t"))
}
