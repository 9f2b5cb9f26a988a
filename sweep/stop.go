package sweep

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/store"
)

// A user's Stop (DESIGN §12 "Agent sessions"; Slack, 2026-08).
//
// Slack shows a Stop button on every streamed answer while its session is
// processing. Pressed, Slack stops the stream (chat.appendStream answers
// stopped_by_user) and sends agent_session_stopped (channel, user,
// thread_ts, streaming_message_ts[], event_ts). Either ends the stream
// rows of that channel and thread as a cancel, not a failure:
//
//   - At ingress, every agent_session_stopped event gets an outbox row of
//     ackd's own (StopRow, effect stream_stop, no route: never paused)
//     beside whatever routes take the event. Its perform records the stop
//     in the database (store.StreamStops: the thread's newest stop, on
//     Slack's clock), tells the streams this process runs at once, and sets
//     the session active.
//   - A stream row reads the thread's stop before it asks the agent, and
//     every StreamConfig.StopPoll while it streams (a primary-key read, in
//     the sweep, never on the ack path): so a stream on another replica
//     notices within StopPoll. A stop counts for a row when it is newer
//     than the row's own event (Slack's timestamps, never ackd's clock): a
//     question asked in the thread after the stop is not cancelled.
//   - A stopped row closes the agent's request (its connection is closed),
//     appends, starts and posts nothing more (no rollover, no failed_text),
//     sets the session active and ends done with the note "stopped by the
//     user", never parked. chat.appendStream's stopped_by_user is the same
//     stop, with or without the event.

// EffectStreamStop is the effect of the row every agent_session_stopped
// event brings (StopRow).
const EffectStreamStop = "stream_stop"

// EventAgentSessionStopped is Slack's event for a user's Stop.
const EventAgentSessionStopped = "agent_session_stopped"

// DefaultStopPoll is how often a running stream reads its thread's stop
// from the database (StreamConfig.StopPoll).
const DefaultStopPoll = 2 * time.Second

// NoteStopped is a stopped stream row's note.
const NoteStopped = "stopped by the user"

// StopRow is the row ackd records with an agent_session_stopped event
// (facts: the event's, as the ingress reads them, EventID among them),
// keyed by the event so that a redelivery adds nothing. It names the
// stored request (RequestID), from which its perform reads the event's
// event_ts and streaming_message_ts; its payload names no route, so no
// pause holds it. The ingress appends it to the event's rows whatever the
// routes: the event is recorded like every event even when no route takes
// it.
func StopRow(facts Facts) (store.NewRow, error) {
	p := Payload{Source: SourceEvent, Facts: facts}
	enc, err := p.Encode()
	if err != nil {
		return store.NewRow{}, err
	}
	return store.NewRow{Key: facts.EventID + ":" + EffectStreamStop, Effect: EffectStreamStop, Payload: enc,
		RequestID: facts.EventID}, nil
}

// stoppedEvent is what an agent_session_stopped event says.
type stoppedEvent struct {
	Channel   string   `json:"channel"`
	User      string   `json:"user"`
	ThreadTS  string   `json:"thread_ts"`
	EventTS   string   `json:"event_ts"`
	Streaming []string `json:"streaming_message_ts"`
}

// streamStop performs a stream_stop row: the stop is recorded, the streams
// of this process told, and the session set active.
func (e *effects) streamStop(ctx context.Context, job Job) (Outcome, error) {
	var env struct {
		Event stoppedEvent `json:"event"`
	}
	if len(job.Payload.Raw) > 0 {
		_ = json.Unmarshal(job.Payload.Raw, &env) // best effort: the facts below stand in
	}
	ev := env.Event
	ev.Channel = cmp.Or(ev.Channel, job.Payload.Facts.Channel)
	ev.ThreadTS = cmp.Or(ev.ThreadTS, job.Payload.Facts.ThreadTS)
	ev.EventTS = cmp.Or(ev.EventTS, job.Payload.Facts.TS)
	stopUS, ok := store.SlackTSMicros(ev.EventTS)
	if ev.Channel == "" || ev.ThreadTS == "" || !ok {
		return Outcome{}, permanent("bad_stop", "agent_session_stopped names no channel, thread or event_ts (channel %q, thread_ts %q, event_ts %q)",
			ev.Channel, ev.ThreadTS, ev.EventTS)
	}
	if job.Stops == nil {
		return Outcome{}, &Failure{Class: Retryable, Code: "no_store", NotSent: true, Err: errors.New("stream_stop: no store to record the stop in")}
	}
	newer, err := job.Stops.RecordStop(ctx, store.StreamStop{Channel: ev.Channel, ThreadTS: ev.ThreadTS, StopTS: ev.EventTS,
		EventID: job.Payload.Facts.EventID})
	if err != nil {
		return Outcome{}, &Failure{Class: Retryable, Code: "record_stop", NotSent: true, Err: err}
	}
	told := e.stops.stop(ev.Channel, ev.ThreadTS, stopUS)
	res := map[string]any{"channel": ev.Channel, "thread_ts": ev.ThreadTS, "stop_ts": ev.EventTS, "newer": newer}
	if told > 0 {
		res["streams_told"] = told
	}
	if len(ev.Streaming) > 0 {
		res["streaming_message_ts"] = ev.Streaming
	}
	api, tok, err := e.client(ctx, job)
	if err != nil {
		e.log.WarnContext(ctx, "stop recorded; the session's status was not set", "key", job.Row.Key, "err", err)
		res["session"] = "not_set"
		return result(res), nil
	}
	sc := sessionCall{e: e, api: api, token: tok, install: job.Payload.Facts.Install, key: job.Row.Key}
	res["session"] = sc.set(ctx, ev.Channel, ev.ThreadTS, "active")
	e.log.InfoContext(ctx, "a user stopped the agent's answer", "key", job.Row.Key, "channel", ev.Channel,
		"thread_ts", ev.ThreadTS, "stop_ts", ev.EventTS, "streams_told", told)
	return result(res), nil
}

// stopBoard is the streams this process runs, by thread, each told at once
// when this process performs a stop of its thread.
type stopBoard struct {
	mu sync.Mutex
	m  map[string]map[*stopWatch]struct{}
}

// stopWatch is one stream's registration on the board.
type stopWatch struct {
	askedUS int64 // the stream row's own event (Slack's clock)
	once    sync.Once
	c       chan struct{} // closed when a newer stop is performed here
}

func (b *stopBoard) watch(channel, thread string, askedUS int64) (*stopWatch, func()) {
	w := &stopWatch{askedUS: askedUS, c: make(chan struct{})}
	k := channel + "/" + thread
	b.mu.Lock()
	if b.m == nil {
		b.m = map[string]map[*stopWatch]struct{}{}
	}
	if b.m[k] == nil {
		b.m[k] = map[*stopWatch]struct{}{}
	}
	b.m[k][w] = struct{}{}
	b.mu.Unlock()
	return w, func() {
		b.mu.Lock()
		delete(b.m[k], w)
		if len(b.m[k]) == 0 {
			delete(b.m, k)
		}
		b.mu.Unlock()
	}
}

// stop tells the thread's streams older than stopUS; it returns how many.
func (b *stopBoard) stop(channel, thread string, stopUS int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for w := range b.m[channel+"/"+thread] {
		if stopCounts(stopUS, w.askedUS) {
			w.once.Do(func() { close(w.c) })
			n++
		}
	}
	return n
}

// stopCounts reports whether a stop at stopUS cancels a row whose event is
// at askedUS: the stop is newer. A row whose event time is unknown (0) is
// stopped by any stop of its thread.
func stopCounts(stopUS, askedUS int64) bool { return stopUS > askedUS }

// askedTS is the Slack ts of a stream row's own event: the message's ts,
// else the event's event_ts, else the thread's (the oldest a question in it
// can be).
func askedTS(p Payload, tgt streamTarget) string {
	if p.Facts.TS != "" {
		return p.Facts.TS
	}
	var env struct {
		Event struct {
			EventTS string `json:"event_ts"`
		} `json:"event"`
	}
	if len(p.Raw) > 0 && json.Unmarshal(p.Raw, &env) == nil && env.Event.EventTS != "" {
		return env.Event.EventTS
	}
	return tgt.thread
}

// stopState is a streamer's view of its thread's stop.
type stopState struct {
	stopped atomic.Bool
	mu      sync.Mutex
	why     string
	cancel  func() // closes the agent's request and ends the attempt's Slack calls
}

// mark records the stop (the first reason wins) and cancels the attempt's
// work; it reports whether this call marked it.
func (st *stopState) mark(why string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopped.Load() {
		return false
	}
	st.why = why
	st.stopped.Store(true)
	if st.cancel != nil {
		st.cancel()
	}
	return true
}

func (st *stopState) reason() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.why
}

// errStopped ends an attempt whose answer the user stopped.
var errStopped = errors.New("the user stopped the answer")

// sessionCall sets an agent session's status (agents.sessions.setStatus),
// falling back to the thread's status (assistant.threads.setStatus) for an
// app that is not an agent or a workspace without sessions.
type sessionCall struct {
	e       *effects
	api     *slack.Client
	token   string
	install string
	key     string
}

// Session outcomes (the stop row's result "session").
const (
	sessionSet      = "set"
	sessionFallback = "fallback" // not an agent, or sessions off: assistant.threads.setStatus instead
	sessionFailed   = "failed"
)

// noSessionsFor is how long an installation whose agents.sessions.setStatus
// answered not_authorized or feature_disabled is not asked again.
const noSessionsFor = 10 * time.Minute

// set sets the session of channel/thread to status; a failure is logged,
// never the row's. With no sessions (not_authorized, feature_disabled),
// "active" clears the thread's status instead ("processing" has no
// fallback beyond the [stream] status the stream sets itself).
func (c sessionCall) set(ctx context.Context, channel, thread, status string) string {
	if until, ok := c.e.noSessions.Load(c.install); ok && time.Now().Before(until.(time.Time)) {
		return c.fallback(ctx, channel, thread, status)
	}
	err := c.e.callForm(ctx, c.token, "agents.sessions.setStatus", url.Values{
		"channel_id": {channel}, "thread_ts": {thread}, "status": {status}})
	switch code := slackErr(err); {
	case err == nil:
		return sessionSet
	case code == "not_authorized" || code == "feature_disabled":
		c.e.noSessions.Store(c.install, time.Now().Add(noSessionsFor))
		c.e.log.InfoContext(ctx, "agents.sessions.setStatus refused ("+code+"): this app is not an agent, or the workspace has sessions off; the thread's status is used instead (for "+noSessionsFor.String()+")",
			"key", c.key)
		return c.fallback(ctx, channel, thread, status)
	default:
		c.e.log.Log(ctx, statusLevel(err), "agents.sessions.setStatus failed; the answer goes on without it", "key", c.key,
			"channel", channel, "status", status, "err", err)
		return sessionFailed
	}
}

func (c sessionCall) fallback(ctx context.Context, channel, thread, status string) string {
	if status != "active" {
		return sessionFallback
	}
	err := c.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: channel, ThreadTS: thread, Status: ""})
	if err != nil {
		c.e.log.Log(ctx, statusLevel(err), "assistant.threads.setStatus failed", "key", c.key, "channel", channel, "err", err)
		return sessionFailed
	}
	return sessionFallback
}

// callForm calls a Web API method slack-go v0.35.0 does not have
// (agents.sessions.*: slack-go issue #1606) as a form POST with token. Its
// errors are slack-go's (RateLimitedError, StatusCodeError,
// SlackErrorResponse), so Classify and slackErr read them as any call's.
func (e *effects) callForm(ctx context.Context, token, method string, form url.Values) error {
	e.log.DebugContext(ctx, "slack call", "method", method, "channel", form.Get("channel_id"), "status", form.Get("status"))
	return e.callRaw(ctx, token, method, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
}

// callRaw POSTs body to a Web API method with token and reads Slack's
// answer into slack-go's errors (RateLimitedError with Retry-After,
// StatusCodeError, SlackErrorResponse): the one request path of the calls
// slack-go cannot make as ackd needs (callForm, callFunctions).
func (e *effects) callRaw(ctx context.Context, token, method, contentType string, body io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.apiURL+method, body)
	if err != nil {
		return permanent("invalid_url", "%s: %v", method, err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("User-Agent", "ackd")
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		return &slack.RateLimitedError{RetryAfter: retryAfter(resp.Header, e.cfg.Now())}
	}
	if resp.StatusCode != http.StatusOK {
		return slack.StatusCodeError{Code: resp.StatusCode, Status: resp.Status}
	}
	raw, err := readBody(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if !r.OK {
		return slack.SlackErrorResponse{Err: r.Error}
	}
	return nil
}
