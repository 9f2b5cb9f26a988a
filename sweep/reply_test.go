package sweep_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// A forward whose handler replies is delivered at least once, and its reply
// is posted exactly once: the follow-up row is enqueued only by a completion
// that holds the lease, keyed "{key}:reply" so that no path enqueues it twice.

const (
	replyToken   = "xoxb-reply-test"
	replyLease   = time.Minute
	replyKey     = "Ev1:fwd"
	replyFollow  = replyKey + ":reply"
	replyChannel = "C1"
	replyTS      = "1700000000.000100"
)

// replyFixture is a real store on a settable clock, the real effects talking
// to a fake Slack, and a team handler that answers every forward {"text":"hi"}.
type replyFixture struct {
	clock *clock
	st    store.Store
	slack *fakeslack.Server
	hook  *fakeslack.Hook
	reg   sweep.Registry
}

func replySetup(t *testing.T) *replyFixture {
	t.Helper()
	f := &replyFixture{clock: &clock{t: time.Unix(1_800_000_000, 0)}}
	f.st = openStore(t, f.clock.Now)
	f.slack = fakeslack.New(t, replyToken)
	f.hook = fakeslack.NewHook(t)
	reply := fakeslack.Response{Body: `{"text":"hi"}`}
	f.hook.Script(reply, reply, reply, reply)
	f.reg = sweep.Effects(sweep.EffectConfig{BotToken: replyToken, APIURL: f.slack.URL(), Now: f.clock.Now})

	env, _ := json.Marshal(map[string]any{
		"type": "event_callback", "event_id": "Ev1", "team_id": "T1",
		"event": map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBOT> hello",
			"channel": replyChannel, "ts": replyTS},
	})
	p, err := sweep.Payload{
		Route: "fwd", Source: sweep.SourceEvent,
		Params: sweep.Params{URL: f.hook.URL()},
		Facts:  sweep.Facts{EventID: "Ev1", Channel: replyChannel, TS: replyTS},
		Raw:    env,
	}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.RecordIntent(context.Background(), store.Intent{EventID: "Ev1", EventType: "app_mention",
		Rows: []store.NewRow{{Key: replyKey, Effect: "forward", Payload: p}}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// sweeper is a real Sweeper over the fixture with the given performers.
func (f *replyFixture) sweeper(log *slog.Logger, reg sweep.Registry) *sweep.Sweeper {
	return sweep.New(f.st, reg, sweep.Config{Lease: replyLease, DefaultTimeout: 10 * time.Second}, log, nil)
}

// runOnce runs one sweep and checks what it did.
func (f *replyFixture) runOnce(t *testing.T, sw *sweep.Sweeper, want sweep.Result) {
	t.Helper()
	res, err := sw.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce: %v", err)
	}
	if res != want {
		t.Fatalf("RunOnce = %+v, want %+v", res, want)
	}
}

// perform runs the real forward performer on a claimed row, as a sweep would.
func (f *replyFixture) perform(t *testing.T, row store.Row) sweep.Outcome {
	t.Helper()
	p, err := sweep.DecodePayload(row.Payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := f.reg["forward"].Perform(context.Background(), sweep.Job{Row: row, Payload: p, Attempt: row.Attempts + 1})
	if err != nil {
		t.Fatalf("forward: %v", err)
	}
	return out
}

// claimOne claims with token and fails unless it gets exactly the forward row.
func (f *replyFixture) claimOne(t *testing.T, token string) store.Row {
	t.Helper()
	rows, err := f.st.Claim(context.Background(), token, 10, replyLease, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Key != replyKey {
		t.Fatalf("claim %q got %+v, want the forward row", token, rows)
	}
	return rows[0]
}

// replyRows returns the follow-up rows in the outbox.
func (f *replyFixture) replyRows(t *testing.T) []store.Row {
	t.Helper()
	all, err := f.st.List(context.Background(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Row
	for _, r := range all {
		if strings.HasSuffix(r.Key, ":reply") {
			out = append(out, r)
		}
	}
	return out
}

// forwardsSeen returns the attempt headers of every forward the handler got,
// after checking each carried the row's idempotency key.
func (f *replyFixture) forwardsSeen(t *testing.T) []string {
	t.Helper()
	var attempts []string
	for _, p := range f.hook.Posts() {
		if k := p.Header.Get(sweep.HeaderIdempotencyKey); k != replyKey {
			t.Errorf("forward carried Idempotency-Key %q, want %q", k, replyKey)
		}
		attempts = append(attempts, p.Header.Get(sweep.HeaderAttempt))
	}
	return attempts
}

// mustOnePostMessage checks the fake Slack got exactly one chat.postMessage,
// the reply, in the thread of the mention.
func (f *replyFixture) mustOnePostMessage(t *testing.T) {
	t.Helper()
	calls := f.slack.CallsTo("chat.postMessage")
	if len(calls) != 1 {
		t.Fatalf("%d chat.postMessage calls, want exactly 1", len(calls))
	}
	p := calls[0].Params
	if p.Get("channel") != replyChannel || p.Get("text") != "hi" || p.Get("thread_ts") != replyTS {
		t.Errorf("chat.postMessage params %v, want the reply in the mention's thread", p)
	}
}

func TestForwardReplyAtLeastOnce(t *testing.T) {
	ctx := context.Background()

	t.Run("a forward reply becomes exactly one follow-up post, even when the forward is retried after a crash between the effect and its completion", func(t *testing.T) {
		f := replySetup(t)

		// The first attempt, as a sweep that then crashed runs it: claimed,
		// performed (the handler really receives it and replies), and never
		// completed, because the process died before Complete.
		crashed := f.perform(t, f.claimOne(t, "crashed"))
		if len(crashed.FollowUps) != 1 || crashed.FollowUps[0].Key != replyFollow {
			t.Fatalf("the crashed attempt's outcome carries follow-ups %+v, want one keyed %q", crashed.FollowUps, replyFollow)
		}
		if got := f.forwardsSeen(t); len(got) != 1 || got[0] != "1" {
			t.Fatalf("handler saw attempts %q, want [1]", got)
		}
		if n := len(f.replyRows(t)); n != 0 {
			t.Fatalf("%d follow-up rows before any completion, want 0", n)
		}

		sw := f.sweeper(quiet(), f.reg)
		// While the dead process's lease lasts, no sweep touches the row.
		f.runOnce(t, sw, sweep.Result{})
		f.clock.Advance(replyLease + time.Second)

		// The lease expired: a real sweep repeats the forward (at-least-once)
		// and its fenced completion enqueues the follow-up.
		f.runOnce(t, sw, sweep.Result{Claimed: 1, Done: 1, FollowUps: 1})
		// The repeat is announced as attempt 2 (issue 38: a number is
		// never repeated for a row, and the claim that took the dead lease
		// counted the crashed attempt), with the unchanged Idempotency-Key
		// (checked in forwardsSeen).
		if got := f.forwardsSeen(t); len(got) != 2 || got[1] != "2" {
			t.Fatalf("handler saw attempts %q, want [1 2]", got)
		}
		row, err := f.st.GetByKey(ctx, replyKey)
		if err != nil {
			t.Fatal(err)
		}
		// attempts counts the crashed attempt (by the claim that took its lease) and the repeat.
		if row.Status != store.StatusDone || row.Attempts != 2 || !strings.Contains(row.Result, replyFollow) {
			t.Errorf("forward row after the repeat: %+v", row)
		}
		replies := f.replyRows(t)
		if len(replies) != 1 || replies[0].Key != replyFollow || replies[0].Effect != "post" || replies[0].Status != store.StatusPending {
			t.Fatalf("follow-up rows %+v, want one pending post keyed %q", replies, replyFollow)
		}
		if n := len(f.slack.CallsTo("chat.postMessage")); n != 0 {
			t.Fatalf("%d chat.postMessage calls before the follow-up was swept, want 0", n)
		}

		// The next sweep posts the reply once.
		f.runOnce(t, sw, sweep.Result{Claimed: 1, Done: 1})
		f.mustOnePostMessage(t)

		// And then there is nothing left to do.
		f.runOnce(t, sw, sweep.Result{})
		f.mustOnePostMessage(t)
		if got := f.forwardsSeen(t); len(got) != 2 {
			t.Errorf("handler saw %d forwards, want 2", len(got))
		}
		if q, _ := f.st.Queue(ctx); q.Done != 2 || q.Pending != 0 || q.Parked != 0 {
			t.Errorf("queue %+v, want 2 done", q)
		}
	})

	t.Run("a fenced completion does not enqueue the follow-up; the lease holder's completion does, once", func(t *testing.T) {
		f := replySetup(t)

		// The real forward, and while it is still running (the handler has
		// replied, the sweep has not completed) its lease expires and
		// another sweeper takes the row over.
		var (
			taken    []store.Row
			takenErr error
		)
		slow := sweep.Registry{"forward": sweep.PerformerFunc(func(ctx context.Context, job sweep.Job) (sweep.Outcome, error) {
			out, err := f.reg["forward"].Perform(ctx, job)
			f.clock.Advance(replyLease + time.Second)
			taken, takenErr = f.st.Claim(ctx, "takeover", 10, replyLease, nil)
			return out, err
		})}
		sink := &logSink{}
		f.runOnce(t, f.sweeper(slog.New(slog.NewJSONHandler(sink, nil)), slow), sweep.Result{Claimed: 1, Fenced: 1})
		if takenErr != nil || len(taken) != 1 || taken[0].Key != replyKey {
			t.Fatalf("takeover claim got %+v, %v; want the forward row", taken, takenErr)
		}
		takeover := taken[0]

		if line := sink.find("lease lost before completion"); line == "" || !contains(line, `"key":"`+replyKey+`"`) {
			t.Errorf("no lease-lost warning for the row; log: %v", sink.lines)
		}
		if n := len(f.replyRows(t)); n != 0 {
			t.Fatalf("%d follow-up rows after a fenced completion, want 0", n)
		}
		row, err := f.st.GetByKey(ctx, replyKey)
		if err != nil {
			t.Fatal(err)
		}
		if row.Status != store.StatusPending || row.ClaimToken != "takeover" || row.Result != "" {
			t.Fatalf("row after the fenced completion: %+v, want pending under the takeover's lease", row)
		}

		// The holder performs the forward itself and completes it: now the
		// follow-up exists, once.
		out := f.perform(t, takeover)
		held, err := f.st.Complete(ctx, takeover.ID, "takeover", out.Result, out.FollowUps)
		if err != nil || !held {
			t.Fatalf("holder's Complete = %v, %v; want held", held, err)
		}
		if replies := f.replyRows(t); len(replies) != 1 || replies[0].Key != replyFollow {
			t.Fatalf("follow-up rows %+v, want one keyed %q", replies, replyFollow)
		}
		if got := f.forwardsSeen(t); len(got) != 2 {
			t.Errorf("handler saw %d forwards, want 2 (the fenced one and the holder's)", len(got))
		}

		sw := f.sweeper(quiet(), f.reg)
		f.runOnce(t, sw, sweep.Result{Claimed: 1, Done: 1})
		f.mustOnePostMessage(t)
		f.runOnce(t, sw, sweep.Result{})
		f.mustOnePostMessage(t)
	})
}
