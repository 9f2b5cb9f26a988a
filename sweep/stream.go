package sweep

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/store"
)

// Agent replies: the stream effect (DESIGN §11, "Agent replies").
//
// A stream row answers a message (app_mention, a DM or thread message) or
// an assistant thread (assistant_thread_started) with the team's agent:
//
//  1. Status first: assistant.threads.setStatus in the event's thread
//     ([stream] status), before the agent is asked.
//  2. The agent is asked as forward asks a handler (forwardRequest: signed,
//     Idempotency-Key = the row's key, the attempt number), with
//     Accept: application/x-ndjson, application/json.
//  3. A JSON answer {"text", "blocks"} is posted once in the thread: a post
//     row enqueued with the fenced completion (key {key}:reply), which
//     carries its metadata and is confirmed before any repeat (confirm.go).
//  4. An NDJSON answer is read line by line: {"text": …} appends, {"status":
//     …} sets the status. The text is streamed into the thread
//     (streamer.go): chat.startStream, chat.appendStream as text arrives,
//     chat.stopStream at the end with the row's key in its metadata; what
//     was received and which messages show what is saved in the row as it
//     goes (Job.Progress), fenced by the claim.
//
// One answer is shown once. A message that Slack stops streaming
// (message_not_in_streaming_state: streams expire after minutes) is
// continued in a new message in the same thread from the first character
// the old one does not show. An attempt that starts after an earlier one
// showed text (a crash, a lost lease, a dropped agent connection) asks the
// agent again with the same Idempotency-Key and shows its answer in the
// SAME messages (streamer.recover): laid out again over them in order,
// chat.update of each, the rest in new messages, the earlier messages left
// without text deleted. If the agent answers differently the second time,
// the messages show the second answer.
//
// Before any text, an agent failure is retried as forward's are; one that
// parks the row (permanent, or the last attempt) clears the status and, with
// [stream] failed_text, posts that apology. After text, a failure that parks
// the row ends the messages with what was received and a note.

// Defaults of [stream].
const (
	DefaultStreamStatus   = "is thinking…"
	DefaultStreamMaxChars = 40_000
	// DefaultStreamTimeout is a stream route's timeout when it names none:
	// an agent's answer takes longer than a post.
	DefaultStreamTimeout = 5 * time.Minute
)

// StreamMessageChars is the most characters one message shows: Slack's
// limit on markdown_text in one call (chat.startStream, appendStream,
// stopStream, chat.update, chat.postMessage). A longer answer continues in
// the next message of the thread, so that every message can be set again
// whole with one chat.update.
const StreamMessageChars = 12_000

// StreamConfig is [stream]: what stream rows say besides the agent's answer.
type StreamConfig struct {
	// Status is set in the thread before the agent is asked (default
	// DefaultStreamStatus).
	Status string
	// FailedText, when set, is posted in the thread when a row parks
	// before any of its answer was shown; empty (the default) posts
	// nothing.
	FailedText string
	// MaxChars is the longest answer shown (default DefaultStreamMaxChars):
	// a longer one is cut there, with a note, and the agent's connection
	// closed.
	MaxChars int
	// FlushEvery is the least time between two appends to one message
	// (default 500ms): text that arrives meanwhile goes out together.
	FlushEvery time.Duration
	// SaveEvery is the least time between two saves of the progress that
	// are not forced by a new message (default 500ms); 2,048 new
	// characters force one sooner.
	SaveEvery time.Duration
	// StopPoll is how often a running stream reads its thread's stop
	// from the database (default DefaultStopPoll): a stop performed by
	// another process (a replica) is noticed within it. A stop performed
	// by this process is noticed at once.
	StopPoll time.Duration
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Status == "" {
		c.Status = DefaultStreamStatus
	}
	if c.MaxChars <= 0 {
		c.MaxChars = DefaultStreamMaxChars
	}
	if c.FlushEvery <= 0 {
		c.FlushEvery = 500 * time.Millisecond
	}
	if c.SaveEvery <= 0 {
		c.SaveEvery = 500 * time.Millisecond
	}
	if c.StopPoll <= 0 {
		c.StopPoll = DefaultStopPoll
	}
	return c
}

// saveChars is how many new characters force a save of the progress before
// SaveEvery has passed.
const saveChars = 2048

// What a stream reports to its observer (the metrics).
const (
	StreamStarted    = "started"     // a message began (chat.startStream, or a post in a recovery)
	StreamRolledOver = "rolled_over" // Slack stopped a message; the answer went on in a new one
	StreamRecovered  = "recovered"   // an answer was finished in the messages an earlier attempt started
	StreamCut        = "cut"         // an answer was cut ([stream] max_chars, or the route's timeout)
	StreamStopped    = "stopped"     // the user pressed Stop (stop.go)
)

// StreamObserver is told what streams do (metrics). It must be safe for
// concurrent use.
type StreamObserver interface {
	// Streamed counts one event (StreamStarted…); reason qualifies
	// StreamCut: "max_chars" or "timeout".
	Streamed(event, reason string)
	// FirstText is the time from asking the agent to its first text.
	FirstText(d time.Duration)
	// Appended is the time one chat.appendStream call took.
	Appended(d time.Duration)
}

type noStreamObserver struct{}

func (noStreamObserver) Streamed(string, string) {}
func (noStreamObserver) FirstText(time.Duration) {}
func (noStreamObserver) Appended(time.Duration)  {}

// Content types of an agent's answer.
const (
	acceptAgent = "application/x-ndjson, application/json"
)

// ndjsonTypes are the media types read as NDJSON, one JSON object a line.
var ndjsonTypes = map[string]bool{"application/x-ndjson": true, "application/ndjson": true, "application/jsonl": true}

// streamTarget is the thread a stream row answers in.
type streamTarget struct {
	channel, thread string
	team, user      string // the asker, for chat.startStream's recipient_*
}

// streamTargetOf finds the thread: a message's own thread (thread_ts, or
// its ts, which starts one), or the assistant thread an
// assistant_thread_started event names.
func streamTargetOf(p Payload) streamTarget {
	t := streamTarget{channel: p.Facts.Channel, thread: cmp.Or(p.Facts.ThreadTS, p.Facts.TS),
		team: p.Facts.Team, user: p.Facts.User}
	if t.channel != "" && t.thread != "" {
		return t
	}
	var env struct {
		TeamID string `json:"team_id"`
		Event  struct {
			AssistantThread struct {
				UserID    string `json:"user_id"`
				ChannelID string `json:"channel_id"`
				ThreadTS  string `json:"thread_ts"`
			} `json:"assistant_thread"`
		} `json:"event"`
	}
	if len(p.Raw) > 0 && json.Unmarshal(p.Raw, &env) == nil {
		at := env.Event.AssistantThread
		t.channel, t.thread = cmp.Or(t.channel, at.ChannelID), cmp.Or(t.thread, at.ThreadTS)
		t.user, t.team = cmp.Or(t.user, at.UserID), cmp.Or(t.team, env.TeamID)
	}
	return t
}

// stream performs a stream row (see the top of this file).
func (e *effects) stream(ctx context.Context, job Job) (Outcome, error) {
	p := job.Payload
	if p.Params.URL == "" {
		return Outcome{}, permanent("no_url", "stream: the route names no url")
	}
	tgt := streamTargetOf(p)
	if tgt.channel == "" || tgt.thread == "" {
		return Outcome{}, permanent("no_thread", "stream: the event names no thread to answer in (channel %q, thread %q)", tgt.channel, tgt.thread)
	}
	env, err := e.openRaw(job, p.Raw)
	if err != nil {
		return Outcome{}, err
	}
	body, h, err := e.forwardRequest(job, env)
	if err != nil {
		return Outcome{}, err
	}
	h.Set("Accept", acceptAgent)
	api, tok, err := e.client(ctx, job)
	if err != nil {
		return Outcome{}, err
	}
	s := &streamer{e: e, api: api, job: job, tgt: tgt, cfg: e.cfg.Stream.withDefaults(), obs: e.cfg.StreamObserver,
		log: e.log.With("key", job.Row.Key, "attempt", job.Attempt), cur: -1,
		sess: sessionCall{e: e, api: api, token: tok, install: p.Facts.Install, key: job.Row.Key}}
	if s.obs == nil {
		s.obs = noStreamObserver{}
	}
	if err := s.load(ctx); err != nil {
		return Outcome{}, err
	}
	s.readBy, s.readFor = readBy(ctx, time.Now(), job.Timeout)

	// A user's Stop (stop.go): this process's stops are heard from before
	// the first read of the database's, so that none falls between; a
	// stop ends every call of the attempt (sctx) and closes the agent's
	// request.
	sctx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	s.user.cancel = cancelAll
	askedUS, _ := store.SlackTSMicros(askedTS(p, tgt))
	w, unwatch := e.stops.watch(tgt.channel, tgt.thread, askedUS)
	defer unwatch()
	if stopped, err := s.stopRecorded(ctx, askedUS); err != nil {
		return Outcome{}, err
	} else if stopped {
		s.user.mark("agent_session_stopped, before the answer began")
		return s.endStopped(ctx)
	}
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		s.watchStops(sctx, w, askedUS)
	}()
	out, err := s.run(sctx, body, h)
	cancelAll()
	<-watching
	if s.user.stopped.Load() {
		return s.endStopped(ctx)
	}
	return out, err
}

// run asks the agent and shows its answer (see the top of this file).
func (s *streamer) run(ctx context.Context, body []byte, h http.Header) (Outcome, error) {
	e, job := s.e, s.job
	// Status first, then the agent. A stream an earlier attempt left open
	// is stopped first: nobody appends to it any more.
	s.sess.set(ctx, s.tgt.channel, s.tgt.thread, "processing")
	s.setStatus(ctx, s.cfg.Status)
	if s.recovering {
		s.stopOld(ctx)
	}
	e.log.DebugContext(ctx, "stream: asking the agent", "key", job.Row.Key, "attempt", job.Attempt, "recovering", s.recovering)
	asked := time.Now()
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := e.sendJSON(actx, job.Payload.Params.URL, body, h)
	if err != nil {
		return s.failed(ctx, Classify(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := readBody(resp.Body)
		return s.failed(ctx, httpResponse{status: resp.StatusCode, header: resp.Header, body: b}.failure(e.cfg.Now()))
	}
	ctype := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ctype)
	if !ndjsonTypes[mt] {
		b, err := readBody(resp.Body)
		if err != nil {
			return s.failed(ctx, Classify(err))
		}
		return s.jsonAnswer(ctx, b, ctype, resp.StatusCode, time.Since(asked))
	}
	rep := readAgent(resp.Body, s.cfg.MaxChars, asked)
	defer func() {
		cancel() // closes the agent's connection, so the reader ends
		<-rep.ended
	}()
	if s.recovering {
		return s.recover(ctx, rep, cancel)
	}
	return s.pump(ctx, rep, cancel)
}

// emptyAnswer is the failure of an agent that answered without text: an
// answer that shows nothing is not an answer (retried, then parked with
// [stream] failed_text).
func emptyAnswer(status int, ctype, detail string) *Failure {
	return &Failure{Class: Retryable, Code: "empty_answer",
		Err: fmt.Errorf("the agent answered %d with no text to show (Content-Type %q%s)", status, ctype, detail)}
}

// readBy is when the agent's answer must be complete, and how long that
// gives the agent: a part of the effect's deadline is kept for ending the
// messages (at most 15s, a fifth of the effect's timeout; of what is left
// of ctx when the timeout is not known). The limit is what an answer cut
// at readBy names: the route's timeout less that reserve.
func readBy(ctx context.Context, now time.Time, timeout time.Duration) (time.Time, time.Duration) {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, 0
	}
	if timeout <= 0 {
		timeout = dl.Sub(now)
	}
	reserve := min(15*time.Second, timeout/5)
	return dl.Add(-reserve), timeout - reserve
}

// jsonAnswer handles an agent's JSON answer (or one of no known type).
func (s *streamer) jsonAnswer(ctx context.Context, b []byte, ctype string, status int, took time.Duration) (Outcome, error) {
	var r forwardReply
	if len(bytes.TrimSpace(b)) > 0 && json.Unmarshal(b, &r) != nil {
		r = forwardReply{}
	}
	if r.Text != "" {
		s.obs.FirstText(took)
	}
	if s.recovering {
		if r.Text == "" {
			return s.failed(ctx, emptyAnswer(status, ctype, fmt.Sprintf(", %d bytes", len(b))))
		}
		// An earlier attempt showed part of a streamed answer: this one is
		// shown in the same messages. Blocks cannot be laid out over them.
		text := []rune(r.Text)
		out, err := s.finishRecovery(ctx, text, text, "", true)
		if err == nil && present(r.Blocks) {
			out.Note = strings.TrimSpace(out.Note + " blocks of the answer not shown: it replaced a streamed one")
		}
		return out, err
	}
	job := s.job
	job.Payload.Facts.Channel, job.Payload.Facts.ThreadTS = s.tgt.channel, s.tgt.thread
	fu, ok, err := followUp(job, b)
	if !ok {
		detail := fmt.Sprintf(", %d bytes", len(b))
		if err != nil {
			detail += ": " + err.Error()
		}
		return s.failed(ctx, emptyAnswer(status, ctype, detail))
	}
	res := map[string]any{"status": 200, "reply": "json", "follow_up": fu.Key}
	o := result(res)
	o.FollowUps = append(o.FollowUps, fu)
	// The answer is posted by its own row, now: the session is over.
	s.endSession(ctx)
	return o, nil
}

// failed handles an agent failure (or one of Slack's that ends the attempt).
// A failure that parks the row clears the status and says so in the
// thread: the answer's messages end with what was received and a note, or,
// with nothing shown, [stream] failed_text is posted.
func (s *streamer) failed(ctx context.Context, f *Failure) (Outcome, error) {
	if !s.final(f) || errors.Is(ctx.Err(), context.Canceled) || s.user.stopped.Load() {
		// Retried (or, at shutdown, left to its lease; or stopped by the
		// user, which ends it otherwise): nothing to end.
		return Outcome{}, f
	}
	// Ending the messages needs a little time even when ctx ran out.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s.setStatus(ctx, "")
	defer s.endSession(ctx)
	if len(s.prog.Msgs) > 0 {
		text := []rune(s.prog.Text)
		note := []rune("\n\n_(the answer could not be finished)_")
		if _, err := s.finishRecovery(ctx, text, append(text, note...), "", false); err != nil {
			s.log.Warn("stream parked; its messages could not be ended", "err", err)
		}
		return Outcome{}, f
	}
	if s.cfg.FailedText != "" {
		s.log.Info("stream parked before any text; posting [stream] failed_text")
		if _, _, err := s.api.PostMessageContext(ctx, s.tgt.channel, slack.MsgOptionText(s.cfg.FailedText, false),
			slack.MsgOptionTS(s.tgt.thread)); err != nil {
			s.log.Warn("[stream] failed_text not posted", "err", err)
		}
	}
	return Outcome{}, f
}

// final reports whether f parks the row: permanent, or retryable on the
// last attempt.
func (s *streamer) final(f *Failure) bool {
	switch f.Class {
	case Permanent:
		return true
	case Retryable:
		return s.job.last(s.e.cfg.MaxAttempts)
	}
	return false
}

// streamProgress is what a stream row saves (Job.Progress), as JSON.
type streamProgress struct {
	// Text is the answer received so far (at most [stream] max_chars).
	Text string `json:"text"`
	// Msgs are the messages showing it, in order.
	Msgs []streamMsg `json:"msgs,omitempty"`
}

// streamMsg is one message of an answer.
type streamMsg struct {
	TS   string `json:"ts"`
	From int    `json:"from"` // the first character of the answer it shows
	N    int    `json:"n"`    // how many it shows, as far as ackd knows
	// Open: a stream Slack may still hold open.
	Open bool `json:"open,omitempty"`
	// Meta: its metadata carries the row's key.
	Meta bool `json:"meta,omitempty"`
	// Unsure: an append to it may or may not have taken; its text is set
	// with chat.update before the answer ends.
	Unsure bool `json:"unsure,omitempty"`
}

// load reads what earlier attempts saved.
func (s *streamer) load(ctx context.Context) error {
	if s.job.Progress == nil {
		return nil
	}
	raw, err := s.job.Progress.Load(ctx)
	if err != nil {
		return &Failure{Class: Retryable, Code: "progress", NotSent: true, Err: fmt.Errorf("read the saved progress: %w", err)}
	}
	if raw == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(raw), &s.prog); err != nil {
		s.log.Warn("saved progress does not parse; started over", "err", err)
		s.prog = streamProgress{}
	}
	s.recovering = len(s.prog.Msgs) > 0
	return nil
}

// errLeaseLost ends an attempt whose claim another sweep took over.
var errLeaseLost = errors.New("the row's lease was lost: another sweep holds it and finishes the answer")

// save writes the progress in the row. forced: a message began, ended or
// changed, which the next attempt must know; a failure to record it ends
// the attempt. Otherwise a failure is logged and the stream goes on.
func (s *streamer) save(ctx context.Context, text []rune, forced bool) error {
	if s.job.Progress == nil {
		return nil
	}
	s.prog.Text = string(text)
	b, _ := json.Marshal(s.prog) // strings, ints and bools always marshal
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	held, err := s.job.Progress.Save(wctx, string(b))
	cancel()
	switch {
	case err == nil && held:
		s.saved, s.lastSave = len(text), time.Now()
		return nil
	case err == nil:
		return &Failure{Class: Retryable, Code: "lease_lost", Err: errLeaseLost}
	case forced:
		return &Failure{Class: Retryable, Code: "progress", Err: fmt.Errorf("save the stream's progress: %w", err)}
	default:
		s.log.Warn("stream progress not saved; going on", "err", err)
		return nil
	}
}

// setStatus sets (or, with "", clears) the thread's status. Failing to is
// logged, never fatal: the status is a courtesy.
func (s *streamer) setStatus(ctx context.Context, status string) {
	s.e.log.DebugContext(ctx, "slack call", "method", "assistant.threads.setStatus", "key", s.job.Row.Key, "channel", s.tgt.channel, "thread_ts", s.tgt.thread, "status", status)
	err := s.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: s.tgt.channel, ThreadTS: s.tgt.thread, Status: status})
	if err != nil {
		s.log.Log(ctx, statusLevel(err), "assistant.threads.setStatus failed; the answer goes on without it", "channel", s.tgt.channel, "err", err)
	}
	s.status = status
}

// statusLevel: a status the token may not set (a missing scope) is worth a
// warning; a passing failure is not.
func statusLevel(err error) slog.Level {
	if Classify(err).Class == Permanent {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// metadata is what every message of the answer carries: the row's key (and
// which part of the answer it shows), so that a lookup can tell it is ours.
func (s *streamer) metadata(part int) slack.MsgOption {
	return slack.MsgOptionMetadata(slack.SlackMetadata{
		EventType:    MetadataEventType,
		EventPayload: map[string]any{"idempotency_key": s.job.Row.Key, "part": part},
	})
}
