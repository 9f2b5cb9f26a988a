package daemon_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
)

// Ids ackd keys on (event_id, trigger_id, a message's channel and ts) are
// checked at ingress: Slack's are short printable ASCII. Anything else is a
// 400 with a log line naming the reason, and nothing is written — before,
// invalid UTF-8 collided into one receipt through U+FFFD, a NUL made the
// forward's Idempotency-Key header invalid, and a 100 KB id was stored.
func TestIDsValidatedAtIngress(t *testing.T) {
	t.Parallel()
	long := "Ev" + strings.Repeat("A", ingress.MaxIDLen) // MaxIDLen+2 bytes
	rawEvent := func(eventID, channel string) []byte {
		return []byte(`{"type":"event_callback","team_id":"T1","event_id":"` + eventID +
			`","event":{"type":"message","user":"U1","text":"hi","ts":"1700000000.000100","channel":"` + channel + `"}}`)
	}
	ixPayload := func(trigger string) []byte {
		return []byte("payload=" + url.QueryEscape(`{"type":"block_actions","trigger_id":"`+trigger+
			`","team":{"id":"T1"},"user":{"id":"U1"},"actions":[{"action_id":"note","action_ts":"1.2"}]}`))
	}
	cmd := func(trigger string) []byte {
		return []byte("command=%2Fdeploy&text=x&user_id=U1&trigger_id=" + trigger)
	}
	tests := []struct {
		name, path string
		body       []byte
		reason     string
	}{
		{"event_id with invalid UTF-8", "/slack/events", rawEvent("Ev\xff1", "C1"), "event_id is not valid UTF-8"},
		{"another event_id that U+FFFD would have merged with it", "/slack/events", rawEvent("Ev\xfe1", "C1"), "event_id is not valid UTF-8"},
		{"event_id with a lone surrogate escape", "/slack/events", rawEvent(`Ev\ud8001`, "C1"), "printable ASCII"},
		{"event_id with NUL", "/slack/events", rawEvent(`Ev\u00001`, "C1"), "control character"},
		{"event_id with a newline", "/slack/events", rawEvent(`Ev\n1`, "C1"), "control character"},
		{"event_id with a space", "/slack/events", rawEvent("Ev 1", "C1"), "printable ASCII"},
		{"event_id with non-ASCII", "/slack/events", rawEvent("Ev€1", "C1"), "printable ASCII"},
		{"over-long event_id", "/slack/events", rawEvent(long, "C1"), fmt.Sprintf("over the %d", ingress.MaxIDLen)},
		{"message channel with NUL (a message key)", "/slack/events", rawEvent("Ev1", `C\u00001`), "event.channel contains the control character"},
		{"command trigger_id with NUL", "/slack/commands", cmd("1.2.%00a"), "trigger_id contains the control character"},
		{"command trigger_id with invalid UTF-8", "/slack/commands", cmd("1.2.%FFa"), "trigger_id is not valid UTF-8"},
		{"over-long command trigger_id", "/slack/commands", cmd(long), "trigger_id is 130 bytes"},
		{"interaction trigger_id with NUL", "/slack/interactivity", ixPayload(`1.2.\u0000a`), "trigger_id contains the control character"},
		{"interaction trigger_id with invalid UTF-8", "/slack/interactivity", ixPayload("1.2.\xffa"), "trigger_id is not valid UTF-8"},
		{"over-long interaction trigger_id", "/slack/interactivity", ixPayload(long), "trigger_id is 130 bytes"},
	}
	cfg := configFor(t, `
[[route]]
name   = "all"
event  = "*"
effect = "log"

[[route]]
name    = "deploy"
command = "/deploy"
effect  = "log"

[[route]]
name      = "note"
action_id = "note"
effect    = "log"
`)
	s := startServer(t, cfg, daemon.Options{})
	for _, tt := range tests {
		t.Run(tt.name+" is a 400 naming the reason and writes nothing", func(t *testing.T) {
			ctype := "application/x-www-form-urlencoded"
			if tt.path == "/slack/events" {
				ctype = "application/json"
			}
			r := s.post(tt.path, ctype, tt.body, nil)
			if r.Status != http.StatusBadRequest {
				t.Errorf("status %d %q, want 400", r.Status, r.Body)
			}
			if rc, ob := s.rows(); rc != 0 || ob != 0 {
				t.Errorf("receipts=%d outbox=%d, want nothing written", rc, ob)
			}
			found := false
			for _, l := range s.Logs.Lines() {
				if l["msg"] == "rejected" && fmt.Sprint(l["status"]) == "400" && strings.Contains(fmt.Sprint(l["reason"]), tt.reason) {
					found = true
				}
			}
			if !found {
				t.Errorf("no rejected log line with a reason naming %q:\n%s", tt.reason, s.Logs)
			}
		})
	}
	t.Run("Slack-shaped ids are accepted", func(t *testing.T) {
		for _, r := range []response{
			s.post("/slack/events", "application/json", rawEvent("Ev0A1B2C3D4E", "C0LAN2Q65"), nil),
			s.postForm("/slack/commands", cmd("398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c")),
			s.postForm("/slack/interactivity", ixPayload("13345224609.738474920.8088930838d88f008e0")),
		} {
			if r.Status != http.StatusOK {
				t.Errorf("status %d %q, want 200", r.Status, r.Body)
			}
		}
		if rc, _ := s.rows(); rc != 3 {
			t.Errorf("%d receipts, want 3", rc)
		}
	})
}

// Interactions without a trigger_id (view_closed, block_suggestion) are keyed
// by a hash of what identifies one user action. Two genuine interactions must
// get two ids — in particular two closes of modals sharing a callback_id by
// the same user — while one payload delivered twice keeps one.
func TestInteractionFallbackOperationID(t *testing.T) {
	viewClosed := func(viewID, hash string) string {
		return `{"type":"view_closed","team":{"id":"T1"},"user":{"id":"U1"},"api_app_id":"A1","is_cleared":false,` +
			`"view":{"id":"` + viewID + `","hash":"` + hash + `","callback_id":"survey","root_view_id":"` + viewID + `"}}`
	}
	suggestion := func(value, block string) string {
		return `{"type":"block_suggestion","team":{"id":"T1"},"user":{"id":"U1"},"action_id":"pick","block_id":"` + block +
			`","value":"` + value + `","view":{"id":"V1","hash":"h1","callback_id":"survey"}}`
	}
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"the same view_closed delivered twice is one operation", viewClosed("V1", "h1"), viewClosed("V1", "h1"), true},
		{"the same payload re-encoded (key order, spacing) is one operation",
			viewClosed("V1", "h1"),
			`{ "view": {"root_view_id":"V1","callback_id":"survey","hash":"h1","id":"V1"}, "is_cleared":false, "api_app_id":"A1", "user":{"id":"U1"}, "team":{"id":"T1"}, "type":"view_closed" }`,
			true},
		{"closes of two modals with one callback_id are two operations", viewClosed("V1", "h1"), viewClosed("V2", "h2"), false},
		{"closes of one view at two hashes are two operations", viewClosed("V1", "h1"), viewClosed("V1", "h2"), false},
		{"a cleared stack is not a plain close",
			viewClosed("V1", "h1"), strings.Replace(viewClosed("V1", "h1"), `"is_cleared":false`, `"is_cleared":true`, 1), false},
		{"suggestions for two typed values are two operations", suggestion("ab", "b1"), suggestion("abc", "b1"), false},
		{"suggestions from two blocks are two operations", suggestion("ab", "b1"), suggestion("ab", "b2"), false},
		{"the same suggestion twice is one operation", suggestion("ab", "b1"), suggestion("ab", "b1"), true},
		{"values cannot shift between fields",
			`{"type":"view_closed","team":{"id":"T1"},"user":{"id":"U1"},"view":{"id":"V1","hash":"h"}}`,
			`{"type":"view_closed","team":{"id":"T1"},"user":{"id":"U1"},"view":{"id":"V","hash":"1h"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := func(payload string) string {
				t.Helper()
				ix, err := ingress.ParseInteraction([]byte("payload=" + url.QueryEscape(payload)))
				if err != nil {
					t.Fatal(err)
				}
				op := ix.OperationID()
				if !strings.HasPrefix(op, "ix:h:") {
					t.Fatalf("operation id %q is not a hash id", op)
				}
				return op
			}
			a, b := id(tt.a), id(tt.b)
			if (a == b) != tt.same {
				t.Errorf("ids %s and %s: same=%v, want %v", a, b, a == b, tt.same)
			}
		})
	}
}

func TestViewClosedEachCloseIsActedOn(t *testing.T) {
	t.Parallel()
	s := startServer(t, configFor(t, `
[[route]]
name        = "survey-closed"
callback_id = "survey"
effect      = "log"
`), daemon.Options{})
	closed := func(viewID, hash string) []byte {
		return []byte("payload=" + url.QueryEscape(`{"type":"view_closed","team":{"id":"T1"},"user":{"id":"U1"},`+
			`"api_app_id":"A1","is_cleared":false,"view":{"id":"`+viewID+`","hash":"`+hash+`","callback_id":"survey"}}`))
	}
	for i, body := range [][]byte{closed("V1", "h1"), closed("V1", "h1"), closed("V2", "h2")} {
		if r := s.postForm("/slack/interactivity", body); r.Status != http.StatusOK {
			t.Fatalf("close %d: status %d %q", i+1, r.Status, r.Body)
		}
	}
	if rc, ob := s.rows(); rc != 2 || ob != 2 {
		t.Errorf("receipts=%d outbox=%d, want 2 and 2: the repeated delivery is one operation, the second modal's close another", rc, ob)
	}
}
