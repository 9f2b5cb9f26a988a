package e2e

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/ackd/ackd/internal/testreq"
)

// The real @slack/bolt behind ackd: an unmodified Bolt app (e2e/testdata/
// boltapp.js, on examples/bolt's pinned node_modules) gets Slack's requests
// re-delivered by `effect = "redeliver"`, with HTTPReceiver and with
// ExpressReceiver. ackd is the real binary, SIGKILLed where the contract
// says so; the test plays Slack (signed requests, a response_url).

const boltSecret = "e2e-bolt-signing-secret"

// boltDir is examples/bolt, or $ACKD_TEST_BOLT_DIR (.ci/with-node.sh).
func boltDir() string {
	if d := os.Getenv("ACKD_TEST_BOLT_DIR"); d != "" {
		return d
	}
	d, _ := filepath.Abs("../examples/bolt")
	return d
}

func TestBolt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node and ackd processes")
	}
	dir := boltDir()
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@slack", "bolt", "package.json"))
	testreq.Need(t, nodeErr == nil && modErr == nil,
		"node ≥ 20 and the Bolt app's modules (cd examples/bolt && npm ci --prefer-offline)")
	// The example app docs/howto/bolt.md points at must at least parse.
	if out, err := exec.Command("node", "--check", filepath.Join(dir, "app.js")).CombinedOutput(); err != nil {
		t.Errorf("examples/bolt/app.js: %v\n%s", err, out)
	}
	for _, receiver := range []string{"http", "express"} {
		t.Run(receiver, func(t *testing.T) { runBolt(t, dir, receiver) })
	}
}

// boltRecord is one line a listener of boltapp.js wrote.
type boltRecord struct {
	Kind        string  `json:"kind"`
	ID          string  `json:"id"`
	Key         *string `json:"key"`
	Attempt     *string `json:"attempt"`
	TS          *string `json:"ts"`
	RetryNum    any     `json:"retryNum"`
	RetryReason any     `json:"retryReason"`
	RetryHeader any     `json:"retryHeader"`
	Text        string  `json:"text"`
}

type boltApp struct {
	url    string // http://127.0.0.1:port/slack/events
	record string
	cmd    *exec.Cmd
}

// startBoltApp runs boltapp.js under node and waits for it to listen.
func startBoltApp(t *testing.T, modules, dir, receiver, port string) *boltApp {
	t.Helper()
	app := &boltApp{url: "http://127.0.0.1:" + port + "/slack/events", record: filepath.Join(dir, "bolt-"+receiver+".jsonl")}
	if err := os.WriteFile(app.record, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("testdata/boltapp.js")
	logf, err := os.Create(filepath.Join(dir, "bolt-"+receiver+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(modules, "node_modules"), "BOLT_RECEIVER="+receiver,
		"PORT="+port, "SLACK_SIGNING_SECRET="+boltSecret, "RECORD="+app.record)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	app.cmd = cmd
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if sc.Text() == "ready" {
				ready <- nil
				io.Copy(logf, stdout)
				return
			}
		}
		ready <- fmt.Errorf("node exited before it was ready")
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("bolt app: %v\n%s", err, tail(logf.Name(), 30))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("bolt app not ready after 60s\n%s", tail(logf.Name(), 30))
	}
	return app
}

func (a *boltApp) records(t *testing.T) []boltRecord {
	t.Helper()
	b, err := os.ReadFile(a.record)
	if err != nil {
		t.Fatal(err)
	}
	var out []boltRecord
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r boltRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("record line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// of returns the records of kind for id.
func (a *boltApp) of(t *testing.T, kind, id string) []boltRecord {
	var out []boltRecord
	for _, r := range a.records(t) {
		if r.Kind == kind && r.ID == id {
			out = append(out, r)
		}
	}
	return out
}

// hook plays a response_url: it records each POST by path.
type hook struct {
	srv   *httptest.Server
	mu    sync.Mutex
	posts map[string][]string
}

func newHook(t *testing.T) *hook {
	h := &hook{posts: map[string][]string{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.posts[r.URL.Path] = append(h.posts[r.URL.Path], string(b))
		h.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) got(path string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.posts[path]...)
}

func writeBoltConfig(t *testing.T, path, addr, db, appURL string, deliver bool) {
	t.Helper()
	interval, immediate := "200ms", "true"
	if !deliver {
		interval, immediate = "1h", "false" // acks, and performs nothing
	}
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval     = %q
immediate    = %s
batch        = 4
workers      = 4
lease        = "6s"
max_attempts = 3
backoff      = "100ms"
max_backoff  = "200ms"

[[route]]
name    = "events"
event   = "*"
effect  = "redeliver"
url     = %[5]q
timeout = "5s"

[[route]]
name    = "commands"
command = "*"
effect  = "redeliver"
url     = %[5]q
timeout = "5s"

[[route]]
name        = "interactions"
callback_id = "*"
effect      = "redeliver"
url         = %[5]q
timeout     = "5s"
`, addr, db, interval, immediate, appURL)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// slackSend POSTs body to ackd as Slack would, signed at ts.
func slackSend(t *testing.T, u, ctype string, body []byte, ts int64, extra http.Header) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, []byte(boltSecret))
	fmt.Fprintf(m, "v0:%d:", ts)
	m.Write(body)
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Content-Type")
}

func mentionBody(eventID, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"token": "verif", "team_id": "T0E2E", "api_app_id": "A0E2E", "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(),
		"event": map[string]any{"type": "app_mention", "user": "U0HUMAN", "text": text,
			"ts": "1700000000.000100", "channel": "C0E2E", "event_ts": "1700000000.000100"},
	})
	return b
}

func interactionBody(payload map[string]any) []byte {
	b, _ := json.Marshal(payload)
	return []byte("payload=" + url.QueryEscape(string(b)))
}

func waitUntil(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func runBolt(t *testing.T, modules, receiver string) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 12))
	_, appPort, _ := strings.Cut(freeAddr(t, rng), ":")
	app := startBoltApp(t, modules, dir, receiver, appPort)
	addr := freeAddr(t, rng)
	db := filepath.Join(dir, "ackd.db")
	cfgPath := filepath.Join(dir, "ackd.toml")
	r := newRig(t, ackdBin, dir, cfgPath, addr, map[string]string{"SLACK_SIGNING_SECRET": boltSecret})
	events, commands, ix := "http://"+addr+"/slack/events", "http://"+addr+"/slack/commands", "http://"+addr+"/slack/interactivity"
	dbh, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer dbh.Close()
	rowStatus := func(key string) (status string, attempts int) {
		_ = dbh.QueryRow(`SELECT status, attempts FROM outbox WHERE idempotency_key = ?`, key).Scan(&status, &attempts)
		return
	}
	defer func() {
		if t.Failed() {
			for _, l := range r.logs() {
				t.Logf("%s:\n%s", filepath.Base(l), tail(l, 25))
			}
			t.Logf("bolt records:\n%s", tail(app.record, 40))
		}
	}()

	// An event acked, ackd SIGKILLed before it delivered anything, and
	// delivered after a restart when Slack's own signature is more than
	// five minutes old: Bolt accepts it because ackd signs it afresh.
	writeBoltConfig(t, cfgPath, addr, db, app.url, false)
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	oldID := "EvOLD" + receiver
	oldTS := time.Now().Add(-295 * time.Second).Unix() // inside ackd's window now, outside Bolt's soon
	oldBody := mentionBody(oldID, "late")
	if st, body, _ := slackSend(t, events, "application/json", oldBody, oldTS, nil); st != 200 {
		t.Fatalf("ackd answered %d %q", st, body)
	}
	if st, _ := rowStatus(oldID + ":events"); st != "pending" {
		t.Fatalf("row %s is %q, want pending before the kill", oldID, st)
	}
	if err := r.kill("kill-before-delivery"); err != nil {
		t.Fatal(err)
	}
	for time.Now().Unix() <= oldTS+301 {
		time.Sleep(100 * time.Millisecond) // until Slack's original signature is stale
	}
	if st, _, _ := slackSend(t, app.url, "application/json", oldBody, oldTS, nil); st != http.StatusUnauthorized {
		t.Fatalf("Bolt answered %d to the original, stale signature; want 401 (the test proves nothing otherwise)", st)
	}
	writeBoltConfig(t, cfgPath, addr, db, app.url, true)
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the late event's delivery", 30*time.Second, func() bool { st, _ := rowStatus(oldID + ":events"); return st == "done" })
	if recs := app.of(t, "event", oldID); len(recs) != 1 || recs[0].TS == nil || mustAtoi(t, *recs[0].TS) <= oldTS+300 {
		t.Fatalf("late event: %+v, want one run with a fresh timestamp", recs)
	}

	t.Run("five deliveries at once, one a Slack retry: the listener runs once and never sees retry headers", func(t *testing.T) {
		id := "EvDUP" + receiver
		body := mentionBody(id, "hello")
		var wg sync.WaitGroup
		statuses := make([]int, 5)
		for i := range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var h http.Header
				if i == 2 {
					h = http.Header{"X-Slack-Retry-Num": {"1"}, "X-Slack-Retry-Reason": {"http_timeout"}}
				}
				statuses[i], _, _ = slackSend(t, events, "application/json", body, time.Now().Unix(), h)
			}()
		}
		wg.Wait()
		for i, st := range statuses {
			if st != 200 {
				t.Fatalf("delivery %d answered %d", i, st)
			}
		}
		waitUntil(t, "the event's row done", 30*time.Second, func() bool { st, _ := rowStatus(id + ":events"); return st == "done" })
		recs := app.of(t, "event", id)
		if len(recs) != 1 {
			t.Fatalf("listener ran %d times, want 1: %+v", len(recs), recs)
		}
		if rec := recs[0]; rec.RetryNum != nil || rec.RetryReason != nil || rec.RetryHeader != nil || rec.Key == nil || *rec.Key != id+":events" {
			t.Fatalf("listener saw %+v: retry headers must never reach the app", rec)
		}
	})

	t.Run("ack('text') and ack({blocks, response_type}) each reach the response_url once though the command came twice", func(t *testing.T) {
		h := newHook(t)
		for _, c := range []struct{ cmd, trigger string }{{"/text", "111.222.t" + receiver}, {"/blocks", "333.444.b" + receiver}} {
			form := url.Values{"command": {c.cmd}, "text": {"prod"}, "trigger_id": {c.trigger}, "user_id": {"U0HUMAN"},
				"channel_id": {"C0E2E"}, "team_id": {"T0E2E"}, "api_app_id": {"A0E2E"},
				"response_url": {h.srv.URL + "/commands" + c.cmd}}
			body := []byte(form.Encode())
			for range 2 {
				if st, b, _ := slackSend(t, commands, "application/x-www-form-urlencoded", body, time.Now().Unix(), nil); st != 200 || b != "" {
					t.Fatalf("%s answered %d %q", c.cmd, st, b)
				}
			}
			key := "cmd:" + c.trigger + ":commands"
			waitUntil(t, c.cmd+"'s follow-up done", 30*time.Second, func() bool {
				a, _ := rowStatus(key)
				b, _ := rowStatus(key + ":reply")
				return a == "done" && b == "done"
			})
			if n := len(app.of(t, "command", c.trigger)); n != 1 {
				t.Errorf("%s listener ran %d times, want 1", c.cmd, n)
			}
		}
		text, blocks := h.got("/commands/text"), h.got("/commands/blocks")
		if len(text) != 1 || !strings.Contains(text[0], `"text":"text for prod"`) {
			t.Errorf("response_url for ack('text') got %q", text)
		}
		if len(blocks) != 1 || !strings.Contains(blocks[0], `"response_type":"in_channel"`) || !strings.Contains(blocks[0], `blocks for prod`) {
			t.Errorf("response_url for ack({blocks}) got %q", blocks)
		}
	})

	t.Run("a view_submission's ack({response_action: 'errors'}) is ackd's own answer", func(t *testing.T) {
		view := "V0VIEW" + receiver
		body := interactionBody(map[string]any{
			"type": "view_submission", "team": map[string]any{"id": "T0E2E"}, "user": map[string]any{"id": "U0HUMAN"},
			"api_app_id": "A0E2E", "trigger_id": "555.666.v" + receiver,
			"view": map[string]any{"id": view, "type": "modal", "callback_id": "form", "hash": "1.h",
				"state": map[string]any{"values": map[string]any{}}},
		})
		start := time.Now()
		st, ans, ctype := slackSend(t, ix, "application/x-www-form-urlencoded", body, time.Now().Unix(), nil)
		t.Logf("figure: view_submission answered by ackd with Bolt's reply in %s (a figure, not an assertion)", time.Since(start).Round(time.Millisecond))
		if st != 200 || !strings.Contains(ans, `"response_action":"errors"`) || !strings.Contains(ans, "no service "+view) ||
			!strings.HasPrefix(ctype, "application/json") {
			t.Fatalf("ackd answered %d %q (%s), want the app's errors", st, ans, ctype)
		}
	})

	t.Run("block_suggestion options are ackd's own answer, keystroke by keystroke", func(t *testing.T) {
		for _, v := range []string{"ab", "abc", "ab"} {
			body := interactionBody(map[string]any{
				"type": "block_suggestion", "action_id": "pick", "block_id": "b1", "value": v + receiver,
				"team": map[string]any{"id": "T0E2E"}, "user": map[string]any{"id": "U0HUMAN"}, "api_app_id": "A0E2E",
				"view": map[string]any{"id": "V0PICK", "type": "modal", "callback_id": "picker", "hash": "1.h"},
			})
			start := time.Now()
			st, ans, _ := slackSend(t, ix, "application/x-www-form-urlencoded", body, time.Now().Unix(), nil)
			t.Logf("figure: block_suggestion %q answered with Bolt's options in %s", v, time.Since(start).Round(time.Millisecond))
			if st != 200 || !strings.Contains(ans, `"options"`) || !strings.Contains(ans, "opt-"+v+receiver) {
				t.Fatalf("keystroke %q: ackd answered %d %q, want the app's options", v, st, ans)
			}
		}
	})

	t.Run("a throwing listener runs max_attempts times without retry headers, then is parked", func(t *testing.T) {
		id := "EvTHROW" + receiver
		if st, _, _ := slackSend(t, events, "application/json", mentionBody(id, "throw"), time.Now().Unix(), nil); st != 200 {
			t.Fatalf("ackd answered %d", st)
		}
		waitUntil(t, "the row parked", 30*time.Second, func() bool { st, _ := rowStatus(id + ":events"); return st == "parked" })
		recs := app.of(t, "event", id)
		if len(recs) != 3 {
			t.Fatalf("listener ran %d times, want max_attempts = 3", len(recs))
		}
		for i, rec := range recs {
			if rec.RetryNum != nil || rec.RetryHeader != nil || rec.Attempt == nil || *rec.Attempt != strconv.Itoa(i+1) {
				t.Errorf("run %d saw %+v", i+1, rec)
			}
		}
	})

	t.Run("SIGKILL mid-listener: the listener runs again, with the same Idempotency-Key", func(t *testing.T) {
		id := "EvHANG" + receiver
		if st, _, _ := slackSend(t, events, "application/json", mentionBody(id, "hang"), time.Now().Unix(), nil); st != 200 {
			t.Fatalf("ackd answered %d", st)
		}
		waitUntil(t, "the listener to start", 30*time.Second, func() bool { return len(app.of(t, "hang", id)) == 1 })
		if err := r.kill("kill-mid-listener"); err != nil {
			t.Fatal(err)
		}
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "the run after the restart", 30*time.Second, func() bool { st, _ := rowStatus(id + ":events"); return st == "done" })
		first, again := app.of(t, "hang", id), app.of(t, "event", id)
		if len(first) != 1 || len(again) != 1 || first[0].Key == nil || again[0].Key == nil || *first[0].Key != *again[0].Key ||
			*first[0].Key != id+":events" {
			t.Fatalf("runs: %+v then %+v, want two with one Idempotency-Key", first, again)
		}
	})

	if err := r.stop(20 * time.Second); err != nil {
		t.Error(err)
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
