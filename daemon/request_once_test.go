package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
)

// No outbox row carries a copy of Slack's request (issue 13: the ~0.9 KB
// envelope used to be copied into every route's row, and rewritten with it
// by every claim and completion). Rows whose effect needs the request — a
// forward, a template over .Event — name the one copy stored with the
// intent, written once however many routes need it; the others carry only
// facts and parameters. The forward still gets the envelope, and the
// template still sees .Event.
func TestRequestIsStoredOnceAndRowsCarryNoCopy(t *testing.T) {
	t.Parallel()
	fake := fakeslack.New(t, "xoxb-test")
	hook := fakeslack.NewHook(t)
	hook.Script(fakeslack.Response{Body: `{}`}, fakeslack.Response{Body: `{}`}, fakeslack.Response{Body: `{}`})
	cfg := fmt.Sprintf(`
[slack]
api_url = %q

[sweep]
interval = "50ms"

[[route]]
name   = "fwd-a"
event  = "app_mention"
effect = "forward"
url    = %q

[[route]]
name   = "fwd-b"
event  = "app_mention"
effect = "forward"
url    = %q

[[route]]
name   = "echo"
event  = "app_mention"
effect = "post"
text   = "seen {{.Event.type}} at {{.Event.event_ts}}"

[[route]]
name   = "note"
event  = "app_mention"
effect = "log"

[[route]]
name    = "deploy"
command = "/deploy"
effect  = "forward"
url     = %q
`, fake.URL(), hook.URL(), hook.URL(), hook.URL())
	s := startServer(t, configFor(t, cfg), daemon.Options{Secrets: config.Secrets{BotToken: "xoxb-test"}})

	inner := mention("C1", "1700000000.000100", "hello")
	inner["event_ts"] = "1700000000.000100"
	body := eventBody("EvOnce1", inner)
	if r := s.postEvent(body); r.Status != http.StatusOK {
		t.Fatalf("event: status %d %q", r.Status, r.Body)
	}
	form := url.Values{"command": {"/deploy"}, "text": {"api now"}, "trigger_id": {"tr.once.1"},
		"response_url": {"https://hooks.slack.com/commands/T1/1/x"}, "user_id": {"U1"}}
	if r := s.postForm("/slack/commands", []byte(form.Encode())); r.Status != http.StatusOK {
		t.Fatalf("command: status %d %q", r.Status, r.Body)
	}

	// Storage: one copy per request, and no row holds one of its own.
	if n := s.count(`SELECT count(*) FROM slack_requests`); n != 2 {
		t.Errorf("%d stored requests, want 2 (one for the event, whatever its three routes that need it; one for the command)", n)
	}
	if n := s.count(`SELECT count(*) FROM slack_requests WHERE event_id = 'EvOnce1' AND CAST(body AS TEXT) = ?`, string(body)); n != 1 {
		t.Errorf("the event's stored request is not Slack's exact bytes (%d rows match)", n)
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE json_type(payload, '$.raw') IS NOT NULL`); n != 0 {
		t.Errorf("%d rows carry a copy of the request in their payload, want none", n)
	}
	for key, want := range map[string]string{
		"EvOnce1:fwd-a": "EvOnce1", "EvOnce1:fwd-b": "EvOnce1", "EvOnce1:echo": "EvOnce1", "EvOnce1:note": "",
		"cmd:tr.once.1:deploy": "cmd:tr.once.1",
	} {
		var got string
		if err := s.db().QueryRow(`SELECT coalesce(request_id, '') FROM outbox WHERE idempotency_key = ?`, key).Scan(&got); err != nil {
			t.Fatalf("row %s: %v", key, err)
		}
		if got != want {
			t.Errorf("row %s names request %q, want %q", key, got, want)
		}
	}

	// Performing: both forwards get the envelope, the command's forward its
	// form as a JSON object of strings, the template sees .Event.
	for _, key := range []string{"EvOnce1:fwd-a", "EvOnce1:fwd-b", "EvOnce1:echo", "EvOnce1:note", "cmd:tr.once.1:deploy"} {
		cmdWaitDone(t, s, key)
	}
	var env map[string]any
	_ = json.Unmarshal(body, &env)
	envelopes := map[string]any{}
	for _, p := range hook.Posts() {
		var fb struct {
			Route    string         `json:"route"`
			Envelope map[string]any `json:"envelope"`
		}
		p.JSON(t, &fb)
		envelopes[fb.Route] = fb.Envelope
	}
	for _, r := range []string{"fwd-a", "fwd-b"} {
		if !reflect.DeepEqual(envelopes[r], env) {
			t.Errorf("forward %s: envelope\n got %v\nwant %v", r, envelopes[r], env)
		}
	}
	wantForm := map[string]any{}
	for k, v := range form {
		wantForm[k] = v[0]
	}
	if !reflect.DeepEqual(envelopes["deploy"], wantForm) {
		t.Errorf("command forward: envelope\n got %v\nwant %v", envelopes["deploy"], wantForm)
	}
	calls := fake.CallsTo("chat.postMessage")
	if len(calls) != 1 || !strings.Contains(calls[0].Params.Get("text"), "seen app_mention at 1700000000.000100") {
		t.Errorf("chat.postMessage calls %+v, want one with the .Event template rendered", calls)
	}
}
