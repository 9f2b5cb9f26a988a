package sweep

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/ackd/ackd/internal/slacksig"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
)

const testSecret = "forward-secret"

func forwardJob(h *fakeslack.Hook, source string) Job {
	p := eventPayload(Params{URL: h.URL()})
	p.Source = source
	if source != SourceEvent {
		p.Facts.ResponseURL = "http://127.0.0.1:1/response"
	}
	j := newJob("Ev1:fwd", "forward", p)
	j.Attempt = 3
	return j
}

func withSecret(c *EffectConfig) { c.ForwardSecret = testSecret }

// mustOnePost returns the only request the hook received.
func mustOnePost(tb testing.TB, h *fakeslack.Hook) fakeslack.Post {
	tb.Helper()
	posts := h.Posts()
	if len(posts) != 1 {
		tb.Fatalf("%d posts, want 1", len(posts))
	}
	return posts[0]
}

func TestForward(t *testing.T) {
	t.Run("posts the envelope signed, with key and attempt", func(t *testing.T) {
		h := fakeslack.NewHook(t)
		h.Script(fakeslack.Response{Body: "thanks"})
		res := succeed(t, newEffects(t, nil, withSecret), forwardJob(h, SourceEvent))
		if res["status"] != float64(200) {
			t.Errorf("result = %v", res)
		}

		post := mustOnePost(t, h)
		hd := post.Header
		if hd.Get("Content-Type") != "application/json" || hd.Get("Idempotency-Key") != "Ev1:fwd" || hd.Get("X-Ackd-Attempt") != "3" {
			t.Errorf("headers = %v", hd)
		}
		ts := hd.Get("X-Ackd-Timestamp")
		if ts != strconv.FormatInt(testNow.Unix(), 10) {
			t.Errorf("X-Ackd-Timestamp = %q, want %d", ts, testNow.Unix())
		}
		// Verify as a handler would, independently of Sign.
		m := hmac.New(sha256.New, []byte(testSecret))
		m.Write([]byte("v0:" + ts + ":"))
		m.Write(post.Body)
		want := "v0=" + hex.EncodeToString(m.Sum(nil))
		if !hmac.Equal([]byte(hd.Get("X-Ackd-Signature")), []byte(want)) {
			t.Errorf("signature = %q, want %q", hd.Get("X-Ackd-Signature"), want)
		}

		var body struct {
			IdempotencyKey string          `json:"idempotency_key"`
			Attempt        int             `json:"attempt"`
			Route, Source  string          `json:"-"`
			Envelope       json.RawMessage `json:"envelope"`
		}
		post.JSON(t, &body)
		if body.IdempotencyKey != "Ev1:fwd" || body.Attempt != 3 {
			t.Errorf("body = %s", post.Body)
		}
		assertSameJSON(t, string(body.Envelope), `{"type":"event_callback","event_id":"Ev1"}`)
		var all map[string]any
		post.JSON(t, &all)
		if all["route"] != "r" || all["source"] != "event" {
			t.Errorf("body = %s", post.Body)
		}
	})

	t.Run("no secret sends no signature", func(t *testing.T) {
		h := fakeslack.NewHook(t)
		succeed(t, newEffects(t, nil), forwardJob(h, SourceEvent))
		if _, ok := mustOnePost(t, h).Header["X-Ackd-Signature"]; ok {
			t.Error("X-Ackd-Signature sent without a secret")
		}
	})

	t.Run("failures are classified", func(t *testing.T) {
		tests := []struct {
			name  string
			resp  fakeslack.Response
			class Class
			code  string
			after time.Duration
		}{
			{"500 retries", fakeslack.Status(500), Retryable, "http_500", 0},
			{"502 retries", fakeslack.Status(502), Retryable, "http_502", 0},
			{"408 retries", fakeslack.Status(408), Retryable, "http_408", 0},
			{"400 parks", fakeslack.Status(400), Permanent, "http_400", 0},
			{"403 parks", fakeslack.Status(403), Permanent, "http_403", 0},
			{"429 honours Retry-After", fakeslack.Response{Status: 429, RetryAfter: "7"}, RateLimited, "http_429", 7 * time.Second},
			{"429 with an HTTP date", fakeslack.Response{Status: 429, RetryAfter: testNow.Add(90 * time.Second).UTC().Format(http.TimeFormat)}, RateLimited, "http_429", 90 * time.Second},
			{"429 without Retry-After waits the default", fakeslack.Response{Status: 429}, RateLimited, "http_429", DefaultRetryAfter},
			{"429 with garbage Retry-After waits the default", fakeslack.Response{Status: 429, RetryAfter: "soon"}, RateLimited, "http_429", DefaultRetryAfter},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				h := fakeslack.NewHook(t)
				h.Script(tt.resp)
				_, err := perform(t, newEffects(t, nil), forwardJob(h, SourceEvent))
				f := mustFail(t, err, tt.class, tt.code)
				if f.RetryAfter != tt.after {
					t.Errorf("RetryAfter = %v, want %v", f.RetryAfter, tt.after)
				}
			})
		}
	})

	t.Run("a handler slower than the deadline retries as timeout", func(t *testing.T) {
		h := fakeslack.NewHook(t)
		h.Script(fakeslack.Slow(10 * time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := performCtx(t, ctx, newEffects(t, nil), forwardJob(h, SourceEvent))
		mustFail(t, err, Retryable, "timeout")
	})

	t.Run("nothing listening retries as network", func(t *testing.T) {
		p := eventPayload(Params{URL: "http://127.0.0.1:1/slack"})
		_, err := perform(t, newEffects(t, nil), newJob("k", "forward", p))
		mustFail(t, err, Retryable, "network")
	})

	t.Run("a stored request that is gone parks, nothing is sent", func(t *testing.T) {
		h := fakeslack.NewHook(t)
		j := forwardJob(h, SourceEvent)
		j.Payload.Raw, j.Row.RequestID = nil, "Ev1" // names a request, none came with the claim
		_, err := perform(t, newEffects(t, nil), j)
		mustFail(t, err, Permanent, "no_request")
		if n := len(h.Posts()); n != 0 {
			t.Errorf("%d requests sent to the handler, want none", n)
		}
	})

	t.Run("no url parks", func(t *testing.T) {
		_, err := perform(t, newEffects(t, nil), newJob("k", "forward", eventPayload(Params{})))
		mustFail(t, err, Permanent, "no_url")
	})
}

func TestForwardReply(t *testing.T) {
	t.Run("event reply becomes one threaded post", func(t *testing.T) {
		h := fakeslack.NewHook(t)
		reply := `{"text":"pong {{.User}}","blocks":[{"type":"divider"}]}`
		h.Script(fakeslack.Response{Body: reply})
		o, err := perform(t, newEffects(t, nil), forwardJob(h, SourceEvent))
		res := mustSucceed(t, o, err)
		if res["follow_up"] != "Ev1:fwd:reply" {
			t.Errorf("result = %v", res)
		}
		if len(o.FollowUps) != 1 {
			t.Fatalf("%d follow-ups, want 1", len(o.FollowUps))
		}
		fu := o.FollowUps[0]
		if fu.Key != "Ev1:fwd:reply" || fu.Effect != "post" {
			t.Errorf("follow-up = %s %s", fu.Key, fu.Effect)
		}
		p, err := DecodePayload(fu.Payload)
		if err != nil {
			t.Fatal(err)
		}
		want := Params{Text: "pong {{.User}}", Blocks: json.RawMessage(`[{"type":"divider"}]`), Literal: true, Channel: "C1", ThreadTS: "1700000000.000100"}
		assertParams(t, p.Params, want)
		if p.Source != SourceReply || p.Route != "r:reply" || p.Facts.EventID != "Ev1" || p.Facts.Channel != "C1" {
			t.Errorf("payload = %+v", p)
		}
		assertSameJSON(t, string(p.Raw), reply)
	})

	t.Run("event reply in an existing thread stays in it", func(t *testing.T) {
		h := fakeslack.NewHook(t)
		h.Script(fakeslack.Response{Body: `{"text":"x"}`})
		j := forwardJob(h, SourceEvent)
		j.Payload.Facts.ThreadTS = "1699999999.000001"
		o, err := perform(t, newEffects(t, nil), j)
		mustSucceed(t, o, err)
		p, _ := DecodePayload(o.FollowUps[0].Payload)
		if p.Params.ThreadTS != "1699999999.000001" {
			t.Errorf("thread_ts = %q", p.Params.ThreadTS)
		}
	})

	t.Run(`event reply with "thread": false posts to the channel`, func(t *testing.T) {
		h := fakeslack.NewHook(t)
		h.Script(fakeslack.Response{Body: `{"text":"x","thread":false}`})
		o, err := perform(t, newEffects(t, nil), forwardJob(h, SourceEvent))
		mustSucceed(t, o, err)
		p, _ := DecodePayload(o.FollowUps[0].Payload)
		if p.Params.ThreadTS != "" || p.Params.Channel != "C1" {
			t.Errorf("params = %+v", p.Params)
		}
	})

	for _, source := range []string{SourceCommand, SourceInteraction} {
		t.Run(source+" reply becomes one respond", func(t *testing.T) {
			h := fakeslack.NewHook(t)
			h.Script(fakeslack.Response{Body: `{"text":"deployed","response_type":"in_channel","replace_original":true}`})
			o, err := perform(t, newEffects(t, nil), forwardJob(h, source))
			mustSucceed(t, o, err)
			if len(o.FollowUps) != 1 {
				t.Fatalf("%d follow-ups, want 1", len(o.FollowUps))
			}
			fu := o.FollowUps[0]
			if fu.Key != "Ev1:fwd:reply" || fu.Effect != "respond" {
				t.Errorf("follow-up = %s %s", fu.Key, fu.Effect)
			}
			p, _ := DecodePayload(fu.Payload)
			want := Params{Text: "deployed", Literal: true, ResponseURL: "http://127.0.0.1:1/response", ResponseType: "in_channel", ReplaceOriginal: true}
			assertParams(t, p.Params, want)
			if p.Source != SourceReply {
				t.Errorf("source = %q", p.Source)
			}
		})
	}

	for name, resp := range map[string]fakeslack.Response{
		"plain text":              {Body: "ok"},
		"204 no content":          {Status: http.StatusNoContent},
		"JSON without text":       {Body: `{"ok":true}`},
		"JSON array":              {Body: `[{"text":"x"}]`},
		"JSON with empty text":    {Body: `{"text":""}`},
		"JSON with text not text": {Body: `{"text":42}`},
	} {
		t.Run(name+" reply adds no follow-up", func(t *testing.T) {
			h := fakeslack.NewHook(t)
			h.Script(resp)
			o, err := perform(t, newEffects(t, nil), forwardJob(h, SourceEvent))
			mustSucceed(t, o, err)
			if len(o.FollowUps) != 0 {
				t.Errorf("follow-ups = %+v, want none", o.FollowUps)
			}
		})
	}
}

func TestSign(t *testing.T) {
	got := slacksig.Sign("secret", "1700000000", []byte(`{"a":1}`))
	m := hmac.New(sha256.New, []byte("secret"))
	m.Write([]byte(`v0:1700000000:{"a":1}`))
	if want := "v0=" + hex.EncodeToString(m.Sum(nil)); got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
	if !strings.HasPrefix(got, "v0=") || len(got) != 3+64 {
		t.Errorf("Sign = %q", got)
	}
}

func assertParams(tb testing.TB, got, want Params) {
	tb.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	assertSameJSON(tb, string(g), string(w))
}
