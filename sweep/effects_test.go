package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
)

const testToken = "xoxb-1-test-token"

// testNow is the clock the effects see in tests.
var testNow = time.Unix(1700000500, 0)

// newEffects returns the registry wired to api (which may be nil when the
// test needs no Web API).
func newEffects(tb testing.TB, api *fakeslack.Server, mods ...func(*EffectConfig)) Registry {
	tb.Helper()
	cfg := EffectConfig{BotToken: testToken, Now: func() time.Time { return testNow }}
	if api != nil {
		cfg.APIURL = api.URL()
	}
	for _, m := range mods {
		m(&cfg)
	}
	return Effects(cfg)
}

// newJob builds the job a sweep would hand over for a fresh row.
func newJob(key, effect string, p Payload) Job {
	enc, _ := p.Encode()
	return Job{Row: store.Row{ID: 1, Key: key, Effect: effect, Payload: enc, Status: store.StatusPending}, Payload: p, Attempt: 1}
}

// perform runs one effect with a generous deadline.
func perform(tb testing.TB, reg Registry, job Job) (Outcome, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return performCtx(tb, ctx, reg, job)
}

func performCtx(tb testing.TB, ctx context.Context, reg Registry, job Job) (Outcome, error) {
	tb.Helper()
	p, ok := reg[job.Row.Effect]
	if !ok {
		tb.Fatalf("no performer for %q", job.Row.Effect)
	}
	return p.Perform(ctx, job)
}

// succeed performs job and returns its decoded result, failing the test
// if the effect failed.
func succeed(tb testing.TB, reg Registry, job Job) map[string]any {
	tb.Helper()
	o, err := perform(tb, reg, job)
	return mustSucceed(tb, o, err)
}

// mustSucceed fails the test unless the effect succeeded, and returns its
// result decoded.
func mustSucceed(tb testing.TB, o Outcome, err error) map[string]any {
	tb.Helper()
	if err != nil {
		tb.Fatalf("effect failed: %v", err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(o.Result), &res); err != nil {
		tb.Fatalf("result %q: %v", o.Result, err)
	}
	return res
}

// mustFail fails the test unless err is a *Failure of class and code.
func mustFail(tb testing.TB, err error, class Class, code string) *Failure {
	tb.Helper()
	var f *Failure
	if !errors.As(err, &f) {
		tb.Fatalf("error = %v (%T), want a *Failure", err, err)
	}
	if f.Class != class || f.Code != code {
		tb.Fatalf("failure = %s/%q (%v), want %s/%q", f.Class, f.Code, f, class, code)
	}
	return f
}

// mustOneCall returns the only call to method.
func mustOneCall(tb testing.TB, api *fakeslack.Server, method string) fakeslack.Call {
	tb.Helper()
	calls := api.CallsTo(method)
	if len(calls) != 1 {
		tb.Fatalf("%d calls to %s, want 1 (all calls: %+v)", len(calls), method, api.Calls())
	}
	if c := calls[0]; c.Token != testToken {
		tb.Fatalf("%s sent token %q, want the bot token", method, c.Token)
	}
	return calls[0]
}

func eventPayload(p Params) Payload {
	return Payload{
		Route: "r", Source: SourceEvent, Params: p,
		Facts: Facts{EventID: "Ev1", Team: "T1", User: "U1", Channel: "C1", TS: "1700000000.000100", Text: "hello"},
		Raw:   json.RawMessage(`{"type":"event_callback","event_id":"Ev1"}`),
	}
}

func TestPost(t *testing.T) {
	t.Run("posts rendered text to the event's channel with the key in metadata", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api)
		res := succeed(t, reg, newJob("Ev1:r", "post", eventPayload(Params{Text: "Hi <@{{.User}}>: {{.Text}}"})))

		c := mustOneCall(t, api, "chat.postMessage")
		if got := c.Params.Get("channel"); got != "C1" {
			t.Errorf("channel = %q, want C1", got)
		}
		if got := c.Params.Get("text"); got != "Hi <@U1>: hello" {
			t.Errorf("text = %q", got)
		}
		if c.Params.Has("thread_ts") {
			t.Errorf("thread_ts = %q, want none", c.Params.Get("thread_ts"))
		}
		var md struct {
			EventType    string         `json:"event_type"`
			EventPayload map[string]any `json:"event_payload"`
		}
		if err := json.Unmarshal([]byte(c.Params.Get("metadata")), &md); err != nil {
			t.Fatalf("metadata %q: %v", c.Params.Get("metadata"), err)
		}
		if md.EventType != MetadataEventType || md.EventPayload["idempotency_key"] != "Ev1:r" {
			t.Errorf("metadata = %+v", md)
		}
		if res["channel"] != "C1" || res["ts"] == "" || res["ts"] == nil {
			t.Errorf("result = %v", res)
		}
	})

	t.Run("thread replies in the event's thread, else under the message", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api)
		p := eventPayload(Params{Text: "x", Thread: true})
		succeed(t, reg, newJob("a", "post", p))
		p.Facts.ThreadTS = "1699999999.000001"
		succeed(t, reg, newJob("b", "post", p))
		p.Params.ThreadTS = "1699999999.000777" // explicit, as follow-ups carry
		succeed(t, reg, newJob("c", "post", p))

		calls := api.CallsTo("chat.postMessage")
		want := []string{"1700000000.000100", "1699999999.000001", "1699999999.000777"}
		for i, c := range calls {
			if got := c.Params.Get("thread_ts"); got != want[i] {
				t.Errorf("call %d thread_ts = %q, want %q", i, got, want[i])
			}
		}
	})

	t.Run("channel template and literal text", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api)
		p := eventPayload(Params{Channel: "C-{{.Team}}", Text: "{{not a template}}", Literal: true})
		succeed(t, reg, newJob("k", "post", p))
		c := mustOneCall(t, api, "chat.postMessage")
		// Literal: neither is rendered.
		if c.Params.Get("channel") != "C-{{.Team}}" || c.Params.Get("text") != "{{not a template}}" {
			t.Errorf("params = %v", c.Params)
		}
	})

	t.Run("blocks are sent", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api)
		blocks := `[{"type":"section","text":{"type":"mrkdwn","text":"*hi*"}}]`
		succeed(t, reg, newJob("k", "post", eventPayload(Params{Text: "hi", Blocks: json.RawMessage(blocks)})))
		c := mustOneCall(t, api, "chat.postMessage")
		assertSameJSON(t, c.Params.Get("blocks"), blocks)
	})

	t.Run("each post gets its own ts", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api)
		a := succeed(t, reg, newJob("a", "post", eventPayload(Params{Text: "x"})))
		b := succeed(t, reg, newJob("b", "post", eventPayload(Params{Text: "x"})))
		if a["ts"] == b["ts"] {
			t.Errorf("two posts share ts %v", a["ts"])
		}
	})

	t.Run("broken template parks", func(t *testing.T) {
		reg := newEffects(t, fakeslack.New(t, testToken))
		_, err := perform(t, reg, newJob("k", "post", eventPayload(Params{Text: "{{.Nope"})))
		mustFail(t, err, Permanent, "template")
	})

	t.Run("invalid blocks park without a call", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api)
		_, err := perform(t, reg, newJob("k", "post", eventPayload(Params{Text: "x", Blocks: json.RawMessage(`{"type":"section"}`)})))
		mustFail(t, err, Permanent, "invalid_blocks")
		if n := len(api.Calls()); n != 0 {
			t.Errorf("%d calls, want 0", n)
		}
	})
}

func TestReact(t *testing.T) {
	t.Run("adds the reaction to the event's message", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api)
		res := succeed(t, reg, newJob("k", "react", eventPayload(Params{Reaction: ":eyes:"})))
		c := mustOneCall(t, api, "reactions.add")
		if c.Params.Get("channel") != "C1" || c.Params.Get("timestamp") != "1700000000.000100" || c.Params.Get("name") != "eyes" {
			t.Errorf("params = %v", c.Params)
		}
		want := map[string]any{"channel": "C1", "ts": "1700000000.000100", "reaction": "eyes"}
		if !reflect.DeepEqual(res, want) {
			t.Errorf("result = %v, want %v", res, want)
		}
	})

	t.Run("already_reacted is success", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		api.Script("reactions.add", fakeslack.Err("already_reacted"))
		succeed(t, newEffects(t, api), newJob("k", "react", eventPayload(Params{Reaction: "eyes"})))
	})

	t.Run("other errors are classified", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		api.Script("reactions.add", fakeslack.Err("message_not_found"))
		_, err := perform(t, newEffects(t, api), newJob("k", "react", eventPayload(Params{Reaction: "eyes"})))
		f := mustFail(t, err, Permanent, "message_not_found")
		if !strings.Contains(f.Error(), "reactions.add") {
			t.Errorf("error %q does not name the method", f)
		}
	})
}

func TestUpdate(t *testing.T) {
	t.Run("updates the event's message by default", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		res := succeed(t, newEffects(t, api), newJob("k", "update", eventPayload(Params{Text: "done: {{.Text}}"})))
		c := mustOneCall(t, api, "chat.update")
		if c.Params.Get("channel") != "C1" || c.Params.Get("ts") != "1700000000.000100" || c.Params.Get("text") != "done: hello" {
			t.Errorf("params = %v", c.Params)
		}
		if res["channel"] != "C1" || res["ts"] != "1700000000.000100" {
			t.Errorf("result = %v", res)
		}
	})

	t.Run("channel and ts templates", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		p := eventPayload(Params{Text: "x", Channel: "{{.Channel}}X", TS: "{{.TS}}9"})
		succeed(t, newEffects(t, api), newJob("k", "update", p))
		c := mustOneCall(t, api, "chat.update")
		if c.Params.Get("channel") != "C1X" || c.Params.Get("ts") != "1700000000.0001009" {
			t.Errorf("params = %v", c.Params)
		}
	})

	t.Run("edit_window_closed parks", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		api.Script("chat.update", fakeslack.Err("edit_window_closed"))
		_, err := perform(t, newEffects(t, api), newJob("k", "update", eventPayload(Params{Text: "x"})))
		mustFail(t, err, Permanent, "edit_window_closed")
	})
}

func TestWebAPIFailures(t *testing.T) {
	tests := []struct {
		name   string
		resp   fakeslack.Response
		class  Class
		code   string
		after  time.Duration
		effect string
	}{
		{"429 with Retry-After waits that long", fakeslack.RateLimited("2"), RateLimited, "ratelimited", 2 * time.Second, "post"},
		{"429 without Retry-After waits the default", fakeslack.RateLimited(""), RateLimited, "http_429", DefaultRetryAfter, "post"},
		{"ratelimited error code waits the default", fakeslack.Err("ratelimited"), RateLimited, "ratelimited", DefaultRetryAfter, "react"},
		{"rate_limited error code waits the default", fakeslack.Err("rate_limited"), RateLimited, "rate_limited", DefaultRetryAfter, "post"},
		{"invalid_auth parks", fakeslack.Err("invalid_auth"), Permanent, "invalid_auth", 0, "post"},
		{"channel_not_found parks", fakeslack.Err("channel_not_found"), Permanent, "channel_not_found", 0, "post"},
		{"not_in_channel parks", fakeslack.Err("not_in_channel"), Permanent, "not_in_channel", 0, "update"},
		{"internal_error retries", fakeslack.Err("internal_error"), Retryable, "internal_error", 0, "post"},
		{"unknown code retries", fakeslack.Err("something_new"), Retryable, "something_new", 0, "react"},
		{"503 retries", fakeslack.Status(503), Retryable, "http_503", 0, "update"},
		{"404 parks", fakeslack.Status(404), Permanent, "http_404", 0, "post"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := fakeslack.New(t, testToken)
			api.Script(map[string]string{"post": "chat.postMessage", "react": "reactions.add", "update": "chat.update"}[tt.effect], tt.resp)
			_, err := perform(t, newEffects(t, api), newJob("k", tt.effect, eventPayload(Params{Text: "x", Reaction: "eyes"})))
			f := mustFail(t, err, tt.class, tt.code)
			if f.RetryAfter != tt.after {
				t.Errorf("RetryAfter = %v, want %v", f.RetryAfter, tt.after)
			}
		})
	}

	t.Run("wrong token gets invalid_auth and parks", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api, func(c *EffectConfig) { c.BotToken = "xoxb-wrong" })
		_, err := perform(t, reg, newJob("k", "post", eventPayload(Params{Text: "x"})))
		mustFail(t, err, Permanent, "invalid_auth")
	})

	t.Run("no bot token parks every Web API effect without a call", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		reg := newEffects(t, api, func(c *EffectConfig) { c.BotToken = "" })
		for _, effect := range []string{"post", "react", "update"} {
			_, err := perform(t, reg, newJob("k", effect, eventPayload(Params{Text: "x", Reaction: "eyes"})))
			f := mustFail(t, err, Permanent, "no_bot_token")
			if !strings.Contains(f.Error(), "SLACK_BOT_TOKEN is not set") {
				t.Errorf("%s: error %q does not name the variable", effect, f)
			}
		}
		if n := len(api.Calls()); n != 0 {
			t.Errorf("%d calls, want 0", n)
		}
	})

	t.Run("a call slower than the deadline retries as timeout", func(t *testing.T) {
		api := fakeslack.New(t, testToken)
		api.Script("chat.postMessage", fakeslack.Slow(10*time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := performCtx(t, ctx, newEffects(t, api), newJob("k", "post", eventPayload(Params{Text: "x"})))
		mustFail(t, err, Retryable, "timeout")
	})

	t.Run("nothing listening retries as network", func(t *testing.T) {
		reg := newEffects(t, nil, func(c *EffectConfig) { c.APIURL = "http://127.0.0.1:1" }) // no trailing slash: added
		_, err := perform(t, reg, newJob("k", "post", eventPayload(Params{Text: "x"})))
		mustFail(t, err, Retryable, "network")
	})
}

func TestLogEffect(t *testing.T) {
	reg := newEffects(t, nil)
	o, err := perform(t, reg, newJob("k", "log", eventPayload(Params{})))
	if err != nil || o.Result != "" || len(o.FollowUps) != 0 {
		t.Fatalf("log = %+v, %v", o, err)
	}
}

func TestRegistryNamesEveryEffect(t *testing.T) {
	reg := Effects(EffectConfig{})
	names := []string{"log", "post", "react", "update", "forward", "respond", "redeliver", "step", "step_deadline", "stream", "stream_stop"}
	for _, name := range names {
		if reg[name] == nil {
			t.Errorf("no performer for %q", name)
		}
	}
	if len(reg) != len(names) {
		t.Errorf("registry has %d effects, want %d", len(reg), len(names))
	}
}

// assertSameJSON compares two JSON texts by value.
func assertSameJSON(tb testing.TB, got, want string) {
	tb.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		tb.Fatalf("got %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		tb.Fatalf("want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		tb.Errorf("JSON = %s, want %s", got, want)
	}
}

func TestEffectsAreSafeForConcurrentWorkers(t *testing.T) {
	api := fakeslack.New(t, testToken)
	reg := newEffects(t, api)
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := perform(t, reg, newJob(fmt.Sprintf("k%d", i), "post", eventPayload(Params{Text: "{{.User}}"})))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	seen := map[string]bool{}
	for _, c := range api.CallsTo("chat.postMessage") {
		var md struct {
			EventPayload map[string]string `json:"event_payload"`
		}
		_ = json.Unmarshal([]byte(c.Params.Get("metadata")), &md)
		seen[md.EventPayload["idempotency_key"]] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct keys posted, want %d", len(seen), n)
	}
}
