package fakeslack

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Slack's agent sessions (2026-08, SLACK_FACTS §12) as the fake plays them.
//
// Every thread chat.startStream streams in has a session, "processing"
// from that start (streaming implies a session). agents.sessions.setStatus
// (channel_id, thread_ts, status ∈ active|processing|suspended|closed) sets
// it; it answers not_authorized once SetAgent(false) says the app is not an
// agent (no assistant:write), feature_disabled with SetSessionsDisabled.
// chat.stopStream ends it with its session_status (default active).
//
// A user's Stop (StopByUser) stops every open stream of a thread: Slack
// accepts no further writes to them (chat.appendStream and chat.stopStream
// answer stopped_by_user), and the session stays as it was (Slack leaves it
// processing until the app says otherwise). It returns the
// agent_session_stopped event Slack sends, for a test to deliver.
//
// Outside a DM (a channel id not starting with D), chat.startStream needs
// recipient_user_id and recipient_team_id: missing_recipient_user_id /
// missing_recipient_team_id otherwise.
//
// Rates: SetRateLimit(method, n, per) answers a method's calls past n in
// any window of per with HTTP 429 and a Retry-After until the oldest of
// them leaves the window (Slack's tiers: chat.startStream and
// chat.stopStream are Tier 2, about 20 a minute).
//
// Every call names its thread (Call.Thread) and what it was answered
// (Call.Answer): ThreadCalls lists a thread's Web API calls in order.

// agentState is the fake's agent-session state; s.mu guards it.
type agentState struct {
	notAgent bool
	disabled bool
	sessions map[string]string // "channel/thread_ts" → status
	stopped  map[string]bool   // "channel/ts" of each stream the user stopped
	limits   map[string]rateLimit
	seen     map[string][]time.Time // method → times of its calls inside the window
}

type rateLimit struct {
	n   int
	per time.Duration
}

func (s *Server) agentsLocked() *agentState {
	if s.agents == nil {
		s.agents = &agentState{sessions: map[string]string{}, stopped: map[string]bool{},
			limits: map[string]rateLimit{}, seen: map[string][]time.Time{}}
	}
	return s.agents
}

// SetAgent says whether the app is an agent (default true): false answers
// agents.sessions.setStatus with not_authorized.
func (s *Server) SetAgent(agent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agentsLocked().notAgent = !agent
}

// SetSessionsDisabled answers agents.sessions.setStatus with
// feature_disabled (the workspace has agent sessions off).
func (s *Server) SetSessionsDisabled(off bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agentsLocked().disabled = off
}

// SetRateLimit limits method to n calls in any window of per (see above).
func (s *Server) SetRateLimit(method string, n int, per time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agentsLocked().limits[method] = rateLimit{n: n, per: per}
}

// SessionStatus is the session status of thread ch/thread ("" when it has
// none).
func (s *Server) SessionStatus(ch, thread string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agentsLocked().sessions[ch+"/"+thread]
}

// SessionStatuses lists the agents.sessions.setStatus calls (scripted and
// refused ones too), oldest first.
func (s *Server) SessionStatuses() []ThreadStatus {
	var out []ThreadStatus
	for _, c := range s.CallsTo("agents.sessions.setStatus") {
		out = append(out, ThreadStatus{Channel: c.Params.Get("channel_id"), ThreadTS: c.Params.Get("thread_ts"),
			Status: c.Params.Get("status"), Time: c.Time})
	}
	return out
}

// StopByUser is a user pressing Stop in thread ch/thread: every stream of
// the thread still open is stopped (further appends answer stopped_by_user)
// and the event Slack sends is returned: the inner agent_session_stopped
// event (type, channel, user, thread_ts, streaming_message_ts, event_ts on
// the fake's clock).
func (s *Server) StopByUser(ch, thread, user string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	ag := s.agentsLocked()
	inFlight := []string{}
	if c := s.history[ch]; c != nil {
		for _, m := range c.replies[thread] {
			if s.streamOpenLocked(ch, m.TS) && !ag.stopped[ch+"/"+m.TS] {
				ag.stopped[ch+"/"+m.TS] = true
				delete(s.streamsLocked().open, ch+"/"+m.TS)
				inFlight = append(inFlight, m.TS)
			}
		}
	}
	return map[string]any{"type": "agent_session_stopped", "channel": ch, "user": user, "thread_ts": thread,
		"streaming_message_ts": inFlight, "event_ts": s.nextTS()}
}

// StoppedEnvelope wraps an agent_session_stopped event (StopByUser's) in
// the event_callback Slack delivers (no team_id on the inner event; the
// envelope's team_id names the workspace).
func StoppedEnvelope(eventID, team string, ev map[string]any) map[string]any {
	return map[string]any{"type": "event_callback", "event_id": eventID, "team_id": team, "api_app_id": "A0FAKEAPP",
		"event_time": eventTime(ev), "event": ev}
}

func eventTime(ev map[string]any) int64 {
	ts, _ := ev["event_ts"].(string)
	sec, _, _ := strings.Cut(ts, ".")
	n, _ := strconv.ParseInt(sec, 10, 64)
	return n
}

// ThreadCalls lists the Web API calls made in thread ch/thread, in order,
// one line each: the method, the parameters that tell them apart (status,
// session_status, a start's recipient), and the answer when it was not ok.
func (s *Server) ThreadCalls(ch, thread string) []string {
	var out []string
	for _, c := range s.Calls() {
		if c.Thread != ch+"/"+thread {
			continue
		}
		line := c.Method
		for _, k := range []string{"status", "session_status", "recipient_user_id", "recipient_team_id"} {
			if c.Params.Has(k) {
				line += fmt.Sprintf(" %s=%q", k, c.Params.Get(k))
			}
		}
		if c.Method == "chat.appendStream" {
			line += fmt.Sprintf(" (%d chars)", Chars(c.Params.Get("markdown_text")))
		}
		if c.Answer != "" && c.Answer != "ok" {
			line += " → " + c.Answer
		}
		out = append(out, line)
	}
	return out
}

// threadOfLocked is the thread call c acts in (Call.Thread); s.mu is held.
func (s *Server) threadOfLocked(c Call) string {
	p := c.Params
	ch := p.Get("channel")
	if ch == "" {
		ch = p.Get("channel_id")
	}
	if ch == "" {
		return ""
	}
	if t := p.Get("thread_ts"); t != "" {
		return ch + "/" + t
	}
	if m := s.storedLocked(ch, p.Get("ts")); m != nil && m.ThreadTS != "" {
		return ch + "/" + m.ThreadTS
	}
	return ""
}

// rateLimitLocked is a 429 for a call past its method's limit; s.mu is
// held.
func (s *Server) rateLimitLocked(method string) (Response, bool) {
	ag := s.agents
	if ag == nil {
		return Response{}, false
	}
	l, ok := ag.limits[method]
	if !ok {
		return Response{}, false
	}
	now := time.Now()
	seen := ag.seen[method]
	for len(seen) > 0 && now.Sub(seen[0]) >= l.per {
		seen = seen[1:]
	}
	if len(seen) >= l.n {
		ag.seen[method] = seen
		wait := l.per - now.Sub(seen[0])
		secs := max(1, int((wait+time.Second-1)/time.Second))
		return Response{Status: http.StatusTooManyRequests, RetryAfter: strconv.Itoa(secs), Error: "ratelimited"}, true
	}
	ag.seen[method] = append(seen, now)
	return Response{}, false
}

// sessionSetStatus answers agents.sessions.setStatus; s.mu is held.
func (s *Server) sessionSetStatus(p url.Values) map[string]any {
	ag := s.agentsLocked()
	switch {
	case ag.notAgent:
		return fail("not_authorized")
	case ag.disabled:
		return fail("feature_disabled")
	case p.Get("channel_id") == "":
		return fail("invalid_arguments")
	case p.Get("thread_ts") == "":
		return fail("thread_ts_required")
	}
	switch st := p.Get("status"); st {
	case "active", "processing", "suspended", "closed":
		ag.sessions[p.Get("channel_id")+"/"+p.Get("thread_ts")] = st
	default:
		return fail("invalid_status")
	}
	return map[string]any{"ok": true}
}

// recipientMissing is chat.startStream's error outside a DM without its
// recipient.
func recipientMissing(ch string, p url.Values) string {
	if strings.HasPrefix(ch, "D") {
		return ""
	}
	switch {
	case p.Get("recipient_user_id") == "":
		return "missing_recipient_user_id"
	case p.Get("recipient_team_id") == "":
		return "missing_recipient_team_id"
	}
	return ""
}

// answerOf is the answer an envelope body says: "ok" or its error.
func answerOf(body any) string {
	if m, ok := body.(map[string]any); ok {
		if e, ok := m["error"].(string); ok && e != "" {
			return e
		}
	}
	return "ok"
}
