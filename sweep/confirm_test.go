package sweep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

const confirmToken = "xoxb-confirm-test"

// confirmRig is a real sweep over a real SQLite file and the fake Slack:
// a post row, attempts that end ambiguously, and what Slack holds after.
type confirmRig struct {
	c     *clock
	st    store.Store
	api   *fakeslack.Server
	sw    *sweep.Sweeper
	rate  *slackrate.Budget
	logs  *logSink
	mu    sync.Mutex
	tally map[string]int // lookups by outcome (the metric)
}

func newConfirmRig(t *testing.T, mods ...func(*sweep.EffectConfig)) *confirmRig {
	t.Helper()
	r := &confirmRig{c: &clock{t: time.Now()}, api: fakeslack.New(t, confirmToken),
		rate: slackrate.New(60000), logs: &logSink{}, tally: map[string]int{}}
	r.st = openStore(t, r.c.Now)
	log := slog.New(slog.NewTextHandler(r.logs, nil))
	ec := sweep.EffectConfig{BotToken: confirmToken, APIURL: r.api.URL(), Logger: log, History: r.rate, Now: r.c.Now,
		OnConfirm: func(o string) { r.mu.Lock(); r.tally[o]++; r.mu.Unlock() }}
	for _, m := range mods {
		m(&ec)
	}
	// A short effect timeout: a post that hangs is given up on quickly.
	r.sw = sweep.New(r.st, sweep.Effects(ec), sweep.Config{Batch: 10, Workers: 2, Lease: time.Minute,
		DefaultTimeout: 700 * time.Millisecond}, log, nil)
	return r
}

// enqueuePost records one post row keyed key to channel C1 (in thread, when
// thread is set: a forward reply's follow-up carries it so).
func (r *confirmRig) enqueuePost(t *testing.T, key, thread string) {
	t.Helper()
	p, _ := sweep.Payload{Route: "r", Source: sweep.SourceEvent,
		Params: sweep.Params{Channel: "C1", Text: "hello " + key, ThreadTS: thread, Literal: true},
		Facts:  sweep.Facts{EventID: key, Channel: "C1"}}.Encode()
	if _, err := r.st.RecordIntent(context.Background(), store.Intent{EventID: key, EventType: "message",
		Rows: []store.NewRow{{Key: key, Effect: "post", Payload: p}}}); err != nil {
		t.Fatal(err)
	}
}

// sweepOnce runs one sweep and then moves the clock past any backoff and lease.
func (r *confirmRig) sweepOnce(t *testing.T) sweep.Result {
	t.Helper()
	res, err := r.sw.RunOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.c.Advance(2 * time.Minute)
	return res
}

// doneRow sweeps until key's row is done (at most a few sweeps).
func (r *confirmRig) doneRow(t *testing.T, key string) store.Row {
	t.Helper()
	for range 5 {
		r.sweepOnce(t)
		row, err := r.st.GetByKey(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if row.Status == store.StatusDone {
			return row
		}
	}
	row, _ := r.st.GetByKey(context.Background(), key)
	t.Fatalf("row %s not done after 5 sweeps: %+v", key, row)
	return store.Row{}
}

func (r *confirmRig) lookups(outcome string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tally[outcome]
}

// mustOnePost checks that channel C1 holds exactly one message with key and
// that row's result is that message.
func (r *confirmRig) mustOnePost(t *testing.T, row store.Row) {
	t.Helper()
	msgs := r.api.MessagesWithKey("C1", row.Key)
	if len(msgs) != 1 {
		t.Fatalf("C1 holds %d messages with key %s, want exactly 1", len(msgs), row.Key)
	}
	var res map[string]string
	if err := json.Unmarshal([]byte(row.Result), &res); err != nil {
		t.Fatalf("result %q: %v", row.Result, err)
	}
	if len(res) != 2 || res["channel"] != "C1" || res["ts"] != msgs[0].TS {
		t.Fatalf("result %s, want {channel C1, ts %s}", row.Result, msgs[0].TS)
	}
}

func TestConfirmPost(t *testing.T) {
	ambiguous := []struct {
		name string
		resp fakeslack.Response
	}{
		{"hang past the effect timeout", fakeslack.Response{Store: true, Delay: time.Hour}},
		{"connection closed after storing", fakeslack.Response{Store: true, Drop: true}},
		{"500 after storing", fakeslack.Response{Store: true, Status: 500, Body: "Internal Server Error"}},
		{"internal_error after storing", fakeslack.Response{Store: true, Error: "internal_error"}},
	}
	for _, tc := range ambiguous {
		t.Run(tc.name+": one message, the row done with the stored message's ts", func(t *testing.T) {
			t.Parallel()
			r := newConfirmRig(t)
			r.api.Script("chat.postMessage", tc.resp)
			r.enqueuePost(t, "Ev1:post", "")
			r.sweepOnce(t)
			if row, _ := r.st.GetByKey(context.Background(), "Ev1:post"); row.Status != store.StatusPending || !row.OutcomeUnknown {
				t.Fatalf("after the ambiguous attempt: %+v", row)
			}
			row := r.doneRow(t, "Ev1:post")
			r.mustOnePost(t, row)
			if n := len(r.api.CallsTo("chat.postMessage")); n != 1 {
				t.Fatalf("chat.postMessage called %d times, want 1 (the lookup found the first)", n)
			}
			if r.lookups(sweep.ConfirmFound) != 1 || !strings.Contains(row.Note, "found the earlier post") {
				t.Fatalf("lookups %v, note %q", r.tally, row.Note)
			}
			c := r.api.CallsTo("conversations.history")
			if len(c) != 1 || c[0].Params.Get("include_all_metadata") != "1" || c[0].Params.Get("channel") != "C1" || c[0].Params.Get("oldest") == "" {
				t.Fatalf("history calls: %+v", c)
			}
		})
	}

	t.Run("without confirmation the same outcome posts twice (what the lookup prevents)", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t, func(ec *sweep.EffectConfig) { ec.NoConfirm = true })
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"})
		r.enqueuePost(t, "Ev1:post", "")
		row := r.doneRow(t, "Ev1:post")
		if n := len(r.api.MessagesWithKey("C1", row.Key)); n != 2 {
			t.Fatalf("%d messages, want 2", n)
		}
		if n := len(r.api.CallsTo("conversations.history")); n != 0 {
			t.Fatalf("%d lookups with confirm_posts off", n)
		}
	})

	t.Run("a lease that ran out mid-call (the process died) is confirmed: one message", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.enqueuePost(t, "Ev1:post", "")
		// A sweeper claims the row, posts, and dies before recording anything.
		if rows, err := r.st.Claim(context.Background(), "dead", 1, time.Minute, nil); err != nil || len(rows) != 1 {
			t.Fatal(rows, err)
		}
		r.api.AddMessage("C1", fakeslack.Message{BotID: "B0FAKEBOT", Text: "hello", Metadata: map[string]any{
			"event_type": sweep.MetadataEventType, "event_payload": map[string]any{"idempotency_key": "Ev1:post"}}})
		r.c.Advance(2 * time.Minute)
		row := r.doneRow(t, "Ev1:post")
		r.mustOnePost(t, row)
		if n := len(r.api.CallsTo("chat.postMessage")); n != 0 {
			t.Fatalf("chat.postMessage called %d times after the dead claim, want 0", n)
		}
	})

	t.Run("control: a 500 before storing posts once, on the retry", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.Script("chat.postMessage", fakeslack.Status(500))
		r.enqueuePost(t, "Ev1:post", "")
		row := r.doneRow(t, "Ev1:post")
		r.mustOnePost(t, row)
		if r.lookups(sweep.ConfirmNotFound) != 1 || !strings.Contains(row.Note, "no earlier post") {
			t.Fatalf("lookups %v, note %q", r.tally, row.Note)
		}
	})

	t.Run("control: a definite refusal (429) is retried without a lookup", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.Script("chat.postMessage", fakeslack.RateLimited("1"))
		r.enqueuePost(t, "Ev1:post", "")
		row := r.doneRow(t, "Ev1:post")
		r.mustOnePost(t, row)
		if row.OutcomeUnknown || len(r.api.CallsTo("conversations.history")) != 0 || row.Note != "" {
			t.Fatalf("a 429 led to a lookup: %+v, %d history calls", row, len(r.api.CallsTo("conversations.history")))
		}
	})

	t.Run("control: a thread post (a forward reply's follow-up) is found through replies", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		parent := r.api.AddMessage("C1", fakeslack.Message{User: "U1", Text: "question"})
		r.api.AddMessage("C1", fakeslack.Message{User: "U2", Text: "a reply", ThreadTS: parent})
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Drop: true})
		r.enqueuePost(t, "Ev1:fwd:reply", parent)
		row := r.doneRow(t, "Ev1:fwd:reply")
		r.mustOnePost(t, row)
		replies := r.api.CallsTo("conversations.replies")
		if len(replies) != 1 || replies[0].Params.Get("ts") != parent || len(r.api.CallsTo("conversations.history")) != 0 {
			t.Fatalf("replies calls %+v, history calls %d", replies, len(r.api.CallsTo("conversations.history")))
		}
		if msgs := r.api.MessagesWithKey("C1", row.Key); msgs[0].ThreadTS != parent {
			t.Fatalf("the post is not in the thread: %+v", msgs[0])
		}
	})

	t.Run("control: more messages than one page since the attempt: found on a later page", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Status: 503, Body: "busy"})
		r.enqueuePost(t, "Ev1:post", "")
		r.sweepOnce(t)
		for i := range 450 { // newest first, 200 a page: the post is on page 3
			r.api.AddMessage("C1", fakeslack.Message{User: "U1", Text: fmt.Sprint("chatter ", i)})
		}
		row := r.doneRow(t, "Ev1:post")
		r.mustOnePost(t, row)
		if n := len(r.api.CallsTo("conversations.history")); n != 3 {
			t.Fatalf("%d history pages read, want 3", n)
		}
	})

	t.Run("a lookup longer than the budget allows in one attempt carries on from its cursor", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.rate = slackrate.New(60) // a call a second: one page per 700ms attempt
		r.sw = sweep.New(r.st, sweep.Effects(sweep.EffectConfig{BotToken: confirmToken, APIURL: r.api.URL(), History: r.rate,
			OnConfirm: func(o string) { r.mu.Lock(); r.tally[o]++; r.mu.Unlock() }}),
			sweep.Config{Batch: 10, Workers: 2, Lease: time.Minute, DefaultTimeout: 700 * time.Millisecond}, quiet(), nil)
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"})
		r.enqueuePost(t, "Ev1:post", "")
		r.sweepOnce(t)
		for i := range 450 {
			r.api.AddMessage("C1", fakeslack.Message{User: "U1", Text: fmt.Sprint("chatter ", i)})
		}
		for range 10 {
			time.Sleep(time.Until(r.rate.Ready("conversations.history"))) // the budget runs on the real clock
			r.sweepOnce(t)
			if row, _ := r.st.GetByKey(context.Background(), "Ev1:post"); row.Status == store.StatusDone {
				break
			}
		}
		row, _ := r.st.GetByKey(context.Background(), "Ev1:post")
		if row.Status != store.StatusDone {
			t.Fatalf("not done: %+v", row)
		}
		r.mustOnePost(t, row)
		calls := r.api.CallsTo("conversations.history")
		if len(calls) != 3 || calls[0].Params.Get("cursor") != "" || calls[1].Params.Get("cursor") == "" || calls[2].Params.Get("cursor") == calls[1].Params.Get("cursor") {
			t.Fatalf("%d history calls, want 3 pages read once each in order: %v", len(calls), cursors(calls))
		}
		if r.lookups(sweep.ConfirmRateLimited) < 2 {
			t.Fatalf("lookups %v: the budget never cut a lookup short", r.tally)
		}
	})

	t.Run("missing_scope: posted again (at-least-once), counted, noted on the row, logged once per channel", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		scope := fakeslack.Response{Body: `{"ok":false,"error":"missing_scope","needed":"channels:history","provided":"chat:write"}`}
		r.api.Script("conversations.history", scope, scope)
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"},
			fakeslack.Response{Store: true, Error: "internal_error"})
		r.enqueuePost(t, "Ev1:post", "")
		r.enqueuePost(t, "Ev2:post", "")
		a, b := r.doneRow(t, "Ev1:post"), r.doneRow(t, "Ev2:post")
		for _, row := range []store.Row{a, b} {
			if n := len(r.api.MessagesWithKey("C1", row.Key)); n != 2 {
				t.Fatalf("%s: %d messages, want 2 (documented at-least-once)", row.Key, n)
			}
			if !strings.Contains(row.Note, "confirmed: lookup impossible (missing_scope channels:history)") {
				t.Fatalf("%s: note %q", row.Key, row.Note)
			}
		}
		if r.lookups(sweep.ConfirmImpossible) != 2 {
			t.Fatalf("lookups %v", r.tally)
		}
		if n := strings.Count(strings.Join(r.logs.lines, ""), "cannot look for earlier posts"); n != 1 {
			t.Fatalf("logged %d times, want once for the channel", n)
		}
		if line := r.logs.find("cannot look for earlier posts"); !strings.Contains(line, "channels:history") || !strings.Contains(line, "channel=C1") {
			t.Fatalf("log line %q", line)
		}
	})

	t.Run("a 429 on the lookup waits for Retry-After and posts nothing meanwhile", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "fatal_error"})
		r.api.Script("conversations.history", fakeslack.RateLimited("1"))
		r.enqueuePost(t, "Ev1:post", "")
		r.sweepOnce(t) // the ambiguous post
		before, _ := r.st.GetByKey(context.Background(), "Ev1:post")
		now := r.c.Now()
		r.sweepOnce(t) // the lookup, rate limited
		row, _ := r.st.GetByKey(context.Background(), "Ev1:post")
		if row.Status != store.StatusPending || row.Attempts != before.Attempts || !row.NextAttemptAt.After(now) {
			t.Fatalf("after a 429 on the lookup: %+v (before %+v)", row, before)
		}
		if n := len(r.api.CallsTo("chat.postMessage")); n != 1 || r.lookups(sweep.ConfirmRateLimited) != 1 {
			t.Fatalf("posted %d times during the hold; lookups %v", n, r.tally)
		}
		held := r.rate.HeldUntil("conversations.history")
		if held.IsZero() {
			t.Fatal("the 429's Retry-After is not held in the shared budget")
		}
		time.Sleep(time.Until(held)) // the budget's hold is on the real clock
		row = r.doneRow(t, "Ev1:post")
		r.mustOnePost(t, row)
	})
}

func cursors(calls []fakeslack.Call) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.Params.Get("cursor"))
	}
	return out
}
