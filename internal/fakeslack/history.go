package fakeslack

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The fake keeps every message in a per-channel history, as Slack does:
// chat.postMessage stores what it posts (with its metadata), tests seed
// others with AddMessage (users' messages, bot messages, subtypes, thread
// replies), and conversations.history / conversations.replies read them
// back with Slack's pagination (cursor, has_more, limit, oldest/latest/
// inclusive). Metadata comes back only with include_all_metadata=true.
//
// A reply (a message with thread_ts other than its own ts) is kept in its
// thread, not in the channel's history (unless it was broadcast), and
// updates its parent's reply_count, latest_reply and reply_users.

// Message is one message in the fake's history.
type Message struct {
	TS       string // when empty, AddMessage assigns the next one
	ThreadTS string // set for a thread parent (= TS) or a reply
	User     string
	BotID    string
	AppID    string // the app that posted it (with BotID: bot_profile.app_id too)
	Subtype  string
	Text     string
	// Broadcast: a reply also shown in the channel (subtype thread_broadcast).
	Broadcast bool
	// Metadata is the message's metadata as Slack returns it:
	// {"event_type": …, "event_payload": {…}}.
	Metadata map[string]any
	// Extra fields merged into the message object as sent.
	Extra map[string]any

	replyCount  int
	latestReply string
	replyUsers  []string
}

// thread is a reply's thread: its parent's ts, or "" for a channel message.
func (m *Message) thread() string {
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		return m.ThreadTS
	}
	return ""
}

// json is the message as Slack's history methods send it.
func (m *Message) json(withMetadata bool) map[string]any {
	out := map[string]any{"type": "message", "ts": m.TS}
	for k, v := range m.Extra {
		out[k] = v
	}
	if m.Text != "" || out["text"] == nil {
		out["text"] = m.Text
	}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
		if m.AppID != "" {
			out["bot_profile"] = map[string]any{"id": m.BotID, "app_id": m.AppID}
		}
	}
	if m.AppID != "" {
		out["app_id"] = m.AppID
	}
	if m.Subtype != "" {
		out["subtype"] = m.Subtype
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.replyCount > 0 {
		out["reply_count"] = m.replyCount
		out["latest_reply"] = m.latestReply
		out["reply_users"] = m.replyUsers
		out["reply_users_count"] = len(m.replyUsers)
	}
	if withMetadata && m.Metadata != nil {
		out["metadata"] = m.Metadata
	}
	return out
}

// channel is one conversation's messages, each list in ts order.
type channel struct {
	messages []*Message            // the channel's own history (parents, plain messages, broadcasts)
	replies  map[string][]*Message // thread parent ts → replies
	byTS     map[string]*Message
}

// nextTS returns a ts after every one given so far: the fake's clock in
// microseconds (the host's plus SetClockOffset), bumped when two calls fall
// on the same microsecond. s.mu is held.
func (s *Server) nextTS() string {
	us := s.nowLocked().UnixMicro()
	if us <= s.lastTS {
		us = s.lastTS + 1
	}
	s.lastTS = us
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

// AddMessage stores m in channel ch, as if someone had posted it, and
// returns its ts. Seeding a reply (ThreadTS of an existing message) adds it
// to that thread.
func (s *Server) AddMessage(ch string, m Message) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store(ch, m)
}

// store files m; s.mu is held.
func (s *Server) store(ch string, m Message) string {
	if s.history == nil {
		s.history = map[string]*channel{}
	}
	c := s.history[ch]
	if c == nil {
		c = &channel{replies: map[string][]*Message{}, byTS: map[string]*Message{}}
		s.history[ch] = c
	}
	if m.TS == "" {
		m.TS = s.nextTS()
	} else if us, ok := tsMicros(m.TS); ok && us > s.lastTS {
		s.lastTS = us
	}
	msg := &m
	c.byTS[msg.TS] = msg
	if parent := msg.thread(); parent != "" {
		c.replies[parent] = insertByTS(c.replies[parent], msg)
		if p := c.byTS[parent]; p != nil {
			p.ThreadTS = p.TS
			p.replyCount++
			if tsLess(p.latestReply, msg.TS) {
				p.latestReply = msg.TS
			}
			if u := cmp.Or(msg.User, msg.BotID); u != "" && !slices.Contains(p.replyUsers, u) {
				p.replyUsers = append(p.replyUsers, u)
			}
		}
		if !msg.Broadcast {
			return msg.TS
		}
		if msg.Subtype == "" {
			msg.Subtype = "thread_broadcast"
		}
	}
	c.messages = insertByTS(c.messages, msg)
	return msg.TS
}

// Messages returns channel ch's messages and replies, oldest first, as the
// fake holds them (metadata included).
func (s *Server) Messages(ch string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.history[ch]
	if c == nil {
		return nil
	}
	var out []Message
	for _, m := range c.byTS {
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Message) int { return tsCompare(a.TS, b.TS) })
	return out
}

// MessagesWithKey returns the messages in ch whose ackd metadata carries
// idempotency key: how a test counts duplicate posts.
func (s *Server) MessagesWithKey(ch, key string) []Message {
	var out []Message
	for _, m := range s.Messages(ch) {
		if p, _ := m.Metadata["event_payload"].(map[string]any); p != nil && p["idempotency_key"] == key {
			out = append(out, m)
		}
	}
	return out
}

// postMessage stores what chat.postMessage posts as bot b and returns the
// stored message; s.mu is held.
func (s *Server) postMessage(p url.Values, b Bot) *Message {
	m := Message{
		Text: cmp.Or(p.Get("text"), p.Get("markdown_text")), User: b.UserID, BotID: b.BotID, AppID: b.AppID, Subtype: "bot_message",
		ThreadTS: p.Get("thread_ts"), Broadcast: p.Get("reply_broadcast") == "true",
	}
	if raw := p.Get("metadata"); raw != "" {
		var md map[string]any
		if json.Unmarshal([]byte(raw), &md) == nil {
			m.Metadata = md
		}
	}
	ch := p.Get("channel")
	ts := s.store(ch, m)
	return s.history[ch].byTS[ts]
}

// historyPage answers conversations.history or conversations.replies from
// the stored messages; s.mu is held.
func (s *Server) historyPage(method string, p url.Values) map[string]any {
	c := s.history[p.Get("channel")]
	if p.Get("channel") == "" {
		return map[string]any{"ok": false, "error": "channel_not_found"}
	}
	var list []*Message
	newestFirst := method == "conversations.history"
	if method == "conversations.replies" {
		ts := p.Get("ts")
		var parent *Message
		if c != nil {
			parent = c.byTS[ts]
		}
		if parent == nil {
			return map[string]any{"ok": false, "error": "thread_not_found"}
		}
		list = append([]*Message{parent}, c.replies[ts]...)
	} else if c != nil {
		list = slices.Clone(c.messages)
	}

	inclusive := p.Get("inclusive") == "true" || p.Get("inclusive") == "1"
	oldest, latest := p.Get("oldest"), p.Get("latest")
	var in []*Message
	for i, m := range list {
		isParent := method == "conversations.replies" && i == 0
		if !isParent && !inRange(m.TS, oldest, latest, inclusive) {
			continue
		}
		in = append(in, m)
	}
	if newestFirst {
		slices.Reverse(in)
	}

	limit := 100
	if n, err := strconv.Atoi(p.Get("limit")); err == nil && n > 0 {
		limit = min(n, 1000)
	}
	start := 0
	if cur := p.Get("cursor"); cur != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(cur, "page:"))
		if err != nil || n < 0 || n > len(in) {
			return map[string]any{"ok": false, "error": "invalid_cursor"}
		}
		start = n
	}
	end := min(start+limit, len(in))
	withMetadata := p.Get("include_all_metadata") == "true" || p.Get("include_all_metadata") == "1"
	msgs := []map[string]any{}
	for _, m := range in[start:end] {
		msgs = append(msgs, m.json(withMetadata))
	}
	out := map[string]any{"ok": true, "messages": msgs, "has_more": end < len(in)}
	next := ""
	if end < len(in) {
		next = fmt.Sprintf("page:%d", end)
	}
	out["response_metadata"] = map[string]any{"next_cursor": next}
	if newestFirst {
		out["pin_count"] = 0
	}
	return out
}

// inRange reports whether ts lies between oldest and latest (either may be
// empty: unbounded), the ends included only when inclusive.
func inRange(ts, oldest, latest string, inclusive bool) bool {
	if oldest != "" {
		c := tsCompare(ts, oldest)
		if c < 0 || (c == 0 && !inclusive) {
			return false
		}
	}
	if latest != "" {
		c := tsCompare(ts, latest)
		if c > 0 || (c == 0 && !inclusive) {
			return false
		}
	}
	return true
}

func insertByTS(list []*Message, m *Message) []*Message {
	i, _ := slices.BinarySearchFunc(list, m.TS, func(e *Message, ts string) int { return tsCompare(e.TS, ts) })
	return slices.Insert(list, i, m)
}

// tsMicros reads a Slack ts ("1700000000.000100") as microseconds.
func tsMicros(ts string) (int64, bool) {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return 0, false
	}
	frac = (frac + "000000")[:6]
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, false
	}
	return s*1e6 + f, true
}

// tsCompare orders two ts values numerically ("" sorts first).
func tsCompare(a, b string) int {
	x, _ := tsMicros(a)
	y, _ := tsMicros(b)
	return cmp.Compare(x, y)
}

func tsLess(a, b string) bool { return tsCompare(a, b) < 0 }
