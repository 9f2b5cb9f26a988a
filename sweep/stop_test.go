package sweep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Issue 39: a user's Stop (agent_session_stopped, chat.appendStream's
// stopped_by_user) is a durable cancel; the session's status follows the
// answer; an empty answer is not an answer; chat.startStream's 429 waits.

// endless answers one short line every gap until the client closes the
// request, then closes closed: an agent still answering when Stop comes.
func endless(gap time.Duration, closed chan<- struct{}) func(http.ResponseWriter, *http.Request) error {
	return pausable(gap, closed, nil, nil, new(atomic.Int64)) // a nil pause never comes
}

// pausable is endless until pause is closed, then writes nothing more
// (holding the request open) and closes quiet; written counts its text's
// characters. A test waits until the thread shows them all: from then on
// no chat.appendStream is made, and a Stop is heard only by its event.
func pausable(gap time.Duration, closed chan<- struct{}, pause <-chan struct{}, quiet chan<- struct{}, written *atomic.Int64) func(http.ResponseWriter, *http.Request) error {
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request) error {
		defer once.Do(func() { close(closed) })
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		for i := 0; ; i++ {
			select {
			case <-pause:
				close(quiet)
				<-r.Context().Done()
				return r.Context().Err()
			default:
			}
			word := fmt.Sprintf("word%d ", i)
			if _, err := fmt.Fprintln(w, textLine(word)); err != nil {
				return err
			}
			written.Add(int64(len(word)))
			fl.Flush()
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return r.Context().Err()
			}
		}
	}
}

// quietAfter answers line, then nothing until the client closes the
// request, then closes closed: an agent thinking when Stop comes.
func quietAfter(line string, closed chan<- struct{}) func(http.ResponseWriter, *http.Request) error {
	var once sync.Once
	return func(w http.ResponseWriter, r *http.Request) error {
		defer once.Do(func() { close(closed) })
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return r.Context().Err()
	}
}

// stopRow records the agent_session_stopped event ev as the ingress does:
// its receipt, the stored request and its stream_stop row.
func (f *streamFixture) stopRow(t *testing.T, eventID string, ev map[string]any) {
	t.Helper()
	env, _ := json.Marshal(fakeslack.StoppedEnvelope(eventID, "T1", ev))
	facts := sweep.Facts{EventID: eventID, Team: "T1", Channel: ev["channel"].(string), ThreadTS: ev["thread_ts"].(string)}
	row, err := sweep.StopRow(facts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.RecordIntent(context.Background(), store.Intent{EventID: eventID, EventType: sweep.EventAgentSessionStopped,
		Rows: []store.NewRow{row}, Request: &store.Request{ContentType: sweep.ContentTypeJSON, Body: env}}); err != nil {
		t.Fatal(err)
	}
}

// runStopsOnly performs the stream_stop rows (a sweep that claims no
// stream row), want of them.
func (f *streamFixture) runStopsOnly(t *testing.T, want int) {
	t.Helper()
	sw := sweep.New(f.st, sweep.Effects(f.ec), sweep.Config{Lease: time.Minute, Workers: 1,
		Skip: map[string]string{"stream": "the stream row waits (test)"}}, quiet(), nil)
	if res, err := sw.RunOnce(context.Background()); err != nil || res.Done != want {
		t.Fatalf("the stops' sweep: %+v %v, want %d done", res, err, want)
	}
}

// streamRunning starts the fixture's sweep in the background; the returned
// func waits for it.
func (f *streamFixture) streamRunning(t *testing.T, sw *sweep.Sweeper) func() sweep.Result {
	t.Helper()
	done := make(chan sweep.Result, 1)
	go func() {
		res, err := sw.RunOnce(context.Background())
		if err != nil {
			t.Errorf("RunOnce: %v", err)
		}
		done <- res
	}()
	return func() sweep.Result {
		select {
		case r := <-done:
			return r
		case <-time.After(30 * time.Second):
			t.Fatal("the stream's sweep did not end")
			return sweep.Result{}
		}
	}
}

// afterStop checks what a stopped answer leaves: one message, the agent's
// request closed, nothing started, posted or updated after it, the row done
// "stopped by the user", the session active. It returns the thread's calls.
func (f *streamFixture) afterStop(t *testing.T, closed <-chan struct{}, why string) []string {
	t.Helper()
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("the agent's request was not closed")
	}
	if n := len(f.answer()); n != 1 {
		t.Errorf("%d messages in the thread, want 1", n)
	}
	for _, m := range []string{"chat.postMessage", "chat.update", "chat.delete"} {
		if n := len(f.slack.CallsTo(m)); n != 0 {
			t.Errorf("%d %s calls after a stop", n, m)
		}
	}
	if n := len(f.slack.CallsTo("chat.startStream")); n != 1 {
		t.Errorf("%d chat.startStream calls, want 1 (no rollover)", n)
	}
	r := f.row(t)
	if r.Status != store.StatusDone || !strings.Contains(r.Note, sweep.NoteStopped) || !strings.Contains(r.Note, why) {
		t.Errorf("row %s, note %q; want done, %q (%s)", r.Status, r.Note, sweep.NoteStopped, why)
	}
	if got := f.slack.SessionStatus(streamChannel, streamTS); got != "active" {
		t.Errorf("session %q after the stop, want active", got)
	}
	return f.slack.ThreadCalls(streamChannel, streamTS)
}

func TestStopWithTheEvent(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t)
	closed := make(chan struct{})
	pause, agentQuiet := make(chan struct{}), make(chan struct{})
	var written atomic.Int64
	f.agent.answer(pausable(20*time.Millisecond, closed, pause, agentQuiet, &written))
	reg := sweep.Effects(f.ec) // one process: the stop is heard at once
	streamSweep := sweep.New(f.st, reg, sweep.Config{Lease: time.Minute, Workers: 1}, quiet(), nil)
	wait := f.streamRunning(t, streamSweep)
	waitFor(t, "text in the thread", func() bool { return len(f.slack.CallsTo("chat.appendStream")) >= 2 })
	// The agent pauses and the thread catches up with it, so that no
	// append can hear the Stop before its event is performed.
	close(pause)
	<-agentQuiet
	waitFor(t, "the thread to show all the agent wrote", func() bool {
		shown := 0
		for _, m := range f.answer() {
			shown += len(m.Text)
		}
		return written.Load() > 0 && int64(shown) == written.Load()
	})

	ev := f.slack.StopByUser(streamChannel, streamTS, "U1")
	f.stopRow(t, "EvStop1", ev)
	stopSweep := sweep.New(f.st, reg, sweep.Config{Lease: time.Minute, Workers: 1}, quiet(), nil)
	if res, err := stopSweep.RunOnce(context.Background()); err != nil || res.Done != 1 {
		t.Fatalf("the stop's sweep: %+v %v", res, err)
	}
	if res := wait(); res.Done != 1 {
		t.Fatalf("the stream's sweep: %+v", res)
	}
	calls := f.afterStop(t, closed, "agent_session_stopped")
	t.Logf("the thread's Web API calls, in order, for an answer the user stopped (with the event):\n\t%s", strings.Join(calls, "\n\t"))
	stop, err := f.st.GetByKey(context.Background(), "EvStop1:"+sweep.EffectStreamStop)
	if err != nil || stop.Status != store.StatusDone || !strings.Contains(stop.Result, `"newer":true`) {
		t.Fatalf("the stop's row %+v %v", stop, err)
	}
	if got, _ := f.st.StreamStopped(context.Background(), streamChannel, streamTS); got != ev["event_ts"] {
		t.Fatalf("stop recorded %q, want %q", got, ev["event_ts"])
	}
}

func TestStopWithoutTheEvent(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t)
	closed := make(chan struct{})
	f.agent.answer(endless(20*time.Millisecond, closed))
	wait := f.streamRunning(t, f.sweeper())
	waitFor(t, "text in the thread", func() bool { return len(f.slack.CallsTo("chat.appendStream")) >= 2 })
	f.slack.StopByUser(streamChannel, streamTS, "U1") // the event is lost
	if res := wait(); res.Done != 1 {
		t.Fatalf("RunOnce: %+v", res)
	}
	calls := f.afterStop(t, closed, "stopped_by_user")
	t.Logf("the thread's Web API calls, in order (no event):\n\t%s", strings.Join(calls, "\n\t"))
	appends := f.slack.CallsTo("chat.appendStream")
	if last := appends[len(appends)-1]; last.Answer != "stopped_by_user" {
		t.Fatalf("last append answered %q", last.Answer)
	}
	for _, c := range appends[:len(appends)-1] {
		if c.Answer == "stopped_by_user" {
			t.Fatal("appended again after stopped_by_user")
		}
	}
}

// A stop performed before the stream row is claimed: the row ends done
// without asking the agent or starting anything.
func TestStopBeforeTheClaim(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t)
	f.agent.answer(ndjson(0, textLine("never shown")))
	ev := f.slack.StopByUser(streamChannel, streamTS, "U1") // nothing streams yet
	f.stopRow(t, "EvStop0", ev)
	f.runStopsOnly(t, 1)
	if res := f.run(t); res.Done != 1 {
		t.Fatalf("RunOnce = %+v, want the stream row done", res)
	}
	if n := len(f.agent.Calls()); n != 0 {
		t.Fatalf("the agent was asked %d times", n)
	}
	for _, m := range []string{"chat.startStream", "chat.appendStream", "chat.postMessage", "assistant.threads.setStatus"} {
		if n := len(f.slack.CallsTo(m)); n != 0 {
			t.Fatalf("%d %s calls", n, m)
		}
	}
	if r := f.row(t); r.Status != store.StatusDone || !strings.Contains(r.Note, sweep.NoteStopped) {
		t.Fatalf("row %s %q", r.Status, r.Note)
	}
}

// A stop after the answer finished changes nothing; a new question in the
// same thread after the stop is answered (Slack's timestamps decide,
// never ackd's clock: the fake's clock is 10 minutes off the host's).
func TestStopAfterTheAnswerChangesNothing(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t)
	f.slack.SetClockOffset(-10 * time.Minute)
	f.agent.answer(ndjson(0, textLine("Hello, "), textLine("world.")))
	if res := f.run(t); res.Done != 1 {
		t.Fatalf("RunOnce = %+v", res)
	}
	before := f.row(t)
	f.stopRow(t, "EvStopLate", f.slack.StopByUser(streamChannel, streamTS, "U1"))
	if res := f.run(t); res.Done != 1 {
		t.Fatalf("the stop's sweep = %+v", res)
	}
	after := f.row(t)
	if after.Status != store.StatusDone || after.Result != before.Result || after.Note != before.Note {
		t.Fatalf("row changed by a late stop: %+v → %+v", before, after)
	}
	f.mustShow(t, "Hello, world.")

	// A new question in the thread, after the stop.
	qts := f.slack.AddMessage(streamChannel, fakeslack.Message{User: "U1", Text: "and then?", ThreadTS: streamTS})
	p, _ := sweep.Payload{Route: "agent", Source: sweep.SourceEvent, TimeoutMS: 20_000, Params: sweep.Params{URL: f.agent.URL},
		Facts: sweep.Facts{EventID: "EvS2", Channel: streamChannel, TS: qts, ThreadTS: streamTS, User: "U1", Team: "T1"}}.Encode()
	if _, err := f.st.RecordIntent(context.Background(), store.Intent{EventID: "EvS2", EventType: "message",
		Rows: []store.NewRow{{Key: "EvS2:agent", Effect: "stream", Payload: p}}}); err != nil {
		t.Fatal(err)
	}
	f.agent.answer(ndjson(0, textLine("Then this.")))
	if res := f.run(t); res.Done != 1 {
		t.Fatalf("RunOnce = %+v", res)
	}
	r, _ := f.st.GetByKey(context.Background(), "EvS2:agent")
	if r.Status != store.StatusDone || strings.Contains(r.Note, sweep.NoteStopped) {
		t.Fatalf("the new question's row %s %q: a stop older than it cancelled it", r.Status, r.Note)
	}
	if n := len(f.answer()); n != 2 {
		t.Fatalf("%d answers in the thread, want 2", n)
	}
}

// The same stop delivered twice (Slack's retry, with its event_id; or sent
// again with another): one receipt, one stop, the second changes nothing.
func TestStopDuplicatedEvent(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t)
	f.agent.answer(ndjson(0, textLine("x")))
	ev := f.slack.StopByUser(streamChannel, streamTS, "U1")
	f.stopRow(t, "EvStopD", ev)
	env, _ := json.Marshal(fakeslack.StoppedEnvelope("EvStopD", "T1", ev))
	row, _ := sweep.StopRow(sweep.Facts{EventID: "EvStopD", Channel: streamChannel, ThreadTS: streamTS})
	if first, err := f.st.RecordIntent(context.Background(), store.Intent{EventID: "EvStopD", Rows: []store.NewRow{row},
		Request: &store.Request{ContentType: sweep.ContentTypeJSON, Body: env}}); err != nil || first {
		t.Fatalf("redelivery: first=%v %v", first, err)
	}
	f.stopRow(t, "EvStopD2", ev) // the same stop under another event_id
	f.runStopsOnly(t, 2)
	a, _ := f.st.GetByKey(context.Background(), "EvStopD:"+sweep.EffectStreamStop)
	b, _ := f.st.GetByKey(context.Background(), "EvStopD2:"+sweep.EffectStreamStop)
	if !strings.Contains(a.Result, `"newer":true`) || !strings.Contains(b.Result, `"newer":false`) {
		t.Fatalf("results %s / %s", a.Result, b.Result)
	}
	if n := len(f.agent.Calls()); n != 0 {
		t.Fatalf("the agent was asked %d times", n)
	}
}

// An agent that answers 200 with nothing to show is retried, then parked
// with [stream] failed_text and a note saying why.
func TestStreamEmptyAnswerIsAFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request) error
	}{
		{"JSON {}", jsonAnswer(`{}`)},
		{"JSON with empty text", jsonAnswer(`{"text": ""}`)},
		{"NDJSON without lines", ndjson(0)},
		{"NDJSON with only a status", ndjson(0, statusLine("working"))},
		{"no content type, no body", func(w http.ResponseWriter, _ *http.Request) error { w.WriteHeader(200); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newStreamFixture(t, func(ec *sweep.EffectConfig) { ec.MaxAttempts = 2; ec.Stream.FailedText = "Sorry." })
			f.agent.answer(tc.answer)
			if res := f.run(t); res.Retried != 1 {
				t.Fatalf("first attempt: %+v, want retried", res)
			}
			f.clock.Advance(time.Hour)
			if res := f.run(t); res.Parked != 1 {
				t.Fatalf("last attempt: %+v, want parked", res)
			}
			r := f.row(t)
			if !strings.Contains(r.LastError, "empty_answer") || !strings.Contains(r.LastError, "no text") {
				t.Fatalf("last error %q", r.LastError)
			}
			posts := f.slack.CallsTo("chat.postMessage")
			if len(posts) != 1 || posts[0].Params.Get("text") != "Sorry." {
				t.Fatalf("posts %+v, want failed_text once", posts)
			}
			if got := f.slack.SessionStatus(streamChannel, streamTS); got != "active" {
				t.Fatalf("session %q after parking", got)
			}
		})
	}
}

// The session is processing while the agent is asked and active once the
// answer is over; an app that is not an agent falls back to the thread's
// status without failing the row.
func TestStreamSessionStatusFollowsTheAnswer(t *testing.T) {
	t.Parallel()
	t.Run("an agent", func(t *testing.T) {
		t.Parallel()
		f := newStreamFixture(t)
		f.agent.answer(ndjson(0, textLine("Hi.")))
		if res := f.run(t); res.Done != 1 {
			t.Fatalf("RunOnce = %+v", res)
		}
		var got []string
		for _, s := range f.slack.SessionStatuses() {
			got = append(got, s.Status)
		}
		if !slices.Equal(got, []string{"processing", "active"}) {
			t.Fatalf("session statuses %v", got)
		}
		if s := f.slack.SessionStatus(streamChannel, streamTS); s != "active" {
			t.Fatalf("session %q", s)
		}
		if c := f.agent.Calls(); len(c) != 1 || c[0].StatusesBefore != 1 {
			t.Fatalf("agent calls %+v: the status first", c)
		}
	})
	for _, code := range []string{"not_authorized", "feature_disabled"} {
		t.Run("not an agent: "+code, func(t *testing.T) {
			t.Parallel()
			f := newStreamFixture(t)
			if code == "not_authorized" {
				f.slack.SetAgent(false)
			} else {
				f.slack.SetSessionsDisabled(true)
			}
			f.agent.answer(jsonAnswer(`{"text": "Hi."}`))
			if res := f.run(t); res.Done != 1 {
				t.Fatalf("RunOnce = %+v", res)
			}
			if n := len(f.slack.SessionStatuses()); n != 1 {
				t.Fatalf("%d agents.sessions.setStatus calls, want 1 (then not again)", n)
			}
			st := f.slack.Statuses()
			if len(st) != 2 || st[0].Status != "is thinking…" || st[1].Status != "" {
				t.Fatalf("thread statuses %+v, want set then cleared", st)
			}
		})
	}
}

// An attempt that died mid-answer left the session processing; the next
// attempt finishes the answer and sets the session active.
func TestStreamCrashMidAnswerThenSessionActive(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t)
	f.seedDeadAttempt(t, 1)
	if s := f.slack.SessionStatus(streamChannel, streamTS); s != "processing" {
		t.Fatalf("session %q after the dead attempt", s)
	}
	f.agent.answer(ndjson(0, textLine("The whole answer.")))
	f.clock.Advance(2 * time.Minute)
	if res := f.run(t); res.Done != 1 {
		t.Fatalf("RunOnce = %+v", res)
	}
	f.mustShow(t, "The whole answer.")
	if s := f.slack.SessionStatus(streamChannel, streamTS); s != "active" {
		t.Fatalf("session %q after the recovery", s)
	}
}

// chat.startStream outside a DM carries the asker as its recipient.
func TestStreamStartNamesTheRecipient(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t)
	f.agent.answer(ndjson(0, textLine("Hi.")))
	if res := f.run(t); res.Done != 1 {
		t.Fatalf("RunOnce = %+v", res)
	}
	c := f.slack.CallsTo("chat.startStream")
	if len(c) != 1 || c[0].Params.Get("recipient_user_id") != "U1" || c[0].Params.Get("recipient_team_id") != "T1" {
		t.Fatalf("startStream %+v", c)
	}
}

// message_not_owned_by_app and missing_recipient_* are final: parked on
// the first attempt, never retried.
func TestStreamFinalStreamErrors(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"message_not_owned_by_app", "missing_recipient_user_id", "missing_recipient_team_id"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			f := newStreamFixture(t)
			f.slack.Script("chat.startStream", fakeslack.Err(code))
			f.agent.answer(ndjson(0, textLine("Hi.")))
			if res := f.run(t); res.Parked != 1 {
				t.Fatalf("RunOnce = %+v, want parked", res)
			}
			if r := f.row(t); r.Attempts != 1 || !strings.Contains(r.LastError, code) {
				t.Fatalf("row attempts %d, error %q", r.Attempts, r.LastError)
			}
		})
	}
}

// Twenty-five answers started within a minute in one workspace all
// arrive, none twice: chat.startStream and chat.stopStream (Tier 2) answer
// 429 past their rate, and the streams wait for Retry-After without
// spending an attempt.
func TestStreamBurstOf25UnderTier2(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t)
	f.slack.SetRateLimit("chat.startStream", 5, 2*time.Second)
	f.slack.SetRateLimit("chat.stopStream", 5, 2*time.Second)
	threads := []string{streamTS}
	keys := []string{streamKey}
	for i := 1; i < 25; i++ {
		ts := fmt.Sprintf("1700000001.%06d", i)
		key := fmt.Sprintf("EvB%d:agent", i)
		p, _ := sweep.Payload{Route: "agent", Source: sweep.SourceEvent, TimeoutMS: 20_000, Params: sweep.Params{URL: f.agent.URL},
			Facts: sweep.Facts{EventID: fmt.Sprintf("EvB%d", i), Channel: streamChannel, TS: ts, User: "U1", Team: "T1"}}.Encode()
		if _, err := f.st.RecordIntent(context.Background(), store.Intent{EventID: fmt.Sprintf("EvB%d", i), EventType: "app_mention",
			Rows: []store.NewRow{{Key: key, Effect: "stream", Payload: p}}}); err != nil {
			t.Fatal(err)
		}
		threads, keys = append(threads, ts), append(keys, key)
	}
	f.agent.answer(ndjson(5*time.Millisecond, textLine("An "), textLine("answer.")))
	sw := sweep.New(f.st, sweep.Effects(f.ec), sweep.Config{Lease: time.Minute, Workers: 25, Batch: 25}, quiet(), nil)
	for round := 0; ; round++ {
		if _, err := sw.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		q, err := f.st.Queue(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if q.Pending == 0 {
			break
		}
		if round > 20 {
			t.Fatalf("rows still pending after %d sweeps: %+v", round, q)
		}
		f.clock.Advance(time.Minute) // a row that could not wait inline is due again
	}
	limited := 0
	for _, c := range f.slack.CallsTo("chat.startStream") {
		if c.Answer == "http_429" {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("no chat.startStream was rate limited: the test proves nothing")
	}
	for i, key := range keys {
		r, err := f.st.GetByKey(context.Background(), key)
		if err != nil || r.Status != store.StatusDone || r.Attempts != 1 {
			t.Fatalf("row %s: %s, %d attempts (%v), want done on its one attempt", key, r.Status, r.Attempts, err)
		}
		var shown []string
		for _, m := range f.slack.Messages(streamChannel) {
			if m.BotID != "" && m.ThreadTS == threads[i] && m.TS != threads[i] {
				shown = append(shown, m.Text)
			}
		}
		if len(shown) != 1 || shown[0] != "An answer." {
			t.Fatalf("thread %s shows %q, want the answer once", threads[i], shown)
		}
	}
	t.Logf("%d of %d chat.startStream calls answered 429", limited, len(f.slack.CallsTo("chat.startStream")))
}
