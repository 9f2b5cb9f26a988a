package fakeslack

import (
	"cmp"
	"encoding/json"
	"net/url"
	"time"
	"unicode/utf8"
)

// The fake's side of agent replies: assistant.threads.setStatus, the
// streaming methods (chat.startStream, chat.appendStream, chat.stopStream),
// chat.update and chat.delete of stored messages.
//
// A stream is a message in the thread it was started in (stored in the
// history like a post, as the token's bot), whose text grows with each
// appendStream and stopStream's markdown_text; stopStream sets its
// metadata and ends it. A stream ends by itself StreamLifetime after it
// started (SetStreamLifetime; 5 minutes unless set, as users of Slack's
// SDKs report): an append or a stop after that answers
// message_not_in_streaming_state, as Slack does, and the message keeps
// the text it had. markdown_text is limited to 12,000 characters per call
// (msg_too_long above it).
//
// chat.update replaces a stored message's text (text, or markdown_text)
// and, when given, its metadata; an update of a ts the fake never stored
// still succeeds (older tests rely on it), but one of a deleted message
// answers message_not_found. chat.delete removes a message from the
// history (message_not_found when it is not there).

// DefaultStreamLifetime is how long a stream stays open unless
// SetStreamLifetime says otherwise.
const DefaultStreamLifetime = 5 * time.Minute

// MarkdownTextLimit is Slack's limit on markdown_text per call, in characters.
const MarkdownTextLimit = 12_000

// streams is the fake's streaming state; s.mu guards it.
type streams struct {
	life    time.Duration
	open    map[string]time.Time // "channel/ts" of each stream not stopped → when it started
	deleted map[string]bool      // "channel/ts" of each message chat.delete removed
}

// ThreadStatus is one assistant.threads.setStatus call.
type ThreadStatus struct {
	Channel, ThreadTS, Status string
	Time                      time.Time
}

// SetStreamLifetime makes every stream, those open now included, end d
// after it started.
func (s *Server) SetStreamLifetime(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamsLocked().life = d
}

// Streaming reports whether the message ch/ts is a stream still open.
func (s *Server) Streaming(ch, ts string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streamOpenLocked(ch, ts)
}

// Statuses returns the assistant.threads.setStatus calls, oldest first
// (scripted failures too).
func (s *Server) Statuses() []ThreadStatus {
	var out []ThreadStatus
	for _, c := range s.CallsTo("assistant.threads.setStatus") {
		out = append(out, ThreadStatus{Channel: c.Params.Get("channel_id"), ThreadTS: c.Params.Get("thread_ts"),
			Status: c.Params.Get("status"), Time: c.Time})
	}
	return out
}

// Message returns the stored message ch/ts, if it is there.
func (s *Server) Message(ch, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.history[ch]; c != nil {
		if m := c.byTS[ts]; m != nil {
			return *m, true
		}
	}
	return Message{}, false
}

func (s *Server) streamsLocked() *streams {
	if s.streams == nil {
		s.streams = &streams{life: DefaultStreamLifetime, open: map[string]time.Time{}, deleted: map[string]bool{}}
	}
	return s.streams
}

func (s *Server) streamOpenLocked(ch, ts string) bool {
	st := s.streamsLocked()
	started, ok := st.open[ch+"/"+ts]
	return ok && s.nowLocked().Sub(started) < st.life
}

func fail(code string) map[string]any { return map[string]any{"ok": false, "error": code} }

// streamEnvelope answers the methods of this file; ok is false for any
// other method. s.mu is held.
func (s *Server) streamEnvelope(c Call) (body map[string]any, ok bool) {
	p := c.Params
	ch, ts := p.Get("channel"), p.Get("ts")
	if len([]rune(p.Get("markdown_text"))) > MarkdownTextLimit {
		switch c.Method {
		case "chat.startStream", "chat.appendStream", "chat.stopStream", "chat.update":
			return fail("msg_too_long"), true
		}
	}
	switch c.Method {
	case "agents.sessions.setStatus":
		return s.sessionSetStatus(p), true
	case "assistant.threads.setStatus":
		if p.Get("channel_id") == "" || p.Get("thread_ts") == "" {
			return fail("invalid_arguments"), true
		}
		return map[string]any{"ok": true}, true
	case "chat.startStream":
		if ch == "" || p.Get("thread_ts") == "" {
			return fail("invalid_arguments"), true
		}
		if code := recipientMissing(ch, p); code != "" {
			return fail(code), true
		}
		s.agentsLocked().sessions[ch+"/"+p.Get("thread_ts")] = "processing" // streaming implies a session
		b := s.botOf(c.Token)
		ts := s.store(ch, Message{Text: p.Get("markdown_text"), User: b.UserID, BotID: b.BotID, AppID: b.AppID,
			Subtype: "bot_message", ThreadTS: p.Get("thread_ts")})
		s.streamsLocked().open[ch+"/"+ts] = s.nowLocked()
		return map[string]any{"ok": true, "channel": ch, "ts": ts}, true
	case "chat.appendStream", "chat.stopStream":
		m := s.storedLocked(ch, ts)
		switch {
		case m == nil:
			return fail("message_not_found"), true
		case s.agentsLocked().stopped[ch+"/"+ts]:
			return fail("stopped_by_user"), true
		case !s.streamOpenLocked(ch, ts):
			return fail("message_not_in_streaming_state"), true
		case c.Method == "chat.appendStream" && p.Get("markdown_text") == "":
			return fail("invalid_arguments"), true
		}
		m.Text += p.Get("markdown_text")
		if c.Method == "chat.stopStream" {
			setMetadata(m, p)
			delete(s.streamsLocked().open, ch+"/"+ts)
			s.agentsLocked().sessions[ch+"/"+m.ThreadTS] = cmp.Or(p.Get("session_status"), "active")
		}
		return map[string]any{"ok": true, "channel": ch, "ts": ts}, true
	case "chat.delete":
		c := s.history[ch]
		if c == nil || c.byTS[ts] == nil {
			return fail("message_not_found"), true
		}
		s.remove(c, c.byTS[ts])
		delete(s.streamsLocked().open, ch+"/"+ts)
		s.streamsLocked().deleted[ch+"/"+ts] = true
		return map[string]any{"ok": true, "channel": ch, "ts": ts}, true
	}
	return nil, false
}

// update applies chat.update to the stored message, if there is one; an
// error code when the message was deleted. s.mu is held.
func (s *Server) update(p url.Values) string {
	ch, ts := p.Get("channel"), p.Get("ts")
	if s.streamsLocked().deleted[ch+"/"+ts] {
		return "message_not_found"
	}
	if len([]rune(p.Get("markdown_text"))) > MarkdownTextLimit {
		return "msg_too_long"
	}
	m := s.storedLocked(ch, ts)
	if m == nil {
		return ""
	}
	switch {
	case p.Get("markdown_text") != "":
		m.Text = p.Get("markdown_text")
	case p.Has("text"):
		m.Text = p.Get("text")
	}
	setMetadata(m, p)
	return ""
}

func (s *Server) storedLocked(ch, ts string) *Message {
	if c := s.history[ch]; c != nil {
		return c.byTS[ts]
	}
	return nil
}

// setMetadata sets m's metadata from a call's metadata parameter, if any.
func setMetadata(m *Message, p url.Values) {
	if raw := p.Get("metadata"); raw != "" {
		var md map[string]any
		if json.Unmarshal([]byte(raw), &md) == nil {
			m.Metadata = md
		}
	}
}

// remove takes m out of channel c; s.mu is held.
func (s *Server) remove(c *channel, m *Message) {
	delete(c.byTS, m.TS)
	drop := func(list []*Message) []*Message {
		out := list[:0]
		for _, x := range list {
			if x != m {
				out = append(out, x)
			}
		}
		return out
	}
	c.messages = drop(c.messages)
	if parent := m.thread(); parent != "" {
		c.replies[parent] = drop(c.replies[parent])
		if p := c.byTS[parent]; p != nil && p.replyCount > 0 {
			p.replyCount--
		}
	}
}

// Chars counts a text's characters as markdown_text's limit does.
func Chars(s string) int { return utf8.RuneCountInString(s) }
