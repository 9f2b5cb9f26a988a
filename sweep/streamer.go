package sweep

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/internal/redact"
	"github.com/ackd/ackd/store"
)

// The Slack side of a stream row: how the agent's text becomes messages.
//
// Batching. The first text starts a message (chat.startStream, empty, then
// an append), and text that arrives afterwards is appended at most every
// [stream] FlushEvery (500ms) per message, each chat.appendStream carrying
// everything that arrived meanwhile; one call at a time. While a call is in
// flight, or Slack asked to wait (429 Retry-After), the agent's connection
// is still read and its text waits.
//
// Messages. A message shows at most StreamMessageChars (12,000)
// characters: at that size it is stopped and the answer goes on in a new
// one. A message Slack stops streaming (message_not_in_streaming_state) is
// a rollover: the text its append carried goes into a new message, so
// nothing is lost and nothing is shown twice. An append whose outcome is
// unknown (a timeout after it was sent) leaves the message unsure: it is
// stopped, its exact text set with chat.update, and the answer goes on in
// a new message. Every message ends with the row's key in its metadata
// (chat.stopStream's, or chat.update's for one Slack stopped).
//
// Progress. The text received and each message's ts and extent are saved in
// the row (Job.Progress): before a message starts (which also checks the
// claim still holds: a sweep that lost its lease starts nothing), right
// after (its ts: a message whose ts cannot be saved is deleted again),
// when one ends, and otherwise at most every SaveEvery or 2,048 new
// characters. Limits: a process that dies between chat.startStream's
// answer and the save of its ts leaves an empty stream the next attempt
// does not know (Slack ends it); so does a start whose answer never came.
//
// Recovery. An attempt that finds messages saved by an earlier one reads
// the agent's whole new answer (the status stays meanwhile), then lays it
// out over those messages in order, StreamMessageChars each, with
// chat.update (stopping first any stream Slack may still hold open: after
// a crash nobody knows what an open stream shows beyond what was saved, and
// chat.update sets exactly the new text); the rest goes into new messages
// (chat.postMessage), and earlier messages left without text are deleted.
// A message that is gone (message_not_found) is passed over. So an
// earlier attempt that rolled over into two messages ends with the new
// answer in the first (and the second only if the answer needs it).

// agentReply is an NDJSON answer being read: a reader goroutine appends
// to it, the streamer takes snapshots.
type agentReply struct {
	mu sync.Mutex
	// text is the answer read so far with what is shaped like a Slack
	// token masked (a token the agent echoed is neither shown in Slack nor
	// kept in the row's progress); the last word is held by mask until
	// the text goes on past it or ends. chars counts the characters read,
	// against max_chars.
	text      []rune
	mask      redact.Stream
	chars     int
	status    string
	statusSeq int
	done      bool          // the answer ended: its end, a read error, or max_chars
	err       error         // the read error it ended on (a dropped connection)
	cut       bool          // max_chars was reached with more to come: the rest was not read
	ignored   int           // lines that were not JSON objects
	firstText time.Duration // from asking to the first text; 0 until then
	notify    chan struct{} // a token: something changed
	ended     chan struct{} // closed when the reader returns
}

// readAgent starts reading an NDJSON answer: {"text": …} lines append
// (up to maxChars characters), {"status": …} lines set the status; blank
// lines and lines that are not JSON objects are passed over; a line over
// 1 MiB ends the answer with an error.
func readAgent(body io.Reader, maxChars int, asked time.Time) *agentReply {
	r := &agentReply{notify: make(chan struct{}, 1), ended: make(chan struct{})}
	go r.read(body, maxChars, asked)
	return r
}

func (r *agentReply) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *agentReply) read(body io.Reader, maxChars int, asked time.Time) {
	defer close(r.ended)
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l struct {
			Text   *string `json:"text"`
			Status *string `json:"status"`
		}
		if json.Unmarshal(line, &l) != nil {
			r.mu.Lock()
			r.ignored++
			r.mu.Unlock()
			continue
		}
		r.mu.Lock()
		if l.Status != nil {
			r.status = *l.Status
			r.statusSeq++
		}
		stop := false
		if l.Text != nil && *l.Text != "" {
			add := []rune(*l.Text)
			if room := maxChars - r.chars; len(add) > room {
				add, r.cut, r.done, stop = add[:room], true, true, true
			}
			if r.chars == 0 && len(add) > 0 {
				r.firstText = max(time.Since(asked), time.Nanosecond)
			}
			r.chars += len(add)
			r.text = append(r.text, []rune(r.mask.Add(string(add)))...)
			if stop {
				r.text = append(r.text, []rune(r.mask.Flush())...)
			}
		}
		r.mu.Unlock()
		r.signal()
		if stop {
			return
		}
	}
	r.mu.Lock()
	r.text = append(r.text, []rune(r.mask.Flush())...)
	r.done, r.err = true, sc.Err()
	r.mu.Unlock()
	r.signal()
}

// replyState is one snapshot of an agentReply.
type replyState struct {
	text      []rune // never written again: a prefix of the reader's
	status    string
	statusSeq int
	done, cut bool
	err       error
	firstText time.Duration
}

func (r *agentReply) snapshot() replyState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return replyState{text: r.text[:len(r.text):len(r.text)], status: r.status, statusSeq: r.statusSeq,
		done: r.done, cut: r.cut, err: r.err, firstText: r.firstText}
}

// streamer performs one attempt of a stream row.
type streamer struct {
	e   *effects
	api *slack.Client
	job Job
	tgt streamTarget
	cfg StreamConfig
	obs StreamObserver
	log *slog.Logger

	prog       streamProgress // what has been shown, as saved in the row
	recovering bool           // prog named messages when the attempt began
	cur        int            // the message being streamed (index in prog.Msgs), -1 none
	sent       int            // characters of the answer already given to messages
	readBy     time.Time      // the agent's answer must be complete by then (zero: no deadline)
	readFor    time.Duration  // the time the agent was given: the route's timeout less the reserve

	saved      int // characters of text at the last save
	lastSave   time.Time
	lastAppend time.Time
	status     string
	rolled     int
	refused    int // new streams in a row Slack ended before any text

	sess         sessionCall // the thread's agent session (stop.go)
	sessionEnded bool        // set active already by this attempt
	user         stopState   // the user's Stop, once heard of
}

// cutNote ends an answer that was cut. limit is the time the agent was
// given (streamer.readFor), not the route's timeout: part of that is kept
// for ending the messages.
func cutNote(reason string, maxChars int, limit time.Duration) []rune {
	if reason == "timeout" {
		return []rune(fmt.Sprintf("\n\n_(answer cut: it took longer than %s)_", roundLimit(limit)))
	}
	return []rune(fmt.Sprintf("\n\n_(answer cut at %s characters)_", thousands(maxChars)))
}

// roundLimit rounds a time limit for a person: to the second from 10s,
// else to a tenth (a 2s route gives its agent 1.6s, not "2s").
func roundLimit(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// thousands writes n with commas: 40,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// wait returns after d, or when the reply changes, or ctx ends (d < 0:
// only those two).
func wait(ctx context.Context, rep *agentReply, d time.Duration) error {
	var c <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		c = t.C
	}
	select {
	case <-rep.notify:
	case <-c:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// until is how long from now to t, at least 0.
func until(t time.Time) time.Duration { return max(time.Until(t), 0) }

// sooner is the smaller of two waits, where -1 means none.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}

// pump streams an NDJSON answer into new messages (no earlier attempt
// showed any of it).
func (s *streamer) pump(ctx context.Context, rep *agentReply, stopAgent func()) (Outcome, error) {
	var (
		statusSeq int
		seen      bool
		cut       string
		limit     = -1 // characters taken from the agent once it is stopped at readBy
	)
	for {
		if err := ctx.Err(); err != nil {
			// Shutdown, or the effect's deadline: left to the lease, or retried.
			return Outcome{}, Classify(err)
		}
		st := rep.snapshot()
		text := st.text
		if limit >= 0 {
			text = text[:min(len(text), limit)]
		}
		if !seen && len(text) > 0 {
			seen = true
			s.obs.FirstText(st.firstText)
		}
		if st.statusSeq != statusSeq {
			statusSeq = st.statusSeq
			s.setStatus(ctx, st.status)
		}
		done := st.done || limit >= 0
		if st.cut && cut == "" {
			cut = "max_chars"
		}
		if !done && !s.readBy.IsZero() && !time.Now().Before(s.readBy) {
			// Still answering at the route's timeout.
			stopAgent()
			if len(text) == 0 {
				return s.failed(ctx, &Failure{Class: Retryable, Code: "timeout",
					Err: fmt.Errorf("the agent sent no text within the time it was given (%s: the route's timeout less what is kept for ending the messages)", roundLimit(s.readFor))})
			}
			limit, done, cut = len(text), true, "timeout"
		}
		if done && st.err != nil && limit < 0 && !st.cut {
			// The agent's connection dropped mid-answer: the next attempt
			// asks again and finishes these messages.
			if err := s.save(ctx, text, false); err != nil {
				return Outcome{}, err
			}
			return s.failed(ctx, &Failure{Class: Retryable, Code: "agent_dropped",
				Err: fmt.Errorf("the agent's connection ended after %d characters: %w", len(text), st.err)})
		}
		full := text
		if done && cut != "" {
			full = append(text[:len(text):len(text)], cutNote(cut, s.cfg.MaxChars, s.readFor)...)
		}
		pending := len(full) - s.sent
		if pending > 0 && (done || s.cur < 0 || s.prog.Msgs[s.cur].N == 0 || time.Since(s.lastAppend) >= s.cfg.FlushEvery) {
			if err := s.send(ctx, text, full); err != nil {
				return s.abort(ctx, text, err)
			}
			continue
		}
		if done && len(full) == 0 {
			stopAgent()
			return s.failed(ctx, emptyAnswer(200, "application/x-ndjson", rep.detail()))
		}
		if done {
			return s.finish(ctx, text, full, cut)
		}
		if len(text) > s.saved && (time.Since(s.lastSave) >= s.cfg.SaveEvery || len(text)-s.saved >= saveChars) {
			if err := s.save(ctx, text, false); err != nil {
				return s.abort(ctx, text, err)
			}
		}
		d := time.Duration(-1)
		if pending > 0 {
			d = until(s.lastAppend.Add(s.cfg.FlushEvery))
		}
		if len(text) > s.saved {
			d = sooner(d, until(s.lastSave.Add(s.cfg.SaveEvery)))
		}
		if !s.readBy.IsZero() {
			d = sooner(d, until(s.readBy))
		}
		if err := wait(ctx, rep, d); err != nil {
			return Outcome{}, Classify(err)
		}
	}
}

// abort ends an attempt on err, keeping what was received for the next.
func (s *streamer) abort(ctx context.Context, text []rune, err error) (Outcome, error) {
	f := AsFailure(err)
	if errors.Is(f, errLeaseLost) {
		s.log.Warn("stream stopped: its lease was lost; the sweep that holds the row finishes the answer")
		return Outcome{}, f
	}
	if ctx.Err() == nil {
		_ = s.save(ctx, text, false)
	}
	return s.failed(ctx, f)
}

// send gives the next piece of full to Slack: it starts a message when
// none is open, or appends to the open one.
func (s *streamer) send(ctx context.Context, text, full []rune) error {
	if s.cur < 0 {
		return s.start(ctx, text)
	}
	m := &s.prog.Msgs[s.cur]
	room := StreamMessageChars - m.N
	if room <= 0 {
		return s.stopFull(ctx, text)
	}
	chunk := full[s.sent:min(len(full), s.sent+room)]
	err := s.retrying(ctx, "chat.appendStream", func() error {
		t0 := time.Now()
		_, _, err := s.api.AppendStreamContext(ctx, s.tgt.channel, m.TS, slack.MsgOptionMarkdownText(string(chunk)))
		s.obs.Appended(time.Since(t0))
		return err
	})
	s.lastAppend = time.Now()
	f := Classify(err)
	switch {
	case err == nil:
		m.N += len(chunk)
		s.sent += len(chunk)
		if m.N >= StreamMessageChars {
			return s.stopFull(ctx, text)
		}
		return nil
	case slackErr(err) == "message_not_in_streaming_state":
		// Slack ended the stream: the rest, this piece included, goes on
		// in a new message. Slack ending new streams before any text
		// again and again is not a rollover but a refusal.
		m.Open = false
		s.cur = -1
		if m.N == 0 {
			if s.refused++; s.refused >= 3 {
				return &Failure{Class: Retryable, Code: "message_not_in_streaming_state",
					Err: fmt.Errorf("chat.appendStream: Slack ended %d new streams before their first text", s.refused)}
			}
		} else {
			s.refused = 0
		}
		s.rolled++
		s.obs.Streamed(StreamRolledOver, "")
		s.log.Info("stream ended by Slack; the answer goes on in a new message", "ts", m.TS, "shown", m.N)
		return s.save(ctx, text, true)
	case f.Class == Retryable && !f.NotSent:
		// The piece may or may not be shown: set the message's text
		// exactly, and go on in a new one.
		m.N += len(chunk)
		s.sent += len(chunk)
		m.Unsure = true
		s.cur = -1
		s.log.Warn("an append's outcome is unknown; the message is set with chat.update and the answer goes on in a new one", "ts", m.TS, "err", err)
		if err := s.save(ctx, text, true); err != nil {
			return err
		}
		if err := s.settle(ctx, len(s.prog.Msgs)-1, full); err != nil {
			s.log.Warn("the unsure message could not be set yet; tried again at the end", "ts", m.TS, "err", err)
		}
		return s.save(ctx, text, true)
	default:
		return f
	}
}

// start begins a new message in the thread, once the claim is known to hold.
func (s *streamer) start(ctx context.Context, text []rune) error {
	if err := s.save(ctx, text, true); err != nil {
		return err
	}
	opts := []slack.MsgOption{slack.MsgOptionTS(s.tgt.thread)}
	if s.tgt.team != "" && s.tgt.user != "" {
		opts = append(opts, slack.MsgOptionRecipientTeamID(s.tgt.team), slack.MsgOptionRecipientUserID(s.tgt.user))
	}
	var ts string
	err := s.retrying(ctx, "chat.startStream", func() (err error) {
		_, ts, err = s.api.StartStreamContext(ctx, s.tgt.channel, opts...)
		return err
	})
	if err != nil {
		return Classify(err)
	}
	s.prog.Msgs = append(s.prog.Msgs, streamMsg{TS: ts, From: s.sent, Open: true})
	s.cur = len(s.prog.Msgs) - 1
	s.lastAppend = time.Time{}
	s.obs.Streamed(StreamStarted, "")
	if err := s.save(ctx, text, true); err != nil {
		// The next attempt would not know this message: take it back.
		s.delete(ctx, ts)
		return err
	}
	return nil
}

// stopFull ends the open message, which holds StreamMessageChars: the
// answer goes on in a new one.
func (s *streamer) stopFull(ctx context.Context, text []rune) error {
	if err := s.stop(ctx, s.cur); err != nil {
		return err
	}
	s.cur = -1
	return s.save(ctx, text, true)
}

// stop ends message i's stream with its metadata.
func (s *streamer) stop(ctx context.Context, i int) error {
	m := &s.prog.Msgs[i]
	err := s.retrying(ctx, "chat.stopStream", func() error {
		_, _, err := s.api.StopStreamContext(ctx, s.tgt.channel, m.TS, s.metadata(i+1))
		return err
	})
	switch {
	case err == nil:
		m.Open, m.Meta = false, true
	case slackErr(err) == "message_not_in_streaming_state":
		m.Open = false // ended by Slack, without the metadata: settle sets it
	default:
		return Classify(err)
	}
	return nil
}

// finish ends an answer that was given to messages in full.
func (s *streamer) finish(ctx context.Context, text, full []rune, cut string) (Outcome, error) {
	// The claim must still hold before the messages are ended: a sweep
	// that lost its lease would end (and set the text of) messages the
	// new holder is showing its answer in.
	if err := s.save(ctx, text, true); err != nil {
		return s.abort(ctx, text, err)
	}
	if s.cur >= 0 {
		if err := s.stop(ctx, s.cur); err != nil {
			s.prog.Msgs[s.cur].Unsure = true // settle stops it and sets its text
		}
		s.cur = -1
	}
	var kept []streamMsg
	for i := range s.prog.Msgs {
		m := s.prog.Msgs[i]
		if m.N == 0 {
			// Started, then ended by Slack before any text: not part of the answer.
			s.delete(ctx, m.TS)
			continue
		}
		kept = append(kept, m)
	}
	s.prog.Msgs = kept
	for i := range s.prog.Msgs {
		if m := s.prog.Msgs[i]; m.Meta && !m.Unsure {
			continue
		}
		if err := s.settle(ctx, i, full); err != nil {
			if s.prog.Msgs[i].Unsure {
				// What it shows is not known: the next attempt shows the
				// answer again in these messages.
				_ = s.save(ctx, text, false)
				return Outcome{}, err
			}
			s.log.Warn("a message of the answer could not be given its metadata", "ts", s.prog.Msgs[i].TS, "err", err)
		}
	}
	if len(s.prog.Msgs) == 0 {
		s.setStatus(ctx, "") // an empty answer: nothing cleared it
	}
	if err := s.save(ctx, text, false); err != nil && errors.Is(err, errLeaseLost) {
		s.log.Warn("the answer is shown, but the lease was lost before it was recorded")
	}
	s.endSession(ctx)
	if cut != "" {
		s.obs.Streamed(StreamCut, cut)
	}
	out := s.result(len(full), cut)
	return out, nil
}

// settle sets message i's text to exactly its part of full, with the
// metadata, stopping its stream first if Slack may still hold it open.
func (s *streamer) settle(ctx context.Context, i int, full []rune) error {
	m := &s.prog.Msgs[i]
	if m.Open || m.Unsure {
		err := s.retrying(ctx, "chat.stopStream", func() error {
			_, _, err := s.api.StopStreamContext(ctx, s.tgt.channel, m.TS)
			return err
		})
		if err != nil && slackErr(err) != "message_not_in_streaming_state" {
			s.log.Debug("stopping a stream before setting its text", "ts", m.TS, "err", err)
		}
		m.Open = false
	}
	if err := s.update(ctx, m.TS, full[m.From:m.From+m.N], i+1); err != nil {
		return err
	}
	m.Meta, m.Unsure = true, false
	return nil
}

// update sets a message's text and metadata.
func (s *streamer) update(ctx context.Context, ts string, text []rune, part int) error {
	return s.retrying(ctx, "chat.update", func() error {
		_, _, _, err := s.api.UpdateMessageContext(ctx, s.tgt.channel, ts, slack.MsgOptionMarkdownText(string(text)), s.metadata(part))
		return err
	})
}

// delete removes a message of the answer; one already gone is fine.
func (s *streamer) delete(ctx context.Context, ts string) bool {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err := s.retrying(dctx, "chat.delete", func() error {
		_, _, err := s.api.DeleteMessageContext(dctx, s.tgt.channel, ts)
		return err
	})
	if err != nil && slackErr(err) != "message_not_found" {
		s.log.Warn("a message could not be deleted", "ts", ts, "err", err)
		return false
	}
	return true
}

// retrying makes one Slack call, again after a 429's Retry-After or a
// failure that never reached Slack, while ctx leaves time for it; any
// other error is returned.
func (s *streamer) retrying(ctx context.Context, method string, call func() error) error {
	for {
		s.e.log.DebugContext(ctx, "slack call", "method", method, "key", s.job.Row.Key, "channel", s.tgt.channel)
		err := call()
		if err == nil {
			return nil
		}
		if slackErr(err) == "stopped_by_user" {
			// The user pressed Stop: Slack takes no more of this stream.
			s.user.mark(method + " answered stopped_by_user")
			return err
		}
		f := Classify(err)
		var d time.Duration
		switch {
		case f.Class == RateLimited:
			d = f.RetryAfter
		case f.Class == Retryable && f.NotSent:
			d = time.Second
		default:
			return err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d+time.Second {
			return err // no time left to wait: the row is tried again
		}
		s.log.Debug("slack call waits", "method", method, "for", d, "err", err)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// slackErr is the Slack error code of err, or "".
func slackErr(err error) string {
	var ser slack.SlackErrorResponse
	if errors.As(err, &ser) {
		return ser.Err
	}
	return ""
}

// result is the row's result: where the answer is.
func (s *streamer) result(chars int, cut string) Outcome {
	res := map[string]any{"channel": s.tgt.channel, "thread_ts": s.tgt.thread, "chars": chars}
	var tss []string
	for _, m := range s.prog.Msgs {
		tss = append(tss, m.TS)
	}
	if len(tss) > 0 {
		res["ts"] = tss[0]
		res["messages"] = tss
	}
	if cut != "" {
		res["cut"] = cut
	}
	if s.rolled > 0 {
		res["rolled_over"] = s.rolled
	}
	return result(res)
}

// stopOld stops, before the agent is asked again, any stream an earlier
// attempt left open: nobody appends to it any more.
func (s *streamer) stopOld(ctx context.Context) {
	for i := range s.prog.Msgs {
		m := &s.prog.Msgs[i]
		if !m.Open {
			continue
		}
		err := s.retrying(ctx, "chat.stopStream", func() error {
			_, _, err := s.api.StopStreamContext(ctx, s.tgt.channel, m.TS)
			return err
		})
		if err == nil || slackErr(err) == "message_not_in_streaming_state" {
			m.Open = false
		}
	}
}

// recover reads the agent's whole new answer and shows it in the messages
// an earlier attempt started (see the top of this file).
func (s *streamer) recover(ctx context.Context, rep *agentReply, stopAgent func()) (Outcome, error) {
	var (
		statusSeq int
		limit     = -1
		cut       string
	)
	for {
		if err := ctx.Err(); err != nil {
			return Outcome{}, Classify(err)
		}
		st := rep.snapshot()
		text := st.text
		if st.statusSeq != statusSeq {
			statusSeq = st.statusSeq
			s.setStatus(ctx, st.status)
		}
		if st.cut {
			cut = "max_chars"
		}
		if !st.done && !s.readBy.IsZero() && !time.Now().Before(s.readBy) {
			stopAgent()
			if len(text) == 0 {
				return s.failed(ctx, &Failure{Class: Retryable, Code: "timeout",
					Err: fmt.Errorf("the agent sent no text within the time it was given (%s: the route's timeout less what is kept for ending the messages)", roundLimit(s.readFor))})
			}
			limit, cut = len(text), "timeout"
		}
		if limit >= 0 {
			text = text[:min(len(text), limit)]
		}
		if st.done || limit >= 0 {
			if st.err != nil && limit < 0 && !st.cut {
				return s.failed(ctx, &Failure{Class: Retryable, Code: "agent_dropped",
					Err: fmt.Errorf("the agent's connection ended after %d characters: %w", len(text), st.err)})
			}
			if len(text) == 0 {
				return s.failed(ctx, emptyAnswer(200, "application/x-ndjson", rep.detail()))
			}
			s.obs.FirstText(st.firstText)
			full := text
			if cut != "" {
				full = append(text[:len(text):len(text)], cutNote(cut, s.cfg.MaxChars, s.readFor)...)
			}
			return s.finishRecovery(ctx, text, full, cut, true)
		}
		d := time.Duration(-1)
		if !s.readBy.IsZero() {
			d = until(s.readBy)
		}
		if err := wait(ctx, rep, d); err != nil {
			return Outcome{}, Classify(err)
		}
	}
}

// finishRecovery lays full out over the messages saved in the progress, in
// order (StreamMessageChars each, with chat.update), posts what does not
// fit, deletes the messages left without text, clears the status and
// saves the result. text is what the agent sent (saved as received);
// recovered: full is a new answer (not what a failed one had shown).
func (s *streamer) finishRecovery(ctx context.Context, text, full []rune, cut string, recovered bool) (Outcome, error) {
	// The claim must still hold before the messages are set (see finish).
	if err := s.save(ctx, text, true); err != nil {
		return Outcome{}, err
	}
	s.stopOld(ctx)
	old := s.prog.Msgs
	var kept, surplus []streamMsg
	pos := 0
	for _, m := range old {
		if pos >= len(full) {
			surplus = append(surplus, m)
			continue
		}
		chunk := full[pos:min(len(full), pos+StreamMessageChars)]
		err := s.update(ctx, m.TS, chunk, len(kept)+1)
		switch code := slackErr(err); {
		case code == "message_not_found" || code == "cant_update_message":
			s.log.Info("a message of the earlier answer is gone; passed over", "ts", m.TS, "err", err)
			continue
		case err != nil:
			return Outcome{}, Classify(err)
		}
		kept = append(kept, streamMsg{TS: m.TS, From: pos, N: len(chunk), Meta: true})
		pos += len(chunk)
	}
	s.prog.Msgs = append(append([]streamMsg(nil), kept...), surplus...)
	for pos < len(full) {
		chunk := full[pos:min(len(full), pos+StreamMessageChars)]
		if err := s.save(ctx, text, true); err != nil {
			return Outcome{}, err
		}
		var ts string
		err := s.retrying(ctx, "chat.postMessage", func() (err error) {
			_, ts, err = s.api.PostMessageContext(ctx, s.tgt.channel, slack.MsgOptionTS(s.tgt.thread),
				slack.MsgOptionMarkdownText(string(chunk)), s.metadata(len(kept)+1))
			return err
		})
		if err != nil {
			return Outcome{}, Classify(err)
		}
		kept = append(kept, streamMsg{TS: ts, From: pos, N: len(chunk), Meta: true})
		s.prog.Msgs = append(append([]streamMsg(nil), kept...), surplus...)
		s.obs.Streamed(StreamStarted, "")
		if err := s.save(ctx, text, true); err != nil {
			s.delete(ctx, ts)
			return Outcome{}, err
		}
		pos += len(chunk)
	}
	deleted := 0
	for _, m := range surplus {
		if !s.delete(ctx, m.TS) {
			return Outcome{}, &Failure{Class: Retryable, Code: "delete", Err: fmt.Errorf("a message of the earlier answer (ts %s) could not be deleted", m.TS)}
		}
		deleted++
	}
	s.prog.Msgs = kept
	if err := s.save(ctx, text, false); err != nil && errors.Is(err, errLeaseLost) {
		s.log.Warn("the answer is shown, but the lease was lost before it was recorded")
	}
	s.setStatus(ctx, "")
	s.endSession(ctx)
	if cut != "" {
		s.obs.Streamed(StreamCut, cut)
	}
	out := s.result(len(full), cut)
	if s.recovering && recovered {
		s.obs.Streamed(StreamRecovered, "")
		var tss []string
		for _, m := range old {
			tss = append(tss, m.TS)
		}
		out.Note = fmt.Sprintf("recovered: an earlier attempt had started %d message(s) (%v); the answer asked again is shown in them with chat.update", len(old), tss)
		if deleted > 0 {
			out.Note += fmt.Sprintf(", %d left without text deleted", deleted)
		}
		s.log.Info("stream recovered: the answer is shown in the messages an earlier attempt started", "messages", len(kept), "deleted", deleted)
	}
	return out, nil
}

// detail says what an answer without text held, for its failure.
func (r *agentReply) detail() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ignored > 0 {
		return fmt.Sprintf(", %d line(s) that were not JSON objects", r.ignored)
	}
	return ""
}

// endSession sets the thread's session active once the answer is over
// (finished, parked or stopped), once per attempt.
func (s *streamer) endSession(ctx context.Context) {
	if s.sessionEnded {
		return
	}
	s.sessionEnded = true
	s.sess.set(ctx, s.tgt.channel, s.tgt.thread, "active")
}

// stopRecorded reports whether the database holds a stop of the thread
// newer than the row's event (askedUS).
func (s *streamer) stopRecorded(ctx context.Context, askedUS int64) (bool, error) {
	if s.job.Stops == nil {
		return false, nil
	}
	ts, err := s.job.Stops.StreamStopped(ctx, s.tgt.channel, s.tgt.thread)
	if err != nil {
		return false, &Failure{Class: Retryable, Code: "read_stop", NotSent: true, Err: err}
	}
	us, ok := store.SlackTSMicros(ts)
	return ok && stopCounts(us, askedUS), nil
}

// watchStops marks the stream stopped when this process performs a stop
// of its thread (w), or when the database shows one (read every StopPoll:
// another process performed it), until ctx ends.
func (s *streamer) watchStops(ctx context.Context, w *stopWatch, askedUS int64) {
	t := time.NewTicker(s.cfg.StopPoll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.c:
			s.user.mark("agent_session_stopped")
			return
		case <-t.C:
			stopped, err := s.stopRecorded(ctx, askedUS)
			switch {
			case err != nil && ctx.Err() == nil:
				if !failing {
					s.log.Warn("the thread's stop could not be read; tried again", "err", err)
				}
				failing = true
			case stopped:
				s.user.mark("agent_session_stopped")
				return
			default:
				failing = false
			}
		}
	}
}

// endStopped ends an attempt the user stopped: nothing more is shown (the
// agent's request is closed already), the progress records that Slack
// holds no stream open, the session is set active, and the row is done
// with NoteStopped.
func (s *streamer) endStopped(ctx context.Context) (Outcome, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	why := s.user.reason()
	for i := range s.prog.Msgs {
		s.prog.Msgs[i].Open = false // Slack stopped them: it takes no more
	}
	if len(s.prog.Msgs) > 0 {
		if err := s.save(ctx, []rune(s.prog.Text), true); err != nil && errors.Is(err, errLeaseLost) {
			return Outcome{}, err
		}
	}
	if s.status != "" {
		s.setStatus(ctx, "")
	}
	if !strings.HasPrefix(why, EventAgentSessionStopped) {
		// With the event, its own row sets the session active.
		s.endSession(ctx)
	}
	s.obs.Streamed(StreamStopped, "")
	s.log.Info("stream stopped by the user", "channel", s.tgt.channel, "thread_ts", s.tgt.thread, "shown", s.sent, "why", why)
	out := s.result(s.sent, "")
	var res map[string]any
	_ = json.Unmarshal([]byte(out.Result), &res)
	res["stopped"] = why
	out = result(res)
	out.Note = NoteStopped + " (" + why + ")"
	return out, nil
}
