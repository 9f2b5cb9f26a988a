// Package fakeslack is a small stand-in for Slack in tests: a Web API server
// (chat.postMessage, chat.update, chat.delete, reactions.add, a workflow
// step's functions.completeSuccess / completeError: functions.go, and the
// streaming methods and assistant.threads.setStatus: stream.go), its Socket Mode side
// (apps.connections.open and a real WebSocket server, see Socket), and a
// recording endpoint for response_url and forward targets, all on 127.0.0.1.
//
// The Web API speaks Slack's wire format: form-encoded requests, HTTP 200 with
// {"ok":true,…} or {"ok":false,"error":"…"}, HTTP 429 with Retry-After. Every
// call is recorded. Responses are scripted per method and used in order; when
// a method's script runs out the call succeeds. A call whose token is not the
// server's, nor one its OAuth side issued (oauth.go), gets invalid_auth (or
// not_authed when it has none; token_expired, token_revoked for issued ones).
//
// It keeps a history per channel (history.go): chat.postMessage stores what
// it posts, with its metadata; AddMessage seeds other messages; and
// conversations.history / conversations.replies page through them as Slack
// does. Every token posts as its own bot (Bot: the server's token as
// SetBot says, others added with AddToken, OAuth-issued ones as their
// grant): chat.postMessage stamps the message with that bot's user, bot_id
// and app_id, and auth.test answers with them. Its clock can be set off
// the host's (SetClockOffset): the ts it mints and its Date header follow
// it, as Slack's would on a host whose clock is wrong. A scripted Response can
// also perform the call first (Store) and then answer badly: hang (Delay),
// drop the connection (Drop), or send an error or a 5xx.
//
// Limits: it validates nothing else (no channel, scope or block checks), so
// chat.update of an unknown ts succeeds.
package fakeslack

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is one Web API request as the server received it.
type Call struct {
	Method string     // "chat.postMessage"
	Token  string     // from "Authorization: Bearer …", else the form's token field
	Auth   string     // the Authorization header as sent (slack-go sends the token in the form instead)
	Params url.Values // every form parameter, token included
	Time   time.Time
	// Thread is the "channel/thread_ts" the call acts in, when it names
	// one: its thread_ts (or, for agents.sessions.setStatus and
	// assistant.threads.setStatus, channel_id and thread_ts), or the
	// thread of the stored message its ts names (sessions.go).
	Thread string
	// Answer is what the fake answered: "ok", Slack's error code, or
	// "http_429" and the like.
	Answer string
}

// Response is one scripted answer. The zero value is the method's normal
// success envelope.
type Response struct {
	Status     int           // HTTP status; 0 means 200
	Error      string        // when set: {"ok":false,"error":Error}
	RetryAfter string        // Retry-After header value, sent as is when set
	Body       string        // when set: the body, sent as is (Error and the envelope are ignored)
	Delay      time.Duration // wait this long (or until the client gives up) before answering
	// Store performs the call as a success would (chat.postMessage stores
	// its message) before the rest of the response is sent, so a post can
	// land and its answer be lost.
	Store bool
	// Drop closes the connection instead of answering (after Delay).
	Drop bool
	// Hold, when not nil, holds the answer (after Store, before Delay)
	// until it is closed or the client gives up: a call held mid-way.
	Hold <-chan struct{}
}

// OK is the method's normal success.
func OK() Response { return Response{} }

// Err is HTTP 200 {"ok":false,"error":code}, how Slack reports method errors.
func Err(code string) Response { return Response{Error: code} }

// RateLimited is HTTP 429 with Retry-After: retryAfter, or with no header
// when retryAfter is empty.
func RateLimited(retryAfter string) Response {
	return Response{Status: http.StatusTooManyRequests, RetryAfter: retryAfter, Error: "ratelimited"}
}

// MissingScope is Slack's answer to a token that lacks a scope: HTTP 200
// {"ok":false,"error":"missing_scope","needed":needed,…}.
func MissingScope(needed string) Response {
	b, _ := json.Marshal(map[string]any{"ok": false, "error": "missing_scope", "needed": needed, "provided": "chat:write"})
	return Response{Body: string(b)}
}

// Status is a bare HTTP status with a short text body, like Slack's 5xx pages.
func Status(code int) Response {
	return Response{Status: code, Body: http.StatusText(code)}
}

// Slow is a success that takes d to arrive.
func Slow(d time.Duration) Response { return Response{Delay: d} }

// Server is a fake Slack Web API.
type Server struct {
	srv   *httptest.Server
	token string

	mu     sync.Mutex
	calls  []Call
	script map[string][]Response
	sock   *Socket // Socket Mode side, when enabled

	history map[string]*channel // channel id → its messages (history.go)
	lastTS  int64               // the newest ts handed out, in microseconds
	botUser string              // auth.test's user_id, the poster of chat.postMessage
	botID   string
	appID   string
	team    string
	bots    map[string]Bot // AddToken: other tokens and who they post as
	offset  time.Duration  // SetClockOffset: the fake's clock minus the host's

	oauth *oauthState // oauth.go: client credentials, issued tokens; nil until used

	execs   map[string]*Execution // functions.go: workflow step executions, by id
	streams *streams              // stream.go: open streams, deleted messages; nil until used
	agents  *agentState           // sessions.go: sessions, stopped streams, rate limits; nil until used
}

// New starts a Web API server that accepts token and stops it when the test ends.
func New(tb testing.TB, token string) *Server {
	tb.Helper()
	s := &Server{token: token, script: map[string][]Response{},
		botUser: "U0FAKEBOT", botID: "B0FAKEBOT", appID: "A0FAKEAPP", team: "T0FAKE", bots: map[string]Bot{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.srv.Close)
	return s
}

// URL is the API base with its trailing slash, for slack.OptionAPIURL.
func (s *Server) URL() string { return s.srv.URL + "/" }

// SetBot sets the bot user and bot id that auth.test reports and that
// chat.postMessage posts as (defaults U0FAKEBOT, B0FAKEBOT), and the team.
func (s *Server) SetBot(userID, botID, team string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.botUser, s.botID, s.team = userID, botID, team
}

// Bot is who a token posts as: the user, bot_id and app_id that
// chat.postMessage stamps on its messages and that auth.test answers.
type Bot struct {
	UserID, BotID, AppID, TeamID string
}

// AddToken makes token valid too, posting as b: another app in the same
// workspace (a staging app beside production), or another installation.
func (s *Server) AddToken(token string, b Bot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bots[token] = b
}

// SetClockOffset sets the fake's clock off the host's by d: the ts of every
// message it stores from now on, and the Date header of its answers, read
// the host's time plus d (a negative d: Slack's clock is behind ackd's).
func (s *Server) SetClockOffset(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset = d
}

// Now is the fake's clock: the host's plus the offset.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nowLocked()
}

func (s *Server) nowLocked() time.Time { return time.Now().Add(s.offset) }

// botOf is who token posts as; s.mu is held.
func (s *Server) botOf(token string) Bot {
	if b, ok := s.bots[token]; ok {
		return b
	}
	if s.oauth != nil {
		if t := s.oauth.tokens[token]; t != nil {
			return t.grant.bot()
		}
	}
	return Bot{UserID: s.botUser, BotID: s.botID, AppID: s.appID, TeamID: s.team}
}

// Script queues responses for method ("chat.postMessage"); each call uses the
// next one, and calls after the last succeed.
func (s *Server) Script(method string, rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script[method] = append(s.script[method], rs...)
}

// Calls returns every call so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the calls to one method, oldest first.
func (s *Server) CallsTo(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sock := s.sock
	s.mu.Unlock()
	if sock != nil && r.URL.Path == socketPath {
		sock.serveWS(w, r)
		return
	}
	if r.URL.Path == "/oauth/v2/authorize" {
		s.serveAuthorize(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c := Call{
		Method: strings.TrimPrefix(r.URL.Path, "/"),
		Auth:   r.Header.Get("Authorization"),
		Params: r.Form,
		Time:   time.Now(),
	}
	c.Token = r.Form.Get("token")
	if t, ok := strings.CutPrefix(c.Auth, "Bearer "); ok {
		c.Token = t
	}
	if functionsMethod(c.Method) {
		readJSONParams(r, c.Params) // functions.go: slack-go sends these as JSON
	}

	s.mu.Lock()
	c.Thread = s.threadOfLocked(c)
	s.calls = append(s.calls, c)
	callIndex := len(s.calls) - 1
	resp, scripted := s.next(c.Method)
	if !scripted {
		resp, scripted = s.rateLimitLocked(c.Method)
	}
	tokenErr := s.tokenError(c.Token)
	if functionsMethod(c.Method) && s.execToken(c.Token) {
		tokenErr = "" // an execution's own token: completeFunction checks it
	}
	w.Header().Set("Date", s.nowLocked().UTC().Format(http.TimeFormat))
	s.mu.Unlock()

	switch {
	case scripted:
	case c.Method == "apps.connections.open" && sock != nil:
		sock.serveOpen(w, c.Token)
		return
	case c.Method == "oauth.v2.access": // client credentials, not a token
	case tokenErr != "":
		resp = Err(tokenErr)
	}
	ok := func() any {
		s.mu.Lock()
		defer s.mu.Unlock()
		body := s.envelope(c)
		s.calls[callIndex].Answer = answerOf(body)
		return body
	}
	s.mu.Lock()
	switch {
	case resp.Status != 0 && resp.Status != http.StatusOK:
		s.calls[callIndex].Answer = "http_" + strconv.Itoa(resp.Status)
	case resp.Error != "":
		s.calls[callIndex].Answer = resp.Error
	case resp.Body != "" || resp.Drop:
		s.calls[callIndex].Answer = "scripted"
	}
	s.mu.Unlock()
	if resp.Store {
		body := ok() // performed now, whatever the answer will be
		ok = func() any { return body }
	}
	if c.Method == "oauth.v2.access" {
		s.oauthDate(w)
	}
	write(w, r, resp, ok)
}

// next pops method's next scripted response; s.mu is held.
func (s *Server) next(method string) (Response, bool) {
	q := s.script[method]
	if len(q) == 0 {
		return Response{}, false
	}
	s.script[method] = q[1:]
	return q[0], true
}

// envelope is the success body Slack sends for the call's method, after
// performing it (chat.postMessage stores its message); s.mu is held.
func (s *Server) envelope(c Call) any {
	p := c.Params
	switch c.Method {
	case "chat.postMessage":
		m := s.postMessage(p, s.botOf(c.Token))
		msg := m.json(false)
		return map[string]any{"ok": true, "channel": p.Get("channel"), "ts": m.TS, "message": msg}
	case "chat.update":
		if code := s.update(p); code != "" {
			return fail(code)
		}
		b := s.botOf(c.Token)
		return map[string]any{
			"ok": true, "channel": p.Get("channel"), "ts": p.Get("ts"), "text": p.Get("text"),
			"message": map[string]any{"type": "message", "text": p.Get("text"), "user": b.UserID, "bot_id": b.BotID, "app_id": b.AppID},
		}
	case "reactions.add":
		return map[string]any{"ok": true}
	case "functions.completeSuccess", "functions.completeError":
		return s.completeFunction(c)
	case "conversations.history", "conversations.replies":
		return s.historyPage(c.Method, p)
	case "oauth.v2.access":
		return s.oauthAccess(p)
	case "auth.test":
		if b, ok := s.authTest(c.Token); ok {
			return b
		}
		b := s.botOf(c.Token)
		return map[string]any{"ok": true, "url": "https://fake.slack.test/", "team": "Fake",
			"user": "fakebot", "team_id": b.TeamID, "user_id": b.UserID, "bot_id": b.BotID, "app_id": b.AppID}
	default:
		if b, ok := s.streamEnvelope(c); ok {
			return b
		}
		return map[string]any{"ok": false, "error": "unknown_method"}
	}
}

// write sends resp; ok builds the success body when resp is a plain success.
func write(w http.ResponseWriter, r *http.Request, resp Response, ok func() any) {
	if resp.Hold != nil {
		select {
		case <-resp.Hold:
		case <-r.Context().Done():
			return
		}
	}
	if resp.Delay > 0 {
		t := time.NewTimer(resp.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	if resp.Drop {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // closes the connection without an answer
	}
	if resp.RetryAfter != "" {
		w.Header().Set("Retry-After", resp.RetryAfter)
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	var body []byte
	switch {
	case resp.Body != "":
		body = []byte(resp.Body)
		if json.Valid(body) {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
	case resp.Error != "":
		body, _ = json.Marshal(map[string]any{"ok": false, "error": resp.Error})
		w.Header().Set("Content-Type", "application/json")
	default:
		body, _ = json.Marshal(ok())
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Post is one request received by a Hook.
type Post struct {
	Header http.Header
	Body   []byte
	Time   time.Time
}

// JSON decodes the body into v, failing the test if it is not JSON.
func (p Post) JSON(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(p.Body, v); err != nil {
		tb.Fatalf("post body %q: %v", p.Body, err)
	}
}

// Hook records what is POSTed to it: a Slack response_url, or a team's
// forward handler. Its default answer is HTTP 200 {"ok":true}; script others
// (404 "expired_url", 500, Body "ok", a Delay…) with Script.
type Hook struct {
	srv *httptest.Server

	mu     sync.Mutex
	posts  []Post
	script []Response
}

// NewHook starts a recording endpoint and stops it when the test ends.
func NewHook(tb testing.TB) *Hook {
	tb.Helper()
	h := &Hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	tb.Cleanup(h.srv.Close)
	return h
}

// URL is the endpoint's address; any path is accepted.
func (h *Hook) URL() string { return h.srv.URL + "/hook" }

// Script queues responses; each request uses the next one, later ones get
// the default.
func (h *Hook) Script(rs ...Response) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.script = append(h.script, rs...)
}

// Posts returns every request so far, oldest first.
func (h *Hook) Posts() []Post {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Post(nil), h.posts...)
}

func (h *Hook) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.posts = append(h.posts, Post{Header: r.Header.Clone(), Body: body, Time: time.Now()})
	var resp Response
	if len(h.script) > 0 {
		resp, h.script = h.script[0], h.script[1:]
	}
	h.mu.Unlock()
	write(w, r, resp, func() any { return map[string]any{"ok": true} })
}
