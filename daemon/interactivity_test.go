package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
)

// Interactivity (DESIGN §4): the form field "payload" holds the interaction
// JSON; it is recorded under "ix:"+trigger_id and answered 200 with an empty
// body (which also closes a view_submission's modal), or 500 when it could
// not be recorded in time.

// ixBlockActions is a block_actions payload for a click on the button
// actionID in a message, as Slack sends it.
func ixBlockActions(trigger, actionID, actionTS, responseURL string) map[string]any {
	p := map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": "U061F7AUR", "username": "steve", "name": "steve", "team_id": "T0001"},
		"api_app_id": "A0KRD7HC3",
		"token":      "gIkuvaNzQIHg97ATvDxqgjtO",
		"container": map[string]any{"type": "message", "message_ts": "1515449600.000600",
			"channel_id": "C0LAN2Q65", "is_ephemeral": false},
		"trigger_id": trigger,
		"team":       map[string]any{"id": "T0001", "domain": "example"},
		"channel":    map[string]any{"id": "C0LAN2Q65", "name": "general"},
		"message": map[string]any{"type": "message", "subtype": "bot_message", "text": "Deploy api v2?",
			"ts": "1515449600.000600", "bot_id": "B0LAN0Z8A"},
		"state":        map[string]any{"values": map[string]any{}},
		"response_url": responseURL,
		"actions": []any{map[string]any{
			"action_id": actionID, "block_id": "deploy_approval", "value": "deploy-api-v2",
			"type": "button", "action_ts": actionTS,
			"text": map[string]any{"type": "plain_text", "text": "Approve", "emoji": true},
		}},
	}
	if trigger == "" {
		delete(p, "trigger_id")
	}
	return p
}

// ixViewSubmission is a view_submission payload for a modal with callbackID.
func ixViewSubmission(trigger, callbackID string) map[string]any {
	return map[string]any{
		"type":       "view_submission",
		"team":       map[string]any{"id": "T0001", "domain": "example"},
		"user":       map[string]any{"id": "U061F7AUR", "username": "steve", "name": "steve", "team_id": "T0001"},
		"api_app_id": "A0KRD7HC3",
		"token":      "gIkuvaNzQIHg97ATvDxqgjtO",
		"trigger_id": trigger,
		"view": map[string]any{
			"id": "V0MODAL01", "team_id": "T0001", "type": "modal", "callback_id": callbackID,
			"private_metadata": "", "hash": "1515449650.abcdef",
			"title":  map[string]any{"type": "plain_text", "text": "Deploy"},
			"blocks": []any{},
			"state": map[string]any{"values": map[string]any{
				"service": map[string]any{"name": map[string]any{"type": "plain_text_input", "value": "api"}},
			}},
		},
		"response_urls": []any{},
	}
}

// ixForm is the interactivity form body: payload=<urlencoded JSON>.
func ixForm(tb testing.TB, payload map[string]any) []byte {
	tb.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		tb.Fatal(err)
	}
	return []byte("payload=" + url.QueryEscape(string(b)))
}

// ixConfig routes the "approve" button to forward (to fwdURL), the "ack"
// button to respond, the "note" button to log, and the deploy_modal
// submission to log.
func ixConfig(fwdURL string) string {
	return fmt.Sprintf(`
[sweep]
interval = "100ms"

[[route]]
name      = "approve"
action_id = "approve"
effect    = "forward"
url       = %q
timeout   = "5s"

[[route]]
name      = "ack-button"
action_id = "ack"
effect    = "respond"
text      = "Acknowledged by <@{{.User}}>"
timeout   = "5s"

[[route]]
name      = "note"
action_id = "note"
effect    = "log"

[[route]]
name        = "modal"
callback_id = "deploy_modal"
effect      = "log"
`, fwdURL)
}

func TestInteractivity(t *testing.T) {
	t.Parallel()

	t.Run("block_actions routed by action_id is forwarded and the handler's reply goes to the response_url", func(t *testing.T) {
		handler, responseURL := fakeslack.NewHook(t), fakeslack.NewHook(t)
		handler.Script(fakeslack.Response{Body: `{"text":"Approved","replace_original":true}`})
		s := startServer(t, configFor(t, ixConfig(handler.URL())), daemon.Options{})

		payload := ixBlockActions("7.7.approve", "approve", "1515449612.345678", responseURL.URL())
		r := s.postForm("/slack/interactivity", ixForm(t, payload))
		if r.Status != http.StatusOK || r.Body != "" {
			t.Fatalf("answer %d %q, want 200 with an empty body", r.Status, r.Body)
		}

		fwd := cmdWaitPosts(t, handler, 1)[0]
		var got struct {
			IdempotencyKey string         `json:"idempotency_key"`
			Route          string         `json:"route"`
			Source         string         `json:"source"`
			Envelope       map[string]any `json:"envelope"`
		}
		fwd.JSON(t, &got)
		var want map[string]any
		b, _ := json.Marshal(payload)
		_ = json.Unmarshal(b, &want)
		if !reflect.DeepEqual(got.Envelope, want) {
			t.Errorf("forwarded envelope is not the interaction payload:\n got %v\nwant %v", got.Envelope, want)
		}
		if got.IdempotencyKey != "ix:7.7.approve:approve" || got.Route != "approve" || got.Source != "interaction" {
			t.Errorf("forward body key=%q route=%q source=%q, want ix:7.7.approve:approve, approve, interaction",
				got.IdempotencyKey, got.Route, got.Source)
		}

		reply := cmdWaitDone(t, s, "ix:7.7.approve:approve:reply")
		if reply.Effect != "respond" {
			t.Errorf("follow-up effect = %q, want respond", reply.Effect)
		}
		posts := cmdWaitPosts(t, responseURL, 1)
		if len(posts) != 1 {
			t.Fatalf("response_url got %d posts, want 1", len(posts))
		}
		var body map[string]any
		posts[0].JSON(t, &body)
		if body["text"] != "Approved" || body["replace_original"] != true {
			t.Errorf("response_url got %s, want text Approved and replace_original true", posts[0].Body)
		}
	})

	t.Run("view_submission routed by callback_id is acked with an empty body", func(t *testing.T) {
		s := startServer(t, configFor(t, ixConfig("http://127.0.0.1:9/unused")), daemon.Options{})
		r := s.postForm("/slack/interactivity", ixForm(t, ixViewSubmission("8.8.modal", "deploy_modal")))
		if r.Status != http.StatusOK || r.Body != "" {
			t.Fatalf("answer %d %q, want 200 with an empty body (closes the modal)", r.Status, r.Body)
		}
		row := cmdRow(t, s, "ix:8.8.modal:modal")
		if row.Effect != "log" {
			t.Errorf("effect = %q, want log", row.Effect)
		}
		if rc, ob := s.rows(); rc != 1 || ob != 1 {
			t.Errorf("receipts=%d outbox=%d, want 1 and 1", rc, ob)
		}
	})

	t.Run("unrouted interactions get 200 and write nothing", func(t *testing.T) {
		s := startServer(t, configFor(t, ixConfig("http://127.0.0.1:9/unused")), daemon.Options{})
		for name, p := range map[string]map[string]any{
			"unrouted action_id":   ixBlockActions("9.9.reject", "reject", "1515449612.1", "http://127.0.0.1:9/unused"),
			"unrouted callback_id": ixViewSubmission("9.9.other", "other_modal"),
		} {
			r := s.postForm("/slack/interactivity", ixForm(t, p))
			if r.Status != http.StatusOK || r.Body != "" {
				t.Errorf("%s: answer %d %q, want 200 with an empty body", name, r.Status, r.Body)
			}
		}
		cmdNothingWritten(t, s)
	})

	t.Run("rejected requests write nothing", func(t *testing.T) {
		s := startServer(t, configFor(t, ixConfig("http://127.0.0.1:9/unused")), daemon.Options{})
		good := ixForm(t, ixBlockActions("10.10.a", "note", "1515449612.2", "http://127.0.0.1:9/unused"))
		now := time.Now().Unix()
		for _, tc := range []struct {
			name   string
			body   []byte
			secret string
			ts     int64
			want   int
		}{
			{"missing payload field is 400", []byte("token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001"), testSecret, now, http.StatusBadRequest},
			{"malformed payload JSON is 400", []byte("payload=" + url.QueryEscape(`{"type":"block_actions",`)), testSecret, now, http.StatusBadRequest},
			{"bad signature is 401", good, "not-the-signing-secret", now, http.StatusUnauthorized},
			{"timestamp 6 minutes old is 401", good, testSecret, now - 6*60, http.StatusUnauthorized},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := cmdSignedPost(t, s, "/slack/interactivity", tc.body, tc.secret, tc.ts)
				if r.Status != tc.want {
					t.Errorf("status %d %q, want %d", r.Status, r.Body, tc.want)
				}
				cmdNothingWritten(t, s)
			})
		}
	})

	t.Run("interaction without trigger_id gets a stable hash operation id", func(t *testing.T) {
		s := startServer(t, configFor(t, ixConfig("http://127.0.0.1:9/unused")), daemon.Options{})
		once := ixForm(t, ixBlockActions("", "note", "1515449612.3", "http://127.0.0.1:9/unused"))
		for i := range 2 {
			if r := s.postForm("/slack/interactivity", once); r.Status != http.StatusOK {
				t.Fatalf("delivery %d: status %d %q", i+1, r.Status, r.Body)
			}
		}
		if rc, ob := s.rows(); rc != 1 || ob != 1 {
			t.Fatalf("same payload twice: receipts=%d outbox=%d, want 1 and 1", rc, ob)
		}
		if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id LIKE 'ix:h:%'`); n != 1 {
			t.Errorf("receipt is not a hash operation id (ix:h:…)")
		}
		// A second click (a new action_ts) is a new operation.
		again := ixForm(t, ixBlockActions("", "note", "1515449699.4", "http://127.0.0.1:9/unused"))
		if r := s.postForm("/slack/interactivity", again); r.Status != http.StatusOK {
			t.Fatalf("second click: status %d %q", r.Status, r.Body)
		}
		if rc, _ := s.rows(); rc != 2 {
			t.Errorf("a second click recorded %d receipts in all, want 2", rc)
		}
	})

	t.Run("intent not durable within the budget is 500 and writes nothing", func(t *testing.T) {
		cfg := configFor(t, ixConfig("http://127.0.0.1:9/unused")+"\n[ack]\nbudget = \"300ms\"\n")
		cfg.Sweep.Interval = config.Duration{Duration: time.Hour} // only the intent writes while locked
		s := startServer(t, cfg, daemon.Options{})
		release := cmdLockDB(t, s.DB)

		start := time.Now()
		r := s.postForm("/slack/interactivity", ixForm(t, ixBlockActions("11.11.locked", "note", "1515449612.5", "http://127.0.0.1:9/unused")))
		if took := time.Since(start); took > cmdDeadline {
			t.Errorf("answered after %s; the 300ms budget should have cut the wait for the lock", took)
		}
		if r.Status != http.StatusInternalServerError {
			t.Fatalf("status %d %q, want 500 (Slack shows the user the action failed)", r.Status, r.Body)
		}
		if s.Logs.Find("level", "ERROR", "endpoint", "interactivity", "outcome", "failed", "event_id", "ix:11.11.locked") == nil {
			t.Errorf("no error log naming ix:11.11.locked:\n%s", s.Logs)
		}
		cmdWaitCommitterGaveUp(t, s)
		release()
		cmdNothingWritten(t, s)
	})

	t.Run("response_url answering 404 parks the respond row as expired", func(t *testing.T) {
		responseURL := fakeslack.NewHook(t)
		responseURL.Script(fakeslack.Response{Status: http.StatusNotFound, Body: "expired_url"})
		s := startServer(t, configFor(t, ixConfig("http://127.0.0.1:9/unused")), daemon.Options{})

		r := s.postForm("/slack/interactivity", ixForm(t, ixBlockActions("12.12.old", "ack", "1515449612.6", responseURL.URL())))
		if r.Status != http.StatusOK {
			t.Fatalf("status %d %q", r.Status, r.Body)
		}
		var row store.Row
		waitFor(t, "the respond row to be parked", 10*time.Second, func() bool {
			row = cmdRow(t, s, "ix:12.12.old:ack-button")
			return row.Status == store.StatusParked
		})
		if row.Attempts != 1 {
			t.Errorf("attempts = %d, want 1 (an expired url is not retried)", row.Attempts)
		}
		if !strings.Contains(row.LastError, "expired") || !strings.Contains(row.LastError, "response_url") {
			t.Errorf("last_error = %q, want it to say the response_url expired", row.LastError)
		}
		if n := len(responseURL.Posts()); n != 1 {
			t.Errorf("response_url got %d posts, want 1", n)
		}
		var body map[string]any
		responseURL.Posts()[0].JSON(t, &body)
		if body["text"] != "Acknowledged by <@U061F7AUR>" {
			t.Errorf("respond text = %q, want the rendered template", body["text"])
		}
	})
}
