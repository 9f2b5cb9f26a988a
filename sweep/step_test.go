package sweep_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/seal"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
	"github.com/ackd/ackd/sweep"
)

// The step effect against a real SQLite store, the fake Slack and a
// recording handler, one sweep at a time on a test clock: what a lost
// answer, a rate limit, the last attempt and the deadline do to a step.

type stepRig struct {
	t       *testing.T
	clk     *clock
	st      store.Store
	api     *fakeslack.Server
	handler *fakeslack.Hook
	sw      *sweep.Sweeper
	exec    string
	token   string
}

const stepMaxAttempts = 3

func newStepRig(t *testing.T, deadline time.Duration) *stepRig {
	t.Helper()
	r := &stepRig{t: t, clk: &clock{t: time.Unix(1700000000, 0)}, api: fakeslack.New(t, "xoxb-bot"), handler: fakeslack.NewHook(t),
		exec: "FxRIG1", token: "xwfp-rig-0123456789abcdef"}
	r.st = openStoreMax(t, r.clk.Now, stepMaxAttempts)
	r.api.AddExecution(r.exec, r.token)
	k, err := seal.New(bytes.Repeat([]byte{9}, seal.KeySize), nil)
	if err != nil {
		t.Fatal(err)
	}
	ec := sweep.EffectConfig{APIURL: r.api.URL(), Sealer: k, Steps: r.st, MaxAttempts: stepMaxAttempts, Now: r.clk.Now}
	r.sw = sweep.New(r.st, sweep.Effects(ec), sweep.Config{Lease: time.Minute}, quiet(), nil)

	env := []byte(`{"type":"event_callback","event_id":"Ev1","team_id":"T1","event":{"type":"function_executed","function_execution_id":"` +
		r.exec + `","function":{"callback_id":"approve"},"inputs":{},"bot_access_token":"` + r.token + `"}}`)
	sealed, n, err := sweep.SealTokens(k, "Ev1", sweep.ContentTypeJSON, env)
	if err != nil || n != 1 {
		t.Fatal(n, err)
	}
	facts := sweep.Facts{EventID: "Ev1", ExecutionID: r.exec}
	step, _ := sweep.Payload{Route: "approve", Source: sweep.SourceEvent, TimeoutMS: 5000, Facts: facts,
		Params: sweep.Params{URL: r.handler.URL(), DeadlineMS: deadline.Milliseconds()}}.Encode()
	dl, _ := sweep.Payload{Route: "approve", Source: sweep.SourceEvent, TimeoutMS: 5000, Facts: facts,
		Params: sweep.Params{DeadlineMS: deadline.Milliseconds(), StepKey: r.exec + ":approve"}}.Encode()
	_, err = r.st.RecordIntent(context.Background(), store.Intent{EventID: "Ev1", EventType: "function_executed",
		Request: &store.Request{ContentType: sweep.ContentTypeJSON, Body: sealed},
		Rows: []store.NewRow{
			{Key: r.exec + ":approve", Effect: sweep.EffectStep, Payload: step, RequestID: "Ev1"},
			{Key: r.exec + ":approve:deadline", Effect: sweep.EffectStepDeadline, Payload: dl, RequestID: "Ev1", Delay: deadline},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func openStoreMax(t *testing.T, now func() time.Time, max int) store.Store {
	t.Helper()
	sch, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ackd.db"),
		store.Options{Schema: string(sch), Now: now, BackoffBase: time.Second, MaxAttempts: max})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (r *stepRig) sweep() sweep.Result {
	r.t.Helper()
	res, err := r.sw.RunOnce(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return res
}

func (r *stepRig) row(suffix string) store.Row {
	r.t.Helper()
	row, err := r.st.GetByKey(context.Background(), r.exec+":approve"+suffix)
	if err != nil {
		r.t.Fatal(err)
	}
	return row
}

func TestStepEffect(t *testing.T) {
	t.Run("a complete whose answer was lost is repeated from the saved reply; the handler is asked once", func(t *testing.T) {
		r := newStepRig(t, 5*time.Minute)
		r.handler.Script(fakeslack.Response{Body: `{"outputs":{"n":7}}`})
		r.api.Script("functions.completeSuccess", fakeslack.Response{Store: true, Drop: true})
		r.sweep()
		row := r.row("")
		if row.Status != store.StatusPending || !strings.Contains(row.Result, `"step_reply"`) || !row.OutcomeUnknown {
			t.Fatalf("after the lost answer: %+v", row)
		}
		r.clk.Advance(time.Minute)
		r.sweep()
		row = r.row("")
		if row.Status != store.StatusDone || !strings.Contains(row.Result, `"step":"over"`) || !strings.Contains(row.Note, "kept by an earlier attempt") {
			t.Fatalf("after the repeat: %+v", row)
		}
		if n := len(r.handler.Posts()); n != 1 {
			t.Fatalf("handler asked %d times", n)
		}
		if x, _ := r.api.Execution(r.exec); x.Outcome != "success" || x.Completes != 2 || string(x.Outputs) != `{"n":7}` {
			t.Fatalf("%+v", x)
		}
	})

	t.Run("429 on complete waits for Retry-After without spending an attempt, then completes", func(t *testing.T) {
		r := newStepRig(t, 5*time.Minute)
		r.handler.Script(fakeslack.Response{Body: `{"outputs":{}}`})
		r.api.Script("functions.completeSuccess", fakeslack.RateLimited("30"))
		r.sweep()
		row := r.row("")
		if row.Status != store.StatusPending || row.Attempts != 0 || row.NextAttemptAt.Sub(r.clk.Now()) != 30*time.Second {
			t.Fatalf("%+v", row)
		}
		r.clk.Advance(29 * time.Second)
		if res := r.sweep(); res.Claimed != 0 {
			t.Fatalf("claimed before Retry-After: %+v", res)
		}
		r.clk.Advance(time.Second)
		r.sweep()
		if row := r.row(""); row.Status != store.StatusDone || !strings.Contains(row.Result, `"step":"success"`) {
			t.Fatalf("%+v", row)
		}
		if n := len(r.handler.Posts()); n != 1 {
			t.Fatalf("handler asked %d times", n)
		}
	})

	t.Run("a handler's error naming its execution token or the bot token reaches the workflow masked", func(t *testing.T) {
		r := newStepRig(t, 5*time.Minute)
		r.handler.Script(fakeslack.Response{Body: `{"error":"token ` + r.token + ` (bot xoxb-bot) is not allowed here"}`})
		r.sweep()
		x, _ := r.api.Execution(r.exec)
		if x.Outcome != "error" || x.Error != "token xwfp-…(masked) (bot xoxb-…(masked)) is not allowed here" {
			t.Fatalf("completeError sent %+v", x)
		}
		if row := r.row(""); strings.Contains(row.Result, r.token[5:]) || strings.Contains(row.Result, "xoxb-bot") {
			t.Fatalf("the saved reply holds a token: %s", row.Result)
		}
		for _, c := range r.api.Calls() {
			if strings.Contains(c.Params.Encode(), r.token[5:]) {
				t.Fatalf("%s was sent the token in its body: %v", c.Method, c.Params)
			}
		}
	})

	t.Run("outputs naming a token reach the workflow masked, and stay JSON", func(t *testing.T) {
		r := newStepRig(t, 5*time.Minute)
		r.handler.Script(fakeslack.Response{Body: `{"outputs":{"note":"used ` + r.token + `","n":1}}`})
		r.sweep()
		x, _ := r.api.Execution(r.exec)
		if x.Outcome != "success" || string(x.Outputs) != `{"note":"used xwfp-…(masked)","n":1}` {
			t.Fatalf("completeSuccess sent %+v (%s)", x, x.Outputs)
		}
	})

	t.Run("the last attempt ends the step with completeError, then parks", func(t *testing.T) {
		r := newStepRig(t, 5*time.Minute)
		r.handler.Script(fakeslack.Status(502), fakeslack.Status(502), fakeslack.Status(502))
		for i := range stepMaxAttempts {
			r.sweep()
			if x, _ := r.api.Execution(r.exec); i < stepMaxAttempts-1 && x.Outcome != "" {
				t.Fatalf("step ended on attempt %d: %+v", i+1, x)
			}
			r.clk.Advance(10 * time.Second)
		}
		row := r.row("")
		if row.Status != store.StatusParked || !strings.Contains(row.LastError, "ended with functions.completeError") {
			t.Fatalf("%+v", row)
		}
		x, _ := r.api.Execution(r.exec)
		if x.Outcome != "error" || !strings.Contains(x.Error, "last attempt (3)") || !strings.Contains(x.Error, "http_502") {
			t.Fatalf("%+v", x)
		}
	})

	t.Run("a parked step retires its deadline: one completeError, the deadline row calls nothing", func(t *testing.T) {
		r := newStepRig(t, 5*time.Minute)
		r.handler.Script(fakeslack.Status(400)) // a 4xx parks at once
		r.sweep()
		if row := r.row(""); row.Status != store.StatusParked {
			t.Fatalf("step row after the 400: %+v", row)
		}
		r.clk.Advance(5*time.Minute + time.Second)
		r.sweep()
		timer := r.row(":deadline")
		if timer.Status != store.StatusDone || !strings.Contains(timer.Result, `"step":"over"`) || !strings.Contains(timer.Note, "Slack was not called") {
			t.Fatalf("deadline row: %+v", timer)
		}
		if n := len(r.api.CallsTo("functions.completeError")); n != 1 {
			t.Fatalf("functions.completeError called %d times, want 1 (the park's): the deadline row told Slack again", n)
		}
		if x, _ := r.api.Execution(r.exec); x.Outcome != "error" || x.Completes != 1 {
			t.Fatalf("%+v", x)
		}
		if row := r.row(""); !strings.Contains(row.Result, `"step":"parked"`) {
			t.Fatalf("the parked row does not say the step ended: %q", row.Result)
		}
	})

	t.Run("a park whose completeError failed leaves the deadline row to end the step", func(t *testing.T) {
		r := newStepRig(t, 5*time.Minute)
		r.handler.Script(fakeslack.Status(400))
		r.api.Script("functions.completeError", fakeslack.Status(500))
		r.sweep()
		if row := r.row(""); row.Status != store.StatusParked || strings.Contains(row.Result, `"step":"parked"`) {
			t.Fatalf("step row: %+v", row)
		}
		r.clk.Advance(5*time.Minute + time.Second)
		r.sweep()
		if timer := r.row(":deadline"); timer.Status != store.StatusDone || !strings.Contains(timer.Result, `"step":"timed_out"`) {
			t.Fatalf("deadline row: %+v", timer)
		}
		if x, _ := r.api.Execution(r.exec); x.Outcome != "error" || !strings.Contains(x.Error, "timed out") {
			t.Fatalf("%+v", x)
		}
	})

	t.Run("a paused step route's deadline still fires; on resume the late step asks no one", func(t *testing.T) {
		r := newStepRig(t, time.Minute)
		if _, err := r.st.(store.RoutePauses).PauseRoute(context.Background(), "approve", "test"); err != nil {
			t.Fatal(err)
		}
		if res := r.sweep(); res.Claimed != 0 {
			t.Fatalf("a paused step row was claimed: %+v", res)
		}
		r.clk.Advance(time.Minute + time.Second)
		r.sweep()
		if timer := r.row(":deadline"); timer.Status != store.StatusDone || !strings.Contains(timer.Result, `"step":"timed_out"`) {
			t.Fatalf("deadline row during the pause: %+v", timer)
		}
		if x, _ := r.api.Execution(r.exec); x.Outcome != "error" || !strings.Contains(x.Error, "timed out") {
			t.Fatalf("the workflow waits on the pause: %+v", x)
		}
		if step := r.row(""); step.Status != store.StatusPending || step.Attempts != 0 {
			t.Fatalf("the paused step row was performed: %+v", step)
		}
		if _, err := r.st.(store.RoutePauses).ResumeRoute(context.Background(), "approve"); err != nil {
			t.Fatal(err)
		}
		r.sweep()
		step := r.row("")
		if step.Status != store.StatusDone || !strings.Contains(step.Result, `"step":"over"`) || !strings.Contains(step.Note, "handler was not asked") {
			t.Fatalf("step row after the resume: %+v", step)
		}
		if n := len(r.handler.Posts()); n != 0 {
			t.Fatalf("handler asked %d times after its step timed out", n)
		}
		if n := len(r.api.CallsTo("functions.completeError")); n != 1 {
			t.Fatalf("functions.completeError called %d times, want 1 (the deadline's)", n)
		}
	})

	t.Run("after its deadline a step row does not ask the handler: it ends the step", func(t *testing.T) {
		r := newStepRig(t, time.Minute)
		r.handler.Script(fakeslack.Status(503))
		r.sweep()
		r.clk.Advance(30 * time.Second)
		r.api.Script("functions.completeError", fakeslack.Status(500)) // the deadline row's call fails
		r.clk.Advance(31 * time.Second)
		r.sweep() // both due: the step row past its deadline, and the deadline row
		if n := len(r.handler.Posts()); n != 1 {
			t.Fatalf("handler asked %d times", n)
		}
		x, _ := r.api.Execution(r.exec)
		if x.Outcome != "error" || !strings.Contains(x.Error, "timed out") {
			t.Fatalf("%+v", x)
		}
		step, timer := r.row(""), r.row(":deadline")
		ended := 0
		for _, row := range []store.Row{step, timer} {
			if row.Status == store.StatusDone && strings.Contains(row.Result, `"step":"timed_out"`) {
				ended++
			}
		}
		if ended != 1 {
			t.Fatalf("want one of the rows to have ended it: step %+v; deadline %+v", step, timer)
		}
	})

	t.Run("a deadline row made due early waits by its own times", func(t *testing.T) {
		reg := sweep.Effects(sweep.EffectConfig{})
		p, _ := sweep.Payload{Params: sweep.Params{DeadlineMS: (5 * time.Minute).Milliseconds()}}.Encode()
		t0 := time.Unix(1700000000, 0)
		job := sweep.Job{Attempt: 1, Row: store.Row{Key: "Fx:r:deadline", Effect: sweep.EffectStepDeadline, Payload: p,
			CreatedAt: t0, NextAttemptAt: t0, FirstClaimedAt: t0.Add(time.Minute)}}
		job.Payload, _ = sweep.DecodePayload(p)
		_, err := reg[sweep.EffectStepDeadline].Perform(context.Background(), job)
		var f *sweep.Failure
		if !errors.As(err, &f) || f.Class != sweep.RateLimited || f.RetryAfter != 4*time.Minute {
			t.Fatalf("%v", err)
		}
	})

	t.Run("without ACKD_TOKEN_KEY: step rows are not claimed, a forward of a sealed request is given back", func(t *testing.T) {
		r := newStepRig(t, 5*time.Minute)
		ec := sweep.EffectConfig{APIURL: r.api.URL()}
		sw := sweep.New(r.st, sweep.Effects(ec), sweep.Config{Lease: time.Minute, Skip: ec.Unavailable()}, quiet(), nil)
		if res, err := sw.RunOnce(context.Background()); err != nil || res.Claimed != 0 {
			t.Fatalf("%+v %v", res, err)
		}
		fwd, _ := sweep.Payload{Route: "audit", Source: sweep.SourceEvent, Params: sweep.Params{URL: r.handler.URL()}}.Encode()
		if _, err := r.st.RecordIntent(context.Background(), store.Intent{EventID: "Ev1", Rows: []store.NewRow{
			{Key: "Ev1:audit", Effect: "forward", Payload: fwd, RequestID: "Ev1"}}}); err != nil {
			t.Fatal(err)
		}
		res, err := sw.RunOnce(context.Background())
		if err != nil || res.Skipped != 1 || len(r.handler.Posts()) != 0 {
			t.Fatalf("%+v %v, %d posts", res, err, len(r.handler.Posts()))
		}
		row, _ := r.st.GetByKey(context.Background(), "Ev1:audit")
		if !strings.Contains(row.LastError, "ACKD_TOKEN_KEY") {
			t.Fatalf("%+v", row)
		}
		// With the key the forward carries the token in clear to its handler.
		r.sweep()
		if n := len(r.handler.Posts()); n != 1 {
			t.Fatalf("%d posts", n)
		}
		var body struct {
			Envelope json.RawMessage `json:"envelope"`
		}
		r.handler.Posts()[0].JSON(t, &body)
		if !bytes.Contains(body.Envelope, []byte(r.token)) {
			t.Fatalf("forwarded %s", body.Envelope)
		}
	})
}
