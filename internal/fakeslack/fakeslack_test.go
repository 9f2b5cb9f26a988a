package fakeslack

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// call posts a form to the server the way a Slack client would.
func call(tb testing.TB, s *Server, method, bearer string, form url.Values) (int, http.Header, map[string]any) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+method, strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	return resp.StatusCode, resp.Header, body
}

func TestServer(t *testing.T) {
	t.Run("URL ends in a slash", func(t *testing.T) {
		if u := New(t, "t").URL(); !strings.HasSuffix(u, "/") || !strings.HasPrefix(u, "http://127.0.0.1:") {
			t.Errorf("URL = %q", u)
		}
	})

	t.Run("token from the header or the form; wrong or none is refused", func(t *testing.T) {
		s := New(t, "xoxb-good")
		form := url.Values{"channel": {"C1"}, "text": {"hi"}}
		if _, _, b := call(t, s, "chat.postMessage", "xoxb-good", form); b["ok"] != true {
			t.Errorf("bearer token: %v", b)
		}
		withToken := url.Values{"channel": {"C1"}, "text": {"hi"}, "token": {"xoxb-good"}}
		if _, _, b := call(t, s, "chat.postMessage", "", withToken); b["ok"] != true {
			t.Errorf("form token: %v", b)
		}
		if _, _, b := call(t, s, "chat.postMessage", "xoxb-bad", form); b["error"] != "invalid_auth" {
			t.Errorf("wrong token: %v", b)
		}
		if _, _, b := call(t, s, "chat.postMessage", "", form); b["error"] != "not_authed" {
			t.Errorf("no token: %v", b)
		}
		calls := s.CallsTo("chat.postMessage")
		if len(calls) != 4 || calls[0].Token != "xoxb-good" || calls[1].Token != "xoxb-good" || calls[2].Token != "xoxb-bad" {
			t.Errorf("calls = %+v", calls)
		}
	})

	t.Run("posts get unique ts and echo the message", func(t *testing.T) {
		s := New(t, "t")
		form := url.Values{"channel": {"C9"}, "text": {"hi"}, "thread_ts": {"1.2"}}
		_, _, a := call(t, s, "chat.postMessage", "t", form)
		_, _, b := call(t, s, "chat.postMessage", "t", form)
		if a["ts"] == b["ts"] || a["channel"] != "C9" {
			t.Errorf("a = %v, b = %v", a, b)
		}
		msg, _ := a["message"].(map[string]any)
		if msg["text"] != "hi" || msg["thread_ts"] != "1.2" || msg["ts"] != a["ts"] {
			t.Errorf("message = %v", msg)
		}
	})

	t.Run("scripts run in order per method, then succeed", func(t *testing.T) {
		s := New(t, "t")
		s.Script("reactions.add", Err("already_reacted"), RateLimited("4"), Status(503))
		form := url.Values{"name": {"eyes"}}
		if _, _, b := call(t, s, "chat.update", "t", form); b["ok"] != true {
			t.Errorf("other method: %v", b)
		}
		if _, _, b := call(t, s, "reactions.add", "t", form); b["error"] != "already_reacted" {
			t.Errorf("1st: %v", b)
		}
		if code, h, _ := call(t, s, "reactions.add", "t", form); code != 429 || h.Get("Retry-After") != "4" {
			t.Errorf("2nd: %d %v", code, h)
		}
		if code, _, _ := call(t, s, "reactions.add", "t", form); code != 503 {
			t.Errorf("3rd: %d", code)
		}
		if _, _, b := call(t, s, "reactions.add", "t", form); b["ok"] != true {
			t.Errorf("4th: %v", b)
		}
		if n := len(s.Calls()); n != 5 {
			t.Errorf("%d calls, want 5", n)
		}
	})
}

func TestHook(t *testing.T) {
	h := NewHook(t)
	h.Script(Response{Status: 404, Body: "expired_url"}, Response{Body: "ok"}, Slow(10*time.Millisecond))
	want := []struct {
		status int
		body   string
	}{{404, "expired_url"}, {200, "ok"}, {200, `{"ok":true}`}, {200, `{"ok":true}`}}
	for i, w := range want {
		resp, err := http.Post(h.URL(), "application/json", strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != w.status || string(b) != w.body {
			t.Errorf("post %d: %d %q, want %d %q", i, resp.StatusCode, b, w.status, w.body)
		}
	}
	posts := h.Posts()
	if len(posts) != 4 {
		t.Fatalf("%d posts, want 4", len(posts))
	}
	var v struct{ N int }
	posts[0].JSON(t, &v)
	if v.N != 1 || posts[0].Header.Get("Content-Type") != "application/json" {
		t.Errorf("post = %+v", posts[0])
	}
}
