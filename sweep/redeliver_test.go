package sweep

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

const appSecret = "the-apps-signing-secret"

// appAnswer is one scripted answer of a fake app.
type appAnswer struct {
	status int
	ctype  string // "" sends no Content-Type (as Bolt does for ack('text'))
	body   string
	header map[string]string
}

// seen is one request the fake app received.
type seen struct {
	header http.Header
	body   []byte
}

// fakeApp is an httptest target answering from a script.
type fakeApp struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script []appAnswer
	got    []seen
}

func newFakeApp(t *testing.T, script ...appAnswer) *fakeApp {
	a := &fakeApp{script: script}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.got = append(a.got, seen{header: r.Header.Clone(), body: b})
		ans := appAnswer{status: 200}
		if len(a.script) > 0 {
			ans, a.script = a.script[0], a.script[1:]
		}
		a.mu.Unlock()
		for k, v := range ans.header {
			w.Header().Set(k, v)
		}
		if ans.ctype != "" {
			w.Header().Set("Content-Type", ans.ctype)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing: Bolt sends none for text
		}
		w.WriteHeader(ans.status)
		_, _ = io.WriteString(w, ans.body)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeApp) seen() []seen {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

func withRedeliverSecret(c *EffectConfig) { c.RedeliverSecret = appSecret }

const commandBody = "token=x&team_id=T1&channel_id=C1&user_id=U1&command=%2Fdeploy&text=prod&response_url=http%3A%2F%2F127.0.0.1%3A1%2Fr&trigger_id=13.14.ab"

// redeliverJob is a claimed row carrying a command's stored bytes.
func redeliverJob(url, source, typ string) Job {
	p := Payload{Route: "app", Source: source, Params: Params{URL: url},
		Facts: Facts{EventID: "cmd:13.14.ab", Type: typ, ResponseURL: "http://127.0.0.1:1/r"}}
	j := newJob("cmd:13.14.ab:app", "redeliver", p)
	j.Row.RequestID = "cmd:13.14.ab"
	j.Row.Request = &store.Request{ContentType: ContentTypeForm, Body: []byte(commandBody)}
	j.Attempt = 2
	return j
}

func TestRedeliver(t *testing.T) {
	t.Run("posts Slack's bytes and content type exactly, signed afresh, with key and attempt and no retry headers", func(t *testing.T) {
		app := newFakeApp(t)
		res := succeed(t, newEffects(t, nil, withRedeliverSecret), redeliverJob(app.srv.URL, SourceCommand, ""))
		if res["status"] != float64(200) || res["follow_up"] != nil {
			t.Errorf("result = %v", res)
		}
		got := app.seen()
		if len(got) != 1 {
			t.Fatalf("%d requests, want 1", len(got))
		}
		h, body := got[0].header, got[0].body
		if string(body) != commandBody {
			t.Errorf("body = %q, want Slack's bytes", body)
		}
		for name, want := range map[string]string{
			"Content-Type": ContentTypeForm, "Idempotency-Key": "cmd:13.14.ab:app", "X-Ackd-Attempt": "2",
			"X-Slack-Request-Timestamp": strconv.FormatInt(testNow.Unix(), 10),
		} {
			if v := h.Values(name); len(v) != 1 || v[0] != want {
				t.Errorf("%s = %q, want exactly [%q]", name, v, want)
			}
		}
		m := hmac.New(sha256.New, []byte(appSecret))
		m.Write([]byte("v0:" + h.Get("X-Slack-Request-Timestamp") + ":" + commandBody))
		if v := h.Values("X-Slack-Signature"); len(v) != 1 || v[0] != "v0="+hex.EncodeToString(m.Sum(nil)) {
			t.Errorf("X-Slack-Signature = %q", v)
		}
		for _, name := range []string{"X-Slack-Retry-Num", "X-Slack-Retry-Reason"} {
			if _, ok := h[name]; ok {
				t.Errorf("%s sent", name)
			}
		}
	})

	t.Run("the answer table", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			ans   appAnswer
			class Class
			code  string // "" = done
		}{
			{"2xx empty: done", appAnswer{status: 200}, 0, ""},
			{"204: done", appAnswer{status: 204}, 0, ""},
			{"401: retry, nothing ran", appAnswer{status: 401, body: "invalid signature"}, Retryable, "http_401"},
			{"404: park, the listener may have run", appAnswer{status: 404}, Permanent, "http_404"},
			{"400: park", appAnswer{status: 400}, Permanent, "http_400"},
			{"413: park", appAnswer{status: 413}, Permanent, "http_413"},
			{"403: park", appAnswer{status: 403}, Permanent, "http_403"},
			{"500 (a listener threw): retry", appAnswer{status: 500}, Retryable, "http_500"},
			{"503: retry", appAnswer{status: 503}, Retryable, "http_503"},
			{"302: park, never followed", appAnswer{status: 302, header: map[string]string{"Location": "/elsewhere"}}, Permanent, "http_302"},
			{"301: park, never followed", appAnswer{status: 301, header: map[string]string{"Location": "/elsewhere"}}, Permanent, "http_301"},
			{"429: at Retry-After", appAnswer{status: 429, header: map[string]string{"Retry-After": "7"}}, RateLimited, "http_429"},
			{"429 without Retry-After: 30 s", appAnswer{status: 429}, RateLimited, "http_429"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				app := newFakeApp(t, tc.ans)
				_, err := perform(t, newEffects(t, nil, withRedeliverSecret), redeliverJob(app.srv.URL+"/slack/events", SourceCommand, ""))
				if tc.code == "" {
					if err != nil {
						t.Fatalf("err = %v, want done", err)
					}
				} else {
					f := mustFail(t, err, tc.class, tc.code)
					if tc.class == RateLimited {
						want := DefaultRetryAfter
						if v := tc.ans.header["Retry-After"]; v != "" {
							want = 7 * time.Second
						}
						if f.RetryAfter != want {
							t.Errorf("RetryAfter = %s, want %s", f.RetryAfter, want)
						}
					}
				}
				if n := len(app.seen()); n != 1 {
					t.Fatalf("app saw %d requests, want 1 (a redirect must not be followed)", n)
				}
			})
		}
	})

	t.Run("network error and timeout retry", func(t *testing.T) {
		app := newFakeApp(t)
		url := app.srv.URL
		app.srv.Close()
		_, err := perform(t, newEffects(t, nil, withRedeliverSecret), redeliverJob(url, SourceEvent, ""))
		mustFail(t, err, Retryable, "network")

		release := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer slow.Close()
		defer close(release)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = performCtx(t, ctx, newEffects(t, nil, withRedeliverSecret), redeliverJob(slow.URL, SourceEvent, ""))
		mustFail(t, err, Retryable, "timeout")
	})

	t.Run("ack('text') of a command becomes one respond row with the text", func(t *testing.T) {
		app := newFakeApp(t, appAnswer{status: 200, body: "On it: prod"})
		o, err := perform(t, newEffects(t, nil, withRedeliverSecret), redeliverJob(app.srv.URL, SourceCommand, ""))
		res := mustSucceed(t, o, err)
		if len(o.FollowUps) != 1 || res["follow_up"] != "cmd:13.14.ab:app:reply" {
			t.Fatalf("follow-ups %+v, result %v", o.FollowUps, res)
		}
		fu := o.FollowUps[0]
		p, err := DecodePayload(fu.Payload)
		if err != nil || fu.Effect != "respond" || p.Params.Text != "On it: prod" || !p.Params.Literal ||
			p.Params.ResponseURL != "http://127.0.0.1:1/r" {
			t.Fatalf("follow-up %+v %+v (%v)", fu, p.Params, err)
		}
	})

	t.Run("ack({blocks, response_type}) keeps response_type and blocks", func(t *testing.T) {
		app := newFakeApp(t, appAnswer{status: 200, ctype: "application/json; charset=utf-8",
			body: `{"response_type":"in_channel","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"hi"}}]}`})
		o, err := perform(t, newEffects(t, nil, withRedeliverSecret), redeliverJob(app.srv.URL, SourceInteraction, "block_actions"))
		mustSucceed(t, o, err)
		if len(o.FollowUps) != 1 {
			t.Fatalf("follow-ups %+v", o.FollowUps)
		}
		p, _ := DecodePayload(o.FollowUps[0].Payload)
		if p.Params.ResponseType != "in_channel" || !present(p.Params.Blocks) {
			t.Fatalf("params %+v", p.Params)
		}
	})

	t.Run("a view_submission answer comes back as the reply, with no follow-up", func(t *testing.T) {
		answer := `{"response_action":"errors","errors":{"b":"bad"}}`
		app := newFakeApp(t, appAnswer{status: 200, ctype: "application/json", body: answer})
		o, err := perform(t, newEffects(t, nil, withRedeliverSecret), redeliverJob(app.srv.URL, SourceInteraction, TypeViewSubmission))
		mustSucceed(t, o, err)
		if string(o.Reply) != answer || o.ReplyType != "application/json" || len(o.FollowUps) != 0 {
			t.Fatalf("reply %q (%q), follow-ups %+v", o.Reply, o.ReplyType, o.FollowUps)
		}
	})

	t.Run("bad input parks with a clear reason", func(t *testing.T) {
		app := newFakeApp(t)
		for _, tc := range []struct {
			name string
			mod  func(*Job, *[]func(*EffectConfig))
			code string
		}{
			{"no signing secret", func(j *Job, m *[]func(*EffectConfig)) { *m = nil }, "no_signing_secret"},
			{"stored request missing", func(j *Job, _ *[]func(*EffectConfig)) { j.Row.Request = nil }, "no_request"},
			{"content type Slack never sends", func(j *Job, _ *[]func(*EffectConfig)) {
				j.Row.Request.ContentType = "application/x-www-form-urlencoded; charset=utf-8"
			}, "bad_request"},
			{"empty body", func(j *Job, _ *[]func(*EffectConfig)) { j.Row.Request.Body = nil }, "bad_request"},
			{"no url", func(j *Job, _ *[]func(*EffectConfig)) { j.Payload.Params.URL = "" }, "no_url"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				j := redeliverJob(app.srv.URL, SourceCommand, "")
				mods := []func(*EffectConfig){withRedeliverSecret}
				tc.mod(&j, &mods)
				_, err := perform(t, newEffects(t, nil, mods...), j)
				mustFail(t, err, Permanent, tc.code)
			})
		}
		if n := len(app.seen()); n != 0 {
			t.Fatalf("the app saw %d requests from rows that could not be performed", n)
		}
	})

	t.Run("a process without a signing secret does not claim redeliver rows", func(t *testing.T) {
		if why, ok := (EffectConfig{BotToken: "x"}).Unavailable()["redeliver"]; !ok || !strings.Contains(why, "SLACK_SIGNING_SECRET") {
			t.Errorf("Unavailable()[redeliver] = %q, %v", why, ok)
		}
		if _, ok := (EffectConfig{RedeliverSecret: "s"}).Unavailable()["redeliver"]; ok {
			t.Error("with a secret, redeliver is unavailable")
		}
	})
}
