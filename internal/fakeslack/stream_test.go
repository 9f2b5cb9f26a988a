package fakeslack

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
)

// The fake's streaming side speaks what slack-go v0.35.0's own methods send
// and understand: StartStream, AppendStream, StopStream (with metadata),
// SetAssistantThreadsStatus, UpdateMessage with markdown_text, and
// DeleteMessage, with Slack's errors decoded as SlackErrorResponse.
func TestStreamWithSlackGo(t *testing.T) {
	s := New(t, "xoxb-s")
	api := slack.New("xoxb-s", slack.OptionAPIURL(s.URL()))
	const ch, thread = "C1", "1700000000.000100"
	var ser slack.SlackErrorResponse

	t.Run("status, a stream of three parts with metadata, and its end", func(t *testing.T) {
		if err := api.SetAssistantThreadsStatus(slack.AssistantThreadsSetStatusParameters{
			ChannelID: ch, ThreadTS: thread, Status: "is thinking…"}); err != nil {
			t.Fatal(err)
		}
		if st := s.Statuses(); len(st) != 1 || st[0] != (ThreadStatus{Channel: ch, ThreadTS: thread, Status: "is thinking…", Time: st[0].Time}) {
			t.Fatalf("statuses %+v", st)
		}
		c, ts, err := api.StartStream(ch, slack.MsgOptionTS(thread), slack.MsgOptionMarkdownText("Hel"),
			slack.MsgOptionRecipientTeamID("T1"), slack.MsgOptionRecipientUserID("U1"))
		if err != nil || c != ch || ts == "" {
			t.Fatalf("StartStream = %q %q %v", c, ts, err)
		}
		if !s.Streaming(ch, ts) {
			t.Fatal("the stream is not open")
		}
		if _, _, err := api.AppendStream(ch, ts, slack.MsgOptionMarkdownText("lo, ")); err != nil {
			t.Fatal(err)
		}
		md := slack.SlackMetadata{EventType: "ackd_effect", EventPayload: map[string]any{"idempotency_key": "Ev1:agent"}}
		if _, _, err := api.StopStream(ch, ts, slack.MsgOptionMarkdownText("world"), slack.MsgOptionMetadata(md)); err != nil {
			t.Fatal(err)
		}
		m, ok := s.Message(ch, ts)
		if !ok || m.Text != "Hello, world" || m.ThreadTS != thread || m.BotID != "B0FAKEBOT" {
			t.Fatalf("message %+v", m)
		}
		if got := s.MessagesWithKey(ch, "Ev1:agent"); len(got) != 1 || got[0].TS != ts {
			t.Fatalf("messages with the key: %+v", got)
		}
		if s.Streaming(ch, ts) {
			t.Fatal("still streaming after stopStream")
		}
		_, _, err = api.AppendStream(ch, ts, slack.MsgOptionMarkdownText("more"))
		if !errors.As(err, &ser) || ser.Err != "message_not_in_streaming_state" {
			t.Fatalf("append after stop: %v", err)
		}
	})

	t.Run("a stream ends by itself after its lifetime", func(t *testing.T) {
		s.SetStreamLifetime(50 * time.Millisecond)
		defer s.SetStreamLifetime(DefaultStreamLifetime)
		_, ts, err := api.StartStream(ch, slack.MsgOptionTS(thread), slack.MsgOptionMarkdownText("a"), slack.MsgOptionRecipientTeamID("T1"), slack.MsgOptionRecipientUserID("U1"))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for s.Streaming(ch, ts) {
			if time.Now().After(deadline) {
				t.Fatal("the stream did not end")
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, call := range []func() error{
			func() error { _, _, err := api.AppendStream(ch, ts, slack.MsgOptionMarkdownText("b")); return err },
			func() error { _, _, err := api.StopStream(ch, ts); return err },
		} {
			if err := call(); !errors.As(err, &ser) || ser.Err != "message_not_in_streaming_state" {
				t.Fatalf("after expiry: %v", err)
			}
		}
		if m, _ := s.Message(ch, ts); m.Text != "a" {
			t.Fatalf("expired stream shows %q, want what it had", m.Text)
		}
	})

	t.Run("update and delete a stored message; limits", func(t *testing.T) {
		_, ts, err := api.StartStream(ch, slack.MsgOptionTS(thread), slack.MsgOptionMarkdownText("first"), slack.MsgOptionRecipientTeamID("T1"), slack.MsgOptionRecipientUserID("U1"))
		if err != nil {
			t.Fatal(err)
		}
		md := slack.SlackMetadata{EventType: "ackd_effect", EventPayload: map[string]any{"idempotency_key": "Ev2:agent"}}
		if _, _, _, err := api.UpdateMessage(ch, ts, slack.MsgOptionMarkdownText("second"), slack.MsgOptionMetadata(md)); err != nil {
			t.Fatal(err)
		}
		if m, _ := s.Message(ch, ts); m.Text != "second" || len(s.MessagesWithKey(ch, "Ev2:agent")) != 1 {
			t.Fatalf("after update: %+v", m)
		}
		_, _, err = api.AppendStream(ch, ts, slack.MsgOptionMarkdownText(strings.Repeat("x", MarkdownTextLimit+1)))
		if !errors.As(err, &ser) || ser.Err != "msg_too_long" {
			t.Fatalf("12,001 characters: %v", err)
		}
		if _, _, err := api.DeleteMessage(ch, ts); err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Message(ch, ts); ok {
			t.Fatal("deleted message still stored")
		}
		if _, _, err := api.DeleteMessage(ch, ts); !errors.As(err, &ser) || ser.Err != "message_not_found" {
			t.Fatalf("second delete: %v", err)
		}
		if _, _, _, err := api.UpdateMessage(ch, ts, slack.MsgOptionMarkdownText("x")); !errors.As(err, &ser) || ser.Err != "message_not_found" {
			t.Fatalf("update of a deleted message: %v", err)
		}
		if _, _, err := api.StartStream(ch, slack.MsgOptionMarkdownText("no thread")); !errors.As(err, &ser) || ser.Err != "invalid_arguments" {
			t.Fatalf("stream outside a thread: %v", err)
		}
	})
}

// Agent sessions (sessions.go): a start opens a processing session, the
// user's Stop refuses further appends with stopped_by_user and gives the
// event, setStatus sets the session (not_authorized for a non-agent), and
// a rate limit answers 429 with a Retry-After.
func TestAgentSessionsAndStop(t *testing.T) {
	s := New(t, "xoxb-t")
	api := slack.New("xoxb-t", slack.OptionAPIURL(s.URL()))
	ch, thread := "C9", "1700000000.000100"
	if _, _, err := api.StartStream(ch, slack.MsgOptionTS(thread)); err == nil || err.Error() != "missing_recipient_user_id" {
		t.Fatalf("start outside a DM without recipient: %v", err)
	}
	_, ts, err := api.StartStream(ch, slack.MsgOptionTS(thread), slack.MsgOptionRecipientTeamID("T1"), slack.MsgOptionRecipientUserID("U1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.SessionStatus(ch, thread); got != "processing" {
		t.Fatalf("session after start = %q", got)
	}
	ev := s.StopByUser(ch, thread, "U1")
	if got := ev["streaming_message_ts"].([]string); len(got) != 1 || got[0] != ts || ev["type"] != "agent_session_stopped" || ev["event_ts"] == "" {
		t.Fatalf("event %v", ev)
	}
	if _, _, err := api.AppendStream(ch, ts, slack.MsgOptionMarkdownText("more")); err == nil || err.Error() != "stopped_by_user" {
		t.Fatalf("append after stop: %v", err)
	}
	if got := s.SessionStatus(ch, thread); got != "processing" {
		t.Fatalf("session after the user's stop = %q (Slack leaves it to the app)", got)
	}
	calls := s.ThreadCalls(ch, thread)
	want := []string{
		`chat.startStream → missing_recipient_user_id`,
		`chat.startStream recipient_user_id="U1" recipient_team_id="T1"`,
		`chat.appendStream (4 chars) → stopped_by_user`,
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("thread calls\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	s.SetRateLimit("chat.startStream", 1, time.Minute)
	if _, _, err := api.StartStream("D1", slack.MsgOptionTS(thread)); err != nil {
		t.Fatal(err)
	}
	var rl *slack.RateLimitedError
	if _, _, err := api.StartStream("D1", slack.MsgOptionTS(thread)); !errors.As(err, &rl) || rl.RetryAfter <= 0 {
		t.Fatalf("second start in the window: %v", err)
	}
}
