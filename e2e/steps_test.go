package e2e

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/internal/testreq"
)

// Workflow steps with the real binary: a SIGKILL while the handler works
// (and one after it answered, while Slack is being told) is followed by one
// completion after the restart; replicas on PostgreSQL and hand-run sweeps
// at once complete each execution once.

var stepKeyB64 = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))

// stepHandler is a team's step handler: it records each request (its
// Idempotency-Key), and answers with reply once release allows.
type stepHandler struct {
	srv   *httptest.Server
	reply string
	delay time.Duration

	mu      sync.Mutex
	keys    []string
	arrived chan string  // each request's key, as it arrives
	hold    atomic1Block // the first request waits here when set
}

// atomic1Block holds the first request until it is released or the client
// goes away.
type atomic1Block struct {
	on      bool
	release chan struct{}
	used    bool
}

func newStepHandler(t *testing.T, reply string) *stepHandler {
	t.Helper()
	h := &stepHandler{reply: reply, arrived: make(chan string, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		h.mu.Lock()
		h.keys = append(h.keys, key)
		hold := h.hold.on && !h.hold.used
		h.hold.used = h.hold.used || hold
		h.mu.Unlock()
		select {
		case h.arrived <- key:
		default: // nobody waits for it (a load test)
		}
		if hold {
			select {
			case <-h.hold.release:
			case <-r.Context().Done():
				return // the caller died: nothing was done
			}
		}
		if h.delay > 0 {
			time.Sleep(h.delay) // the handler's own work
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(h.reply))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *stepHandler) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.keys...)
}

func stepEvent(eventID, exec, token string) []byte {
	b, _ := json.Marshal(map[string]any{
		"token": "verif", "team_id": "T0E2E", "api_app_id": "A0E2E", "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(),
		"event": map[string]any{"type": "function_executed", "function_execution_id": exec, "bot_access_token": token,
			"function": map[string]any{"callback_id": "approve_request", "id": "Fn0E2E"}, "inputs": map[string]any{"n": 1},
			"workflow_execution_id": "Wf0E2E", "event_ts": "1700000000.000100"},
	})
	return b
}

func writeStepConfig(t *testing.T, path, addr, db, slackURL, handlerURL string) {
	t.Helper()
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval    = "100ms"
lease       = "3s"
backoff     = "100ms"
max_backoff = "10m"

[slack]
api_url = %q

[steps]
deadline = "5m"

[[route]]
name        = "approve"
event       = "function_executed"
callback_id = "approve_request"
effect      = "step"
url         = %q
timeout     = "2s"
`, addr, db, slackURL, handlerURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStepSIGKILL(t *testing.T) {
	for _, when := range []string{"while the handler works", "after the handler answered, while Slack is told"} {
		t.Run(when, func(t *testing.T) {
			t.Parallel()
			rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 32))
			dir := t.TempDir()
			api := fakeslack.New(t, "xoxb-e2e-steps")
			exec, token := "FxKILL"+strings.ToUpper(rand.Text()[:6]), "xwfp-e2e-"+strings.ToLower(rand.Text())
			api.AddExecution(exec, token)
			h := newStepHandler(t, `{"outputs":{"approver":"U0E2E"}}`)
			handlerWorks := when == "while the handler works"
			release := make(chan struct{})
			defer close(release)
			if handlerWorks {
				h.hold = atomic1Block{on: true, release: release}
			} else {
				api.Script("functions.completeSuccess", fakeslack.Response{Hold: release})
			}
			addr := freeAddr(t, rng)
			cfg := filepath.Join(dir, "ackd.toml")
			writeStepConfig(t, cfg, addr, filepath.Join(dir, "ackd.db"), api.URL(), h.srv.URL)
			r := newRig(t, ackdBin, dir, cfg, addr, map[string]string{"SLACK_SIGNING_SECRET": boltSecret, "ACKD_TOKEN_KEY": stepKeyB64})
			if err := r.start(); err != nil {
				t.Fatal(err)
			}
			if code, body, _ := slackSend(t, "http://"+addr+"/slack/events", "application/json", stepEvent("EvKILL1", exec, token), time.Now().Unix(), nil); code != 200 {
				t.Fatalf("ack %d %s", code, body)
			}
			select {
			case <-h.arrived:
			case <-time.After(20 * time.Second):
				t.Fatal("the handler was never asked")
			}
			if !handlerWorks {
				waitUntil(t, "Slack being told", 20*time.Second, func() bool { return len(api.CallsTo("functions.completeSuccess")) == 1 })
			}
			if err := r.kill("kill-inflight"); err != nil {
				t.Fatal(err)
			}
			if err := r.start(); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the step completed after the restart", 30*time.Second, func() bool {
				x, _ := api.Execution(exec)
				return x.Outcome != ""
			})
			x, _ := api.Execution(exec)
			if x.Outcome != "success" || x.Completes != 1 || string(x.Outputs) != `{"approver":"U0E2E"}` {
				t.Fatalf("execution %+v, want one completeSuccess", x)
			}
			reqs := h.requests()
			want := 2 // asked again with the same key: at least once
			if !handlerWorks {
				want = 1 // its reply was saved: only Slack is told again
			}
			if len(reqs) != want {
				t.Fatalf("handler asked %d times (%v), want %d", len(reqs), reqs, want)
			}
			for _, k := range reqs {
				if k != exec+":approve" {
					t.Errorf("Idempotency-Key %q", k)
				}
			}
		})
	}
}

// TestStepReplicas: three deliveries of each execution spread over two
// replicas on one PostgreSQL, with `ackd sweep --once` run by hand beside
// them all along: one completion per execution, the handler asked once.
func TestStepReplicas(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 33))
	dir := t.TempDir()
	db := pgtest.URL(t)
	api := fakeslack.New(t, "xoxb-e2e-steps")
	h := newStepHandler(t, `{"outputs":{"ok":true}}`)
	h.delay = 200 * time.Millisecond // long enough for the sweeps to meet on a row
	secrets := map[string]string{"SLACK_SIGNING_SECRET": boltSecret, "ACKD_TOKEN_KEY": stepKeyB64}
	var rigs []*rig
	var urls []string
	for i := range 2 {
		addr := freeAddr(t, rng)
		cfg := filepath.Join(dir, fmt.Sprintf("ackd-%d.toml", i))
		writeStepConfig(t, cfg, addr, db, api.URL(), h.srv.URL)
		r := newRig(t, ackdBin, dir, cfg, addr, secrets)
		r.prefix = fmt.Sprintf("r%d-", i)
		rigs = append(rigs, r)
		urls = append(urls, "http://"+addr+"/slack/events")
	}
	for _, r := range rigs {
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	stop := rigs[0].sweepInBackground(7)
	const n = 8
	execs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		exec, token := fmt.Sprintf("FxREP%02d", i), "xwfp-rep-"+strings.ToLower(rand.Text())
		execs[i] = exec
		api.AddExecution(exec, token)
		body := stepEvent(fmt.Sprintf("EvREP%02d", i), exec, token)
		for d := range 3 {
			wg.Go(func() {
				code, resp, _ := slackSend(t, urls[d%2], "application/json", body, time.Now().Unix(), nil)
				if code != 200 {
					t.Errorf("delivery %d of %s: %d %s", d, exec, code, resp)
				}
			})
		}
	}
	wg.Wait()
	waitUntil(t, "every execution completed", 60*time.Second, func() bool {
		for _, e := range execs {
			if x, _ := api.Execution(e); x.Outcome == "" {
				return false
			}
		}
		return true
	})
	res := stop()
	if len(res.failures) > 0 {
		t.Errorf("sweep --once failed: %+v", res.failures)
	}
	asked := map[string]int{}
	for _, k := range h.requests() {
		asked[k]++
	}
	for _, e := range execs {
		x, _ := api.Execution(e)
		if x.Completes != 1 || x.Outcome != "success" {
			t.Errorf("%s: %+v", e, x)
		}
		if asked[e+":approve"] != 1 {
			t.Errorf("%s: handler asked %d times", e, asked[e+":approve"])
		}
	}
	if got := pgtest.Count(t, db, `SELECT count(*) FROM outbox WHERE effect = 'step'`); got != n {
		t.Errorf("%d step rows, want %d", got, n)
	}
	t.Logf("sweep --once ran %d times beside the replicas", res.runs)
}

// TestStepAckWindow loads a daemon with function_executed (and, for
// comparison, message) events and checks what is not timing: every answer
// is a 200 or a 500 (an ack budget missed on a loaded machine is a 500,
// never a wrong answer), every event answered 200 has its receipt and
// rows (ackd bench's database check), and each recorded execution has
// exactly one step row and one deadline row. The load is a closed loop of
// two senders, each waiting for its answer, so it is what this machine can
// take, not a fixed rate: on a busy 2-core box the test sends less, and
// still passes. The latencies are only logged (-v); the figures in
// docs/howto/workflow-steps.md come from `ackd bench --rate 100` on an
// idle machine.
func TestStepAckWindow(t *testing.T) {
	testreq.Short(t, "loads a daemon for 2×4 s")
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 34))
	api := fakeslack.New(t, "xoxb-e2e-steps")
	h := newStepHandler(t, `{"outputs":{"ok":true}}`)
	for _, kind := range []string{"message", "function_executed"} {
		dir := t.TempDir()
		addr := freeAddr(t, rng)
		db := filepath.Join(dir, "ackd.db")
		cfg := filepath.Join(dir, "ackd.toml")
		writeStepConfig(t, cfg, addr, db, api.URL(), h.srv.URL)
		b, _ := os.ReadFile(cfg)
		b = bytes.Replace(b, []byte(`callback_id = "approve_request"`), []byte(`callback_id = "bench_step"`), 1)
		b = bytes.Replace(b, []byte(`lease       = "3s"`), []byte(`lease       = "1m"`), 1)
		b = append(b, "\n[[route]]\nname = \"log-messages\"\nevent = \"message\"\neffect = \"log\"\n"...)
		if err := os.WriteFile(cfg, b, 0o600); err != nil {
			t.Fatal(err)
		}
		secrets := map[string]string{"SLACK_SIGNING_SECRET": boltSecret, "ACKD_TOKEN_KEY": stepKeyB64}
		r := newRig(t, ackdBin, dir, cfg, addr, secrets)
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
		// Exit status 1 when an acked event lacks its receipt or rows.
		cmd := exec.Command(ackdBin, "bench", "--kind", kind, "--concurrency", "2", "--duration", "4s", "--json",
			"--url", "http://"+addr+"/slack/events", "--db", db)
		cmd.Env = append(r.env, "SLACK_SIGNING_SECRET="+boltSecret)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s bench: %v\n%s", kind, err, out)
		}
		var res struct {
			Sent   int            `json:"sent"`
			Status map[string]int `json:"status_counts"`
			Errors int            `json:"errors"`
			P50    float64        `json:"p50_ms"`
			P99    float64        `json:"p99_ms"`
			Max    float64        `json:"max_ms"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for code, n := range res.Status {
			if code != "200" && code != "500" {
				t.Errorf("%s: %d answers %s (want only 200, or 500 for a missed ack budget): %v", kind, n, code, res.Status)
			}
		}
		if res.Status["200"] == 0 {
			t.Errorf("%s: answers %v: not one event acked, the test proved nothing", kind, res.Status)
		}
		t.Logf("%s: %d events, closed loop of 2: answers %v, %d transport errors; ack p50 %.1f ms, p99 %.1f ms, max %.1f ms (not asserted)",
			kind, res.Sent, res.Status, res.Errors, res.P50, res.P99, res.Max)
		if err := r.stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		// One row per route and event, and per execution its one deadline
		// row: every receipt recorded (a 500 may have committed too) has
		// exactly its rows.
		rows := map[string]int{}
		dbh, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		var receipts int
		if err := dbh.QueryRow(`SELECT count(*) FROM slack_event_receipts`).Scan(&receipts); err != nil {
			t.Fatal(err)
		}
		q, err := dbh.Query(`SELECT effect, count(*) FROM outbox GROUP BY effect`)
		if err != nil {
			t.Fatal(err)
		}
		for q.Next() {
			var effect string
			var n int
			if err := q.Scan(&effect, &n); err != nil {
				t.Fatal(err)
			}
			rows[effect] = n
		}
		q.Close()
		dbh.Close()
		want := map[string]int{"log": receipts}
		if kind == "function_executed" {
			want = map[string]int{"step": receipts, "step_deadline": receipts}
		}
		if fmt.Sprint(rows) != fmt.Sprint(want) || receipts < res.Status["200"] {
			t.Errorf("%s: %d receipts (%d acked), rows by effect %v, want %v", kind, receipts, res.Status["200"], rows, want)
		}
	}
	t.Logf("handler asked %d times", len(h.requests()))
}
