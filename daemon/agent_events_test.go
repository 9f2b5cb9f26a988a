package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
)

// Assistant and agent events name their conversation where Slack puts it:
// an assistant thread's in event.assistant_thread (channel_id, thread_ts),
// agent sessions' and the Messages tab's in event.channel. A post route on
// each lands in that conversation instead of parking with no_channel.
func TestAgentEventsCarryTheirChannel(t *testing.T) {
	for _, tc := range []struct {
		name, event, inner, channel, thread string
	}{
		{"assistant_thread_started", "assistant_thread_started",
			`{"type":"assistant_thread_started","assistant_thread":{"channel_id":"D0AGENT","thread_ts":"1700000000.000200","user_id":"U1","context":{"channel_id":"C0VIEWED","team_id":"T1"}},"event_ts":"1700000000.000300"}`,
			"D0AGENT", "1700000000.000200"},
		{"assistant_thread_context_changed", "assistant_thread_context_changed",
			`{"type":"assistant_thread_context_changed","assistant_thread":{"channel_id":"D0AGENT","thread_ts":"1700000000.000200","user_id":"U1","context":{"channel_id":"C0OTHER"}},"event_ts":"1700000000.000400"}`,
			"D0AGENT", "1700000000.000200"},
		{"agent_session_stopped", "agent_session_stopped",
			`{"type":"agent_session_stopped","channel":"D0AGENT","user":"U1","thread_ts":"1700000000.000200","streaming_message_ts":["1700000000.000500"],"event_ts":"1700000000.000600"}`,
			"D0AGENT", "1700000000.000200"},
		{"app_home_opened in the Messages tab", "app_home_opened",
			`{"type":"app_home_opened","user":"U1","channel":"D0AGENT","tab":"messages","event_ts":"1700000000.000700"}`,
			"D0AGENT", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := fakeslack.New(t, evBotToken)
			cfg := configFor(t, fmt.Sprintf(`
[slack]
api_url = %q

[[route]]
name   = "hello"
event  = %q
effect = "post"
text   = "hello"
thread = true
`, api.URL(), tc.event))
			s := startServer(t, cfg, evBotOptions())
			var inner map[string]any
			if err := json.Unmarshal([]byte(tc.inner), &inner); err != nil {
				t.Fatal(err)
			}
			if r := s.postEvent(eventBody("Ev"+tc.event, inner)); r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			waitFor(t, "the post", 10*time.Second, func() bool { return len(api.CallsTo("chat.postMessage")) == 1 })
			call := api.CallsTo("chat.postMessage")[0]
			if got := call.Params.Get("channel"); got != tc.channel {
				t.Errorf("posted to channel %q, want %q (where %s names its conversation)", got, tc.channel, tc.event)
			}
			if got := call.Params.Get("thread_ts"); got != tc.thread {
				t.Errorf("posted in thread %q, want %q", got, tc.thread)
			}
		})
	}
}
