package sweep

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
)

func commandJob(url string, p Params) Job {
	return newJob("cmd1:deploy", "respond", Payload{
		Route: "deploy", Source: SourceCommand, Params: p,
		Facts: Facts{EventID: "cmd1", User: "U1", Channel: "C1", Command: "/deploy", Text: "api v2", ResponseURL: url},
	})
}

func TestRespond(t *testing.T) {
	t.Run("posts the rendered message as JSON to the response_url", func(t *testing.T) {
		h := fakeslack.NewHook(t)
		reg := newEffects(t, nil, func(c *EffectConfig) { c.BotToken = "" }) // respond needs no token
		p := Params{Text: "Deployed {{.Text}}", ResponseType: "in_channel", ReplaceOriginal: true, Blocks: json.RawMessage(`[{"type":"divider"}]`)}
		res := succeed(t, reg, commandJob(h.URL(), p))
		if res["status"] != float64(200) {
			t.Errorf("result = %v", res)
		}
		post := mustOnePost(t, h)
		if ct := post.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		if a := post.Header.Get("Authorization"); a != "" {
			t.Errorf("Authorization = %q sent to a response_url", a)
		}
		assertSameJSON(t, string(post.Body),
			`{"text":"Deployed api v2","blocks":[{"type":"divider"}],"response_type":"in_channel","replace_original":true}`)
	})

	t.Run("Params.ResponseURL wins over the request's", func(t *testing.T) {
		h := fakeslack.NewHook(t)
		j := commandJob("http://127.0.0.1:1/never", Params{Text: "x", ResponseURL: h.URL()})
		succeed(t, newEffects(t, nil), j)
		mustOnePost(t, h)
	})

	for name, resp := range map[string]fakeslack.Response{
		`"ok" text`:    {Body: "ok"},
		`{"ok":true}`:  {Body: `{"ok":true}`},
		"204 no body":  {Status: http.StatusNoContent},
		"other 2xx ok": {Status: http.StatusAccepted, Body: `{"accepted":1}`},
	} {
		t.Run(name+" is success", func(t *testing.T) {
			h := fakeslack.NewHook(t)
			h.Script(resp)
			succeed(t, newEffects(t, nil), commandJob(h.URL(), Params{Text: "x"}))
		})
	}

	tests := []struct {
		name  string
		resp  fakeslack.Response
		class Class
		code  string
		after time.Duration
		msg   string // in the error, when set
	}{
		{"404 expired_url parks", fakeslack.Response{Status: 404, Body: "expired_url"}, Permanent, "expired_url", 0, "expired or used up"},
		{"404 without a body parks", fakeslack.Response{Status: 404, Body: " "}, Permanent, "expired_url", 0, "5 uses within 30 minutes"},
		{"410 used_url parks", fakeslack.Response{Status: 410, Body: "used_url"}, Permanent, "used_url", 0, "expired or used up"},
		{"200 ok:false invalid_blocks parks", fakeslack.Err("invalid_blocks"), Permanent, "invalid_blocks", 0, "response_url"},
		{"200 ok:false internal_error retries", fakeslack.Err("internal_error"), Retryable, "internal_error", 0, ""},
		{"200 bare code parks", fakeslack.Response{Body: "no_text"}, Permanent, "no_text", 0, ""},
		{"400 with a code parks with it", fakeslack.Response{Status: 400, Body: "invalid_blocks"}, Permanent, "invalid_blocks", 0, "HTTP 400"},
		{"400 parks", fakeslack.Status(400), Permanent, "http_400", 0, ""},
		{"500 retries", fakeslack.Status(500), Retryable, "http_500", 0, ""},
		{"408 retries", fakeslack.Status(408), Retryable, "http_408", 0, ""},
		{"429 waits", fakeslack.Response{Status: 429, RetryAfter: "3"}, RateLimited, "http_429", 3 * time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakeslack.NewHook(t)
			h.Script(tt.resp)
			_, err := perform(t, newEffects(t, nil), commandJob(h.URL(), Params{Text: "x"}))
			f := mustFail(t, err, tt.class, tt.code)
			if f.RetryAfter != tt.after {
				t.Errorf("RetryAfter = %v, want %v", f.RetryAfter, tt.after)
			}
			if !strings.Contains(f.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", f, tt.msg)
			}
		})
	}

	t.Run("an unparseable response_url parks as invalid_url without its secret path", func(t *testing.T) {
		// Issue 21.7: the parse error quoted the whole URL into last_error.
		const secret = "T0001/1234567890/s3cr3tTokenPart"
		for _, url := range []string{
			"https://hooks.slack.com/commands/" + secret + "\x7f", // a control character
			"https://hooks.slack.com/commands/" + secret + "%zz",  // a bad escape
			"https://hooks.slack.com:port/commands/" + secret,     // a bad port
		} {
			_, err := perform(t, newEffects(t, nil), commandJob(url, Params{Text: "x"}))
			f := mustFail(t, err, Permanent, "invalid_url")
			if strings.Contains(f.Error(), "s3cr3t") || strings.Contains(f.Error(), "1234567890") {
				t.Errorf("%q: error %q quotes the response_url's path", url, f)
			}
		}
	})

	t.Run("no response_url parks", func(t *testing.T) {
		_, err := perform(t, newEffects(t, nil), commandJob("", Params{Text: "x"}))
		mustFail(t, err, Permanent, "no_response_url")
	})

	t.Run("nothing listening retries as network", func(t *testing.T) {
		_, err := perform(t, newEffects(t, nil), commandJob("http://127.0.0.1:1/r", Params{Text: "x"}))
		mustFail(t, err, Retryable, "network")
	})
}
