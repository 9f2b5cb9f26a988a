package sweep_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/sweep"
)

// Stop on PostgreSQL with two replicas: replica A streams the answer,
// replica B performs the stop (the event reached B). A hears of it from
// the database within its StopPoll (the default), closes the agent's
// request and ends the row done; B never claims the stream row.
func TestStopPostgresTwoReplicas(t *testing.T) {
	url := pgtest.URL(t)
	open := func() store.Store {
		st, err := postgres.Open(context.Background(), url, store.Options{MaxAttempts: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open(), open()
	slack := fakeslack.New(t, streamToken)
	agent := newFakeAgent(t, slack)
	closed := make(chan struct{})
	// One line, then the agent thinks: nothing more is appended, so only
	// the database can tell replica A of the stop.
	agent.answer(quietAfter(textLine("Thinking about it… "), closed))
	ec := sweep.EffectConfig{BotToken: streamToken, APIURL: slack.URL(), MaxAttempts: 8,
		Stream: sweep.StreamConfig{FlushEvery: 20 * time.Millisecond, SaveEvery: 20 * time.Millisecond}}

	env, _ := json.Marshal(map[string]any{"type": "event_callback", "event_id": "EvS1", "team_id": "T1",
		"event": map[string]any{"type": "app_mention", "user": "U1", "text": "explain", "channel": streamChannel, "ts": streamTS}})
	p, _ := sweep.Payload{Route: "agent", Source: sweep.SourceEvent, TimeoutMS: 30_000, Params: sweep.Params{URL: agent.URL},
		Facts: sweep.Facts{EventID: "EvS1", Channel: streamChannel, TS: streamTS, User: "U1", Team: "T1"}, Raw: env}.Encode()
	if _, err := a.RecordIntent(context.Background(), store.Intent{EventID: "EvS1", EventType: "app_mention",
		Rows: []store.NewRow{{Key: streamKey, Effect: "stream", Payload: p}}}); err != nil {
		t.Fatal(err)
	}
	swA := sweep.New(a, sweep.Effects(ec), sweep.Config{Lease: time.Minute, Workers: 1}, quiet(), nil)
	done := make(chan sweep.Result, 1)
	go func() {
		res, err := swA.RunOnce(context.Background())
		if err != nil {
			t.Errorf("replica A: %v", err)
		}
		done <- res
	}()
	waitFor(t, "text in the thread", func() bool { return len(slack.CallsTo("chat.appendStream")) >= 1 })

	ev := slack.StopByUser(streamChannel, streamTS, "U1")
	stopEnv, _ := json.Marshal(fakeslack.StoppedEnvelope("EvStop", "T1", ev))
	row, _ := sweep.StopRow(sweep.Facts{EventID: "EvStop", Team: "T1", Channel: streamChannel, ThreadTS: streamTS})
	if _, err := b.RecordIntent(context.Background(), store.Intent{EventID: "EvStop", EventType: sweep.EventAgentSessionStopped,
		Rows: []store.NewRow{row}, Request: &store.Request{ContentType: sweep.ContentTypeJSON, Body: stopEnv}}); err != nil {
		t.Fatal(err)
	}
	swB := sweep.New(b, sweep.Effects(ec), sweep.Config{Lease: time.Minute, Workers: 1}, quiet(), nil)
	if res, err := swB.RunOnce(context.Background()); err != nil || res.Done != 1 || res.Claimed != 1 {
		t.Fatalf("replica B: %+v %v, want the stop's row only", res, err)
	}
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("replica A did not close the agent's request")
	}
	var res sweep.Result
	select {
	case res = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("replica A's sweep did not end")
	}
	if res.Done != 1 {
		t.Fatalf("replica A: %+v", res)
	}
	r, err := b.GetByKey(context.Background(), streamKey)
	if err != nil || r.Status != store.StatusDone || r.Note != sweep.NoteStopped+" (agent_session_stopped)" {
		t.Fatalf("row %+v %v", r, err)
	}
	var bot int
	for _, m := range slack.Messages(streamChannel) {
		if m.BotID != "" {
			bot++
		}
	}
	if bot != 1 || len(slack.CallsTo("chat.startStream")) != 1 || len(slack.CallsTo("chat.postMessage")) != 0 {
		t.Fatalf("%d bot messages, %d starts, %d posts; want one message", bot, len(slack.CallsTo("chat.startStream")), len(slack.CallsTo("chat.postMessage")))
	}
	if s := slack.SessionStatus(streamChannel, streamTS); s != "active" {
		t.Fatalf("session %q", s)
	}
	t.Logf("replica A's note: %s; the thread's calls:\n\t%s", r.Note, strings.Join(slack.ThreadCalls(streamChannel, streamTS), "\n\t"))
}
