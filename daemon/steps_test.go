package daemon_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
)

// Workflow steps end to end, in process: a real Server on 127.0.0.1 with a
// real database (a SQLite file, or a PostgreSQL schema), the fake Slack's
// functions.complete* and a recording handler. The real binary (SIGKILL,
// replicas and a hand-run sweep) is in e2e/steps_test.go.

// stepKey is an ACKD_TOKEN_KEY for tests (32 bytes, base64).
var stepKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))

// stepEnv is one daemon with a step route, the fake Slack and the handler.
type stepEnv struct {
	*testServer
	api     *fakeslack.Server
	handler *fakeslack.Hook
	pg      string // the PostgreSQL URL, "" on SQLite
}

// stepConfig is a config with a step route on callback_id approve_request
// and the given deadline, plus extra TOML (routes after it).
func stepConfig(api, handler, deadline, extra string) string {
	return fmt.Sprintf(`
[sweep]
interval    = "50ms"
backoff     = "10ms"
max_backoff = "10m"

[slack]
api_url = %q

[steps]
deadline = %q

[[route]]
name        = "approve"
event       = "function_executed"
callback_id = "approve_request"
effect      = "step"
url         = %q
timeout     = "5s"
%s`, api, deadline, handler, extra)
}

// startSteps starts a daemon on engine ("sqlite" or "postgres").
func startSteps(t *testing.T, engine, deadline, extra string, opts daemon.Options) *stepEnv {
	t.Helper()
	e := &stepEnv{api: fakeslack.New(t, "xoxb-bot-token"), handler: fakeslack.NewHook(t)}
	cfg := configFor(t, stepConfig(e.api.URL(), e.handler.URL(), deadline, extra))
	if engine == "postgres" {
		pgtest.Need(t)
		e.pg = pgtest.URL(t)
		cfg.DB = e.pg
	}
	opts.Secrets.TokenKey = stepKey
	opts.Secrets.BotToken = "xoxb-bot-token"
	e.testServer = startServer(t, cfg, opts)
	return e
}

// count runs a count query on whichever engine the daemon uses (SQLite's
// placeholders; $n for PostgreSQL are made from them).
func (e *stepEnv) count(q string, args ...any) int {
	e.t.Helper()
	if e.pg != "" {
		for i := range args {
			q = strings.Replace(q, "?", fmt.Sprintf("$%d", i+1), 1)
		}
		return pgtest.Count(e.t, e.pg, q, args...)
	}
	return e.testServer.count(q, args...)
}

// stepRow is one outbox row's status, result, note and last error, by key.
func (e *stepEnv) stepRow(key string) (status, result, note, lastErr string) {
	e.t.Helper()
	r, err := e.Store().GetByKey(context.Background(), key)
	if err != nil {
		e.t.Fatalf("row %s: %v", key, err)
	}
	return r.Status, r.Result, r.Note, r.LastError
}

func (e *stepEnv) waitStatus(key, status string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.count(`SELECT count(*) FROM outbox WHERE idempotency_key = ? AND status = ?`, key, status) != 1 {
		if time.Now().After(deadline) {
			r, err := e.Store().GetByKey(context.Background(), key)
			e.t.Fatalf("timed out waiting for %s %s: the row is %+v (%v)", key, status, r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newExecution starts an execution at the fake and returns its id and
// token (unique per test, so a grep for it finds only this test's).
func (e *stepEnv) newExecution() (id, token string) {
	id = "Fx" + strings.ToUpper(rand.Text()[:10])
	token = "xwfp-" + strings.ToLower(rand.Text()) + "-" + strings.ToLower(rand.Text())
	e.api.AddExecution(id, token)
	return id, token
}

// fnEvent is a function_executed envelope (bolt-js's test helper's shape).
func fnEvent(eventID, execID, callbackID, token string) []byte {
	return eventBody(eventID, map[string]any{
		"type": "function_executed",
		"function": map[string]any{"id": "Fn0123", "callback_id": callbackID, "title": "Approve", "type": "app",
			"app_id": "A1", "date_created": 1700000000},
		"inputs":                map[string]any{"requester": "U1", "amount": 40},
		"function_execution_id": execID, "workflow_execution_id": "Wf0123",
		"event_ts": "1700000000.000100", "bot_access_token": token,
	})
}

// execution returns what the fake saw of id.
func (e *stepEnv) execution(id string) fakeslack.Execution {
	e.t.Helper()
	x, ok := e.api.Execution(id)
	if !ok {
		e.t.Fatalf("no execution %s", id)
	}
	return x
}

func (e *stepEnv) waitEnded(id string) fakeslack.Execution {
	e.t.Helper()
	waitFor(e.t, "execution "+id+" ended", 20*time.Second, func() bool {
		x, _ := e.api.Execution(id)
		return x.Outcome != ""
	})
	return e.execution(id)
}

func TestSteps(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			testSteps(t, engine)
		})
	}
}

func testSteps(t *testing.T, engine string) {
	t.Run("one complete per execution under three concurrent deliveries, Slack's retry, and a redelivery an hour later", func(t *testing.T) {
		e := startSteps(t, engine, "5m", "", daemon.Options{})
		e.handler.Script(fakeslack.Response{Body: `{"outputs":{"approver":"U2","amount":40,"tags":["a","b"],"ok":true}}`})
		exec, token := e.newExecution()
		body := fnEvent("EvSTEP1", exec, "approve_request", token)
		post := func(s *testServer, at time.Time, b []byte, retry string) response {
			req, _ := http.NewRequest(http.MethodPost, s.URL+"/slack/events", bytes.NewReader(b))
			ts := at.Unix() // Slack signs each delivery, retries too, when it sends it
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Slack-Request-Timestamp", fmt.Sprint(ts))
			req.Header.Set("X-Slack-Signature", sign(testSecret, ts, b))
			if retry != "" {
				req.Header.Set("X-Slack-Retry-Num", retry)
				req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
			}
			return s.do(req)
		}
		var wg sync.WaitGroup
		answers := make([]response, 3)
		for i := range answers {
			wg.Go(func() { answers[i] = post(e.testServer, time.Now(), body, "") })
		}
		wg.Wait()
		firsts := 0
		for _, a := range answers {
			if a.Status != http.StatusOK {
				t.Fatalf("answer %d %q", a.Status, a.Body)
			}
			if a.Header.Get(ingress.HeaderOutcome) == "first" {
				firsts++
			}
		}
		if firsts != 1 {
			t.Fatalf("%d deliveries told first, want 1", firsts)
		}
		if r := post(e.testServer, time.Now(), body, "1"); r.Status != http.StatusOK {
			t.Fatalf("retry: %d", r.Status)
		}
		x := e.waitEnded(exec)
		key := exec + ":approve"
		e.waitStatus(key, "done")

		// An hour later (ackd restarted meanwhile, on the same database)
		// Slack sends it again, once as its own retry (the same event_id)
		// and once under another event_id. The clock is an hour on from
		// the start, so no sweep straddles the step; only the sweep run by
		// hand below performs what is due (the deadline row).
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		later := func() time.Time { return time.Now().Add(time.Hour) }
		cfg := configFor(t, strings.Replace(stepConfig(e.api.URL(), e.handler.URL(), "5m", ""), `interval    = "50ms"`, `interval    = "1h"`, 1))
		cfg.DB = cmp.Or(e.pg, e.DB)
		again := startServer(t, cfg, daemon.Options{Now: later, Secrets: config.Secrets{TokenKey: stepKey}})
		if sc, ok := again.Store().(interface{ SetClockOffset(time.Duration) }); ok {
			sc.SetClockOffset(time.Hour) // PostgreSQL's clock, which the sweep judges by
		}
		if r := post(again, later(), body, "3"); r.Status != http.StatusOK || r.Header.Get(ingress.HeaderOutcome) != "duplicate" {
			t.Fatalf("an hour later: %d %s", r.Status, r.Header.Get(ingress.HeaderOutcome))
		}
		if r := post(again, later(), fnEvent("EvSTEP1b", exec, "approve_request", token), ""); r.Status != http.StatusOK {
			t.Fatalf("another event id: %d", r.Status)
		}
		e.testServer = again
		waitFor(t, "the deadline row done", 20*time.Second, func() bool {
			if _, err := again.Sweeper().RunOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			status, _, _, _ := e.stepRow(key + ":deadline")
			return status == "done"
		})
		if n := e.count(`SELECT count(*) FROM outbox`); n != 2 {
			t.Errorf("%d rows, want the step row and its deadline row", n)
		}
		x = e.execution(exec)
		if x.Completes != 1 || x.Outcome != "success" {
			t.Fatalf("execution %+v, want one completeSuccess", x)
		}
		if n := len(e.handler.Posts()); n != 1 {
			t.Fatalf("handler asked %d times, want 1", n)
		}

		t.Run("the outputs as the handler sent them, with the execution's own token", func(t *testing.T) {
			var out map[string]any
			if err := json.Unmarshal(x.Outputs, &out); err != nil {
				t.Fatal(err)
			}
			if out["approver"] != "U2" || out["amount"] != float64(40) || out["ok"] != true || fmt.Sprint(out["tags"]) != "[a b]" {
				t.Errorf("outputs %s", x.Outputs)
			}
			if len(x.Tokens) != 1 || x.Tokens[0] != token {
				t.Errorf("tokens used %v, want the execution's", x.Tokens)
			}
			for _, c := range e.api.Calls() {
				if strings.HasPrefix(c.Method, "functions.") && c.Token != token {
					t.Errorf("%s called with %q", c.Method, c.Token)
				}
			}
			post := e.handler.Posts()[0]
			var fwd struct {
				Envelope struct {
					Event struct {
						Token string `json:"bot_access_token"`
					} `json:"event"`
				} `json:"envelope"`
			}
			post.JSON(t, &fwd)
			if fwd.Envelope.Event.Token != token || post.Header.Get("Idempotency-Key") != key || post.Header.Get("X-Ackd-Attempt") != "1" {
				t.Errorf("the handler got token %q, headers %v", fwd.Envelope.Event.Token, post.Header)
			}
			if status, result, _, _ := e.stepRow(key); status != "done" || !strings.Contains(result, `"step":"success"`) {
				t.Errorf("step row %s %s", status, result)
			}
			if _, _, note, _ := e.stepRow(key + ":deadline"); !strings.Contains(note, "already ended the step") {
				t.Errorf("deadline row note %q", note)
			}
		})
	})

	t.Run("the token is sealed in the stored request and appears in no row", func(t *testing.T) {
		e := startSteps(t, engine, "5m", "", daemon.Options{})
		e.handler.Script(fakeslack.Response{Body: `{"outputs":{}}`})
		exec, token := e.newExecution()
		e.postEvent(fnEvent("EvSEAL", exec, "approve_request", token))
		e.waitEnded(exec)
		e.waitStatus(exec+":approve", "done")
		if !strings.Contains(string(e.handler.Posts()[0].Body), token) {
			t.Fatal("the handler did not get the token")
		}
		body := `CAST(body AS TEXT)`
		if engine == "postgres" {
			body = `encode(body, 'escape')`
		}
		if n := e.count(`SELECT count(*) FROM slack_requests WHERE `+body+` LIKE ?`, "%ackd-sealed-1.%"); n != 1 {
			t.Fatalf("%d stored requests hold a sealed token, want 1", n)
		}
		secret := token[len(token)-16:]
		for _, q := range []string{
			`SELECT count(*) FROM slack_requests WHERE ` + body + ` LIKE ?`,
			`SELECT count(*) FROM outbox WHERE payload LIKE ? OR coalesce(result, '') LIKE ? OR coalesce(note, '') LIKE ? OR coalesce(last_error, '') LIKE ?`,
		} {
			args := []any{"%" + secret + "%"}
			for strings.Count(q, "?") > len(args) {
				args = append(args, args[0])
			}
			if n := e.count(q, args...); n != 0 {
				t.Errorf("%s: %d rows hold the token in clear", q, n)
			}
		}
	})

	t.Run("an error reply becomes completeError", func(t *testing.T) {
		e := startSteps(t, engine, "5m", "", daemon.Options{})
		e.handler.Script(fakeslack.Response{Body: `{"error":"the budget is spent"}`})
		exec, token := e.newExecution()
		e.postEvent(fnEvent("EvSTEP2", exec, "approve_request", token))
		x := e.waitEnded(exec)
		if x.Outcome != "error" || x.Error != "the budget is spent" || x.Completes != 1 {
			t.Fatalf("%+v", x)
		}
		e.waitStatus(exec+":approve", "done")
		if _, result, _, _ := e.stepRow(exec + ":approve"); !strings.Contains(result, `"step":"error"`) {
			t.Errorf("result %s", result)
		}
	})

	t.Run("500, 500, 200: asked three times with one key, completed once", func(t *testing.T) {
		e := startSteps(t, engine, "5m", "", daemon.Options{})
		e.handler.Script(fakeslack.Status(500), fakeslack.Status(500), fakeslack.Response{Body: `{"outputs":{}}`})
		exec, token := e.newExecution()
		e.postEvent(fnEvent("EvSTEP3", exec, "approve_request", token))
		x := e.waitEnded(exec)
		e.waitStatus(exec+":approve", "done")
		posts := e.handler.Posts()
		if len(posts) != 3 || x.Completes != 1 || x.Outcome != "success" {
			t.Fatalf("%d posts, execution %+v", len(posts), x)
		}
		for i, p := range posts {
			if p.Header.Get("Idempotency-Key") != exec+":approve" || p.Header.Get("X-Ackd-Attempt") != fmt.Sprint(i+1) {
				t.Errorf("post %d headers %v", i, p.Header)
			}
		}
	})

	t.Run("a permanent 400 parks the row after completeError names the failure", func(t *testing.T) {
		e := startSteps(t, engine, "5m", "", daemon.Options{})
		e.handler.Script(fakeslack.Response{Status: 400, Body: "bad input"})
		exec, token := e.newExecution()
		e.postEvent(fnEvent("EvSTEP4", exec, "approve_request", token))
		e.waitStatus(exec+":approve", "parked")
		x := e.execution(exec)
		if x.Outcome != "error" || !strings.Contains(x.Error, "http_400") || x.Completes != 1 || x.Tokens[0] != token {
			t.Fatalf("%+v", x)
		}
		if _, _, _, lastErr := e.stepRow(exec + ":approve"); !strings.Contains(lastErr, "http_400") || !strings.Contains(lastErr, "ended with functions.completeError") {
			t.Errorf("last_error %q", lastErr)
		}
	})

	t.Run("the deadline ends a step whose handler sleeps; its late reply finds the step over", func(t *testing.T) {
		e := startSteps(t, engine, "1s", "", daemon.Options{})
		release := make(chan struct{})
		e.handler.Script(fakeslack.Response{Hold: release, Body: `{"outputs":{"approver":"U3"}}`})
		exec, token := e.newExecution()
		e.postEvent(fnEvent("EvSTEP5", exec, "approve_request", token))
		waitFor(t, "the handler asked", 10*time.Second, func() bool { return len(e.handler.Posts()) == 1 })
		// Whichever of the daemon's loops holds the sleeping step row, a
		// sweep that is free (here one run by hand, like sweep --once)
		// performs the deadline row once it is due.
		waitFor(t, "the deadline to end the step", 20*time.Second, func() bool {
			if _, err := e.Sweeper().RunOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			x, _ := e.api.Execution(exec)
			return x.Outcome != ""
		})
		if x := e.execution(exec); x.Outcome != "error" || !strings.Contains(x.Error, "timed out") {
			t.Fatalf("%+v", x)
		}
		e.waitStatus(exec+":approve:deadline", "done")
		if _, result, note, _ := e.stepRow(exec + ":approve:deadline"); !strings.Contains(result, `"step":"timed_out"`) || !strings.Contains(note, "timed out after 1s") {
			t.Errorf("deadline row %s %q", result, note)
		}
		close(release)
		e.waitStatus(exec+":approve", "done")
		_, result, note, _ := e.stepRow(exec + ":approve")
		if !strings.Contains(result, `"step":"over"`) || !strings.Contains(note, "execution_not_in_running_state") {
			t.Errorf("step row %s %q", result, note)
		}
		if x := e.execution(exec); x.Completes != 2 || x.Outcome != "error" {
			t.Errorf("%+v", x)
		}
	})

	t.Run("a step already over: execution_not_in_running_state is done with a note", func(t *testing.T) {
		e := startSteps(t, engine, "5m", "", daemon.Options{})
		e.handler.Script(fakeslack.Response{Body: `{"outputs":{"a":"b"}}`})
		exec, token := e.newExecution()
		e.api.Script("functions.completeSuccess", fakeslack.Err("execution_not_in_running_state"))
		e.postEvent(fnEvent("EvSTEP6", exec, "approve_request", token))
		e.waitStatus(exec+":approve", "done")
		if _, result, note, _ := e.stepRow(exec + ":approve"); !strings.Contains(result, `"step":"over"`) || !strings.Contains(note, "already over") {
			t.Errorf("%s %q", result, note)
		}
	})

	t.Run("an unmatched callback_id is acked 200 and ignored", func(t *testing.T) {
		e := startSteps(t, engine, "5m", "", daemon.Options{})
		exec, token := e.newExecution()
		r := e.postEvent(fnEvent("EvSTEP7", exec, "some_other_function", token))
		if r.Status != http.StatusOK || r.Header.Get(ingress.HeaderOutcome) != "ignored" || r.Header.Get(ingress.HeaderReason) != "unrouted" {
			t.Fatalf("%d %v", r.Status, r.Header)
		}
		if n := e.count(`SELECT count(*) FROM outbox`) + e.count(`SELECT count(*) FROM slack_event_receipts`) + e.count(`SELECT count(*) FROM slack_requests`); n != 0 {
			t.Fatalf("%d rows written for an unrouted step", n)
		}
	})
}

// TestStepTokensAtRest: the execution token is never written in clear: not
// in the SQLite file, its WAL, a VACUUM INTO copy, nor the log, in any of
// its raw, hex or base64 forms, for a step, an interaction inside the step,
// and a plain forward of function_executed; each handler still gets it.
func TestStepTokensAtRest(t *testing.T) {
	t.Parallel()
	extra := `
[[route]]
name      = "approve-button"
action_id = "approve"
effect    = "step"
url       = %q

[[route]]
name   = "audit"
event  = "function_executed"
effect = "forward"
url    = %q
`
	e := &stepEnv{api: fakeslack.New(t, "xoxb-bot-token"), handler: fakeslack.NewHook(t)}
	audit := fakeslack.NewHook(t)
	cfg := configFor(t, stepConfig(e.api.URL(), e.handler.URL(), "5m", fmt.Sprintf(extra, e.handler.URL(), audit.URL())))
	e.testServer = startServer(t, cfg, daemon.Options{Secrets: config.Secrets{TokenKey: stepKey, BotToken: "xoxb-bot-token"}})

	exec, token := e.newExecution()
	e.handler.Script(fakeslack.Response{Body: `{}`}, fakeslack.Response{Body: `{"outputs":{"approver":"U7"}}`})
	if r := e.postEvent(fnEvent("EvTOK1", exec, "approve_request", token)); r.Status != 200 {
		t.Fatal(r)
	}
	e.waitStatus(exec+":approve", "done") // left open: {} completes nothing
	// The button inside the step carries its own token.
	ixToken := "xwfp-ix-" + strings.ToLower(rand.Text())
	ix := ixBlockActions("7.7.step", "approve", "1700000001.1", "http://127.0.0.1:1/r")
	ix["function_data"] = map[string]any{"execution_id": exec, "inputs": map[string]any{"requester": "U1"},
		"function": map[string]any{"callback_id": "approve_request"}}
	ix["bot_access_token"] = ixToken
	e.api.AddExecutionToken(exec, ixToken)
	if r := e.postForm("/slack/interactivity", ixForm(t, ix)); r.Status != 200 {
		t.Fatal(r)
	}
	e.waitStatus("ix:7.7.step:approve-button", "done")
	waitFor(t, "the audit forward", 10*time.Second, func() bool { return len(audit.Posts()) == 1 })

	t.Run("each handler got its token in clear", func(t *testing.T) {
		if !bytes.Contains(audit.Posts()[0].Body, []byte(token)) {
			t.Errorf("the forward did not carry the token")
		}
		posts := e.handler.Posts()
		if len(posts) != 2 || !bytes.Contains(posts[0].Body, []byte(token)) || !bytes.Contains(posts[1].Body, []byte(ixToken)) {
			t.Fatalf("handler posts: %d", len(posts))
		}
		// The interaction's own token is the one Slack was told with.
		var used bool
		for _, c := range e.api.CallsTo("functions.completeSuccess") {
			used = used || c.Token == ixToken
		}
		if !used {
			t.Errorf("completeSuccess was not called with the interaction's token")
		}
	})

	vacuum := filepath.Join(t.TempDir(), "copy.db")
	if _, err := e.db().Exec(`VACUUM INTO ?`, vacuum); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"log": []byte(e.Logs.String())}
	for _, f := range []string{e.DB, e.DB + "-wal", vacuum} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		files[filepath.Base(f)] = b
	}
	if len(files["ackd.db-wal"])+len(files["ackd.db"]) == 0 {
		t.Fatal("nothing to search")
	}
	for _, tok := range []string{token, ixToken} {
		forms := map[string]string{
			"raw": tok, "hex": hex.EncodeToString([]byte(tok)),
			"base64": base64.StdEncoding.EncodeToString([]byte(tok)), "base64url": base64.RawURLEncoding.EncodeToString([]byte(tok)),
			"the token's secret part": tok[len(tok)-20:],
		}
		for where, b := range files {
			for form, s := range forms {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%s holds the execution token (%s)", where, form)
				}
			}
		}
	}
	if !bytes.Contains(files["copy.db"], []byte("ackd-sealed-1.")) {
		t.Error("no sealed token in the database: was the request stored at all?")
	}
}

// TestStepInteraction: an interaction inside a step, routed to a step
// route, completes the step with the interaction's own token; the same
// interaction outside a step is not taken by it.
func TestStepInteraction(t *testing.T) {
	t.Parallel()
	extra := `
[[route]]
name      = "approve-button"
action_id = "approve"
effect    = "step"
url       = %q
`
	e := &stepEnv{api: fakeslack.New(t, "xoxb-bot-token"), handler: fakeslack.NewHook(t)}
	cfg := configFor(t, stepConfig(e.api.URL(), e.handler.URL(), "5m", fmt.Sprintf(extra, e.handler.URL())))
	e.testServer = startServer(t, cfg, daemon.Options{Secrets: config.Secrets{TokenKey: stepKey}})
	exec, token := e.newExecution()
	e.handler.Script(fakeslack.Response{Body: `{"outputs":{"approver":"U9"}}`})
	ix := ixBlockActions("8.8.step", "approve", "1700000001.2", "http://127.0.0.1:1/r")
	ix["function_data"] = map[string]any{"execution_id": exec, "inputs": map[string]any{}, "function": map[string]any{"callback_id": "approve_request"}}
	ix["bot_access_token"] = token
	if r := e.postForm("/slack/interactivity", ixForm(t, ix)); r.Status != 200 {
		t.Fatal(r)
	}
	x := e.waitEnded(exec)
	if x.Outcome != "success" || x.Tokens[0] != token || !strings.Contains(string(x.Outputs), "U9") {
		t.Fatalf("%+v", x)
	}
	plain := ixBlockActions("8.9.plain", "approve", "1700000001.3", "http://127.0.0.1:1/r")
	if r := e.postForm("/slack/interactivity", ixForm(t, plain)); r.Header.Get(ingress.HeaderOutcome) != "ignored" {
		t.Fatalf("an interaction outside a step was taken by the step route: %v", r.Header)
	}
}

// TestStepSocketMode: a step arrives over Socket Mode and goes through the
// same pipeline: one row per execution, one complete, the token sealed.
func TestStepSocketMode(t *testing.T) {
	t.Parallel()
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	handler := fakeslack.NewHook(t)
	handler.Script(fakeslack.Response{Body: `{"outputs":{"via":"socket"}}`})
	cfg := configFor(t, fmt.Sprintf(`
[slack]
api_url = %q
[socket_mode]
enabled = true
[sweep]
interval = "50ms"
[[route]]
name        = "approve"
event       = "function_executed"
callback_id = "approve_request"
effect      = "step"
url         = %q
`, api.URL(), handler.URL()))
	s := startServerNoSecret(t, cfg, daemon.Options{Secrets: config.Secrets{AppToken: sockAppToken, TokenKey: stepKey}})
	if !sock.Wait(10*time.Second, func() bool { return len(sock.Open()) >= 2 }) {
		t.Fatalf("no connections; log:\n%s", s.Logs)
	}
	exec := "FxSOCKET1"
	token := "xwfp-socket-" + strings.ToLower(rand.Text())
	api.AddExecution(exec, token)
	sock.SendToTwo("step", "events_api", json.RawMessage(fnEvent("EvSOCK1", exec, "approve_request", token)))
	waitFor(t, "both copies acked", 10*time.Second, func() bool {
		n := 0
		for _, a := range sock.Acks() {
			if a.Key == "step" {
				n++
			}
		}
		return n == 2
	})
	waitFor(t, "the step completed", 20*time.Second, func() bool {
		x, _ := api.Execution(exec)
		return x.Outcome == "success"
	})
	x, _ := api.Execution(exec)
	if x.Completes != 1 || len(handler.Posts()) != 1 {
		t.Fatalf("execution %+v, %d handler posts", x, len(handler.Posts()))
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = ?`, exec+":approve"); n != 1 {
		t.Fatalf("%d step rows", n)
	}
	if n := s.count(`SELECT count(*) FROM slack_requests WHERE instr(CAST(body AS TEXT), ?) > 0`, token); n != 0 {
		t.Fatal("the stored request holds the token in clear")
	}
}

// TestStepClocks: the deadline is on the store's clock. An ackd process
// whose clock is 10 minutes off the database's (PostgreSQL: replicas'
// clocks differ), and a Slack whose clock is 10 minutes off ackd's, move
// neither the deadline row's due time nor the step row's judgement.
func TestStepClocks(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()
	for _, skew := range []time.Duration{10 * time.Minute, -10 * time.Minute} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			clock := func() time.Time { return time.Now().Add(skew) }
			e := startSteps(t, "postgres", "5m", "", daemon.Options{Now: clock})
			e.api.SetClockOffset(-skew)
			e.handler.Script(fakeslack.Response{Body: `{"outputs":{"a":"b"}}`})
			exec, token := e.newExecution()
			body := fnEvent("EvCLOCK", exec, "approve_request", token)
			req, _ := http.NewRequest(http.MethodPost, e.URL+"/slack/events", bytes.NewReader(body))
			ts := clock().Unix() // ackd checks Slack's timestamp against its own clock
			req.Header.Set("X-Slack-Request-Timestamp", fmt.Sprint(ts))
			req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
			req.Header.Set("Content-Type", "application/json")
			if r := e.do(req); r.Status != 200 {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
			x := e.waitEnded(exec)
			if x.Outcome != "success" || len(e.handler.Posts()) != 1 {
				t.Fatalf("%+v: the step row took the deadline for passed (%d handler posts)", x, len(e.handler.Posts()))
			}
			r, err := e.Store().GetByKey(t.Context(), exec+":approve:deadline")
			if err != nil {
				t.Fatal(err)
			}
			dbNow, err := e.Store().(interface {
				DBNow(context.Context) (time.Time, error)
			}).DBNow(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			due, created := r.NextAttemptAt.UnixMilli(), r.CreatedAt.UnixMilli()
			if due-created != (5 * time.Minute).Milliseconds() {
				t.Errorf("deadline row due %dms after its creation, want 5m", due-created)
			}
			if d := dbNow.Sub(r.CreatedAt); d < 0 || d > time.Minute {
				t.Errorf("created %s before the database's now: stamped on another clock", d)
			}
		})
	}
}
