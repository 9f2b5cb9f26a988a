package catchup_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
)

const token = "xoxb-catchup-test"

// routes: a reaction to every plain message, and a reply to every mention,
// both keyed by the message fact as catch-up requires.
const routes = `
[backfill]
channels = ["C1", "C2"]
rate     = 6000
limit    = 12

[[route]]
name     = "eyes"
event    = "message"
key      = "message"
effect   = "react"
reaction = "eyes"

[[route]]
name   = "hello"
event  = "app_mention"
key    = "message"
effect = "forward"
url    = "http://127.0.0.1:1/never-called"
`

type rig struct {
	t     *testing.T
	slack *fakeslack.Server
	st    store.Store
	cfg   config.Config
	db    string // the SQLite file
}

func newRig(t *testing.T, toml string) *rig {
	t.Helper()
	cfg, err := config.Parse([]byte(toml))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ackd.db")
	st, err := daemon.OpenStore(context.Background(), db,
		// NORMAL: these tests are about what is recorded, not about fsync.
		store.Options{Schema: string(schema), Synchronous: "NORMAL", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &rig{t: t, slack: fakeslack.New(t, token), st: st, cfg: cfg, db: db}
}

// catchUp runs one catch-up (since zero: from the marks).
func (r *rig) catchUp(ctx context.Context, since time.Time, mod func(*catchup.Config)) catchup.Result {
	r.t.Helper()
	cc := ingress.CatchUpConfig(r.cfg, config.Secrets{BotToken: token}, r.st, slackrate.New(r.cfg.Backfill.Rate))
	cc.APIURL, cc.Logger = r.slack.URL(), slog.New(slog.DiscardHandler)
	if mod != nil {
		mod(&cc)
	}
	cu, err := catchup.New(cc)
	if err != nil {
		r.t.Fatal(err)
	}
	res, err := cu.Run(ctx, since)
	if err != nil && ctx.Err() == nil {
		r.t.Fatal(err)
	}
	return res
}

// markNow gives each channel a mark at now, as a daemon that had been
// receiving live events would have.
// Messages seeded before it are at or before the mark, messages seeded
// after it after the mark (the fake's ts come from the wall clock).
func (r *rig) markNow(channels ...string) {
	r.t.Helper()
	ts := store.TimeTS(time.Now())
	for _, ch := range channels {
		if ms := r.slack.Messages(ch); len(ms) > 0 && ms[len(ms)-1].TS > ts {
			ts = ms[len(ms)-1].TS
		}
	}
	for store.TimeTS(time.Now()) <= ts {
		time.Sleep(10 * time.Microsecond)
	}
	var ms []store.Mark
	for _, ch := range channels {
		ms = append(ms, store.Mark{Channel: ch, TS: ts})
	}
	if err := r.st.AdvanceMarks(context.Background(), ms); err != nil {
		r.t.Fatal(err)
	}
}

// keys returns every outbox key.
func (r *rig) keys() []string {
	r.t.Helper()
	rows, err := r.st.List(context.Background(), "", 100000)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, row := range rows {
		out = append(out, row.Key)
	}
	slices.Sort(out)
	return out
}

// seeded is what a channel holds and what catch-up must make of it.
type seeded struct {
	want    []string // outbox keys catch-up must record, once each
	never   []string // ts of messages no route may act on
	threads int
}

// seed fills ch with n user messages (one mentions the bot), a thread with
// three replies, a bot's message, a channel_join and the bot's own post.
func seed(fs *fakeslack.Server, ch string, n int) seeded {
	var s seeded
	for i := range n {
		m := fakeslack.Message{User: "U1", Text: fmt.Sprintf("message %d", i)}
		if i == 3 {
			m.Text = "hey <@U0FAKEBOT> look"
		}
		ts := fs.AddMessage(ch, m)
		s.want = append(s.want, ch+":"+ts+":eyes")
		if i == 3 {
			s.want = append(s.want, ch+":"+ts+":hello")
		}
		if i == n/2 {
			s.threads++
			for j := range 3 {
				rts := fs.AddMessage(ch, fakeslack.Message{User: "U2", ThreadTS: ts, Text: fmt.Sprintf("reply %d", j)})
				s.want = append(s.want, ch+":"+rts+":eyes")
			}
		}
	}
	s.never = append(s.never,
		fs.AddMessage(ch, fakeslack.Message{BotID: "B0OTHER", Subtype: "bot_message", Text: "a bot <@U0FAKEBOT>"}),
		fs.AddMessage(ch, fakeslack.Message{User: "U3", Subtype: "channel_join", Text: "<@U3> has joined the channel"}),
		fs.AddMessage(ch, fakeslack.Message{User: "U0FAKEBOT", Text: "my own post <@U0FAKEBOT>"}))
	return s
}

func TestCatchUpRecordsEveryEligibleMessageOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, routes)
	r.markNow("C1", "C2")
	s1, s2 := seed(r.slack, "C1", 26), seed(r.slack, "C2", 26)
	want := slices.Sorted(slices.Values(append(s1.want, s2.want...)))

	res := r.catchUp(context.Background(), time.Time{}, nil)
	if !res.Finished() {
		t.Fatalf("not finished: %+v", res)
	}
	if got := r.keys(); !slices.Equal(got, want) {
		t.Fatalf("outbox keys:\n got %v\nwant %v", got, want)
	}
	keys := r.keys()
	for _, s := range []seeded{s1, s2} {
		for _, ts := range s.never {
			for _, k := range keys {
				if strings.Contains(k, ts) {
					t.Errorf("a row for a message no route may act on: %s", k)
				}
			}
		}
	}
	for _, p := range res.Channels {
		// 26 + bot + join + own = 29 channel messages at 12 a page: 3
		// pages, and one page of replies.
		if p.Pages != 4 {
			t.Errorf("%s: %d pages, want 3 of history and 1 of replies", p.Channel, p.Pages)
		}
		if p.Recorded != 29 || p.Filtered != 3 || p.Duplicates != 0 {
			t.Errorf("%s: recorded=%d filtered=%d duplicates=%d, want 29, 3, 0", p.Channel, p.Recorded, p.Filtered, p.Duplicates)
		}
	}
	st, err := r.st.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 29 messages' own intents and 1 mention's, per channel.
	if st.Recovered != 60 {
		t.Errorf("recovered receipts %d, want 60", st.Recovered)
	}

	t.Run("a second run records nothing", func(t *testing.T) {
		res := r.catchUp(context.Background(), time.Now().Add(-time.Hour), nil)
		tot := res.Totals()
		if tot.Recorded != 0 || tot.Duplicates != 29*2 {
			t.Fatalf("second run: %s", res)
		}
		if got := r.keys(); !slices.Equal(got, want) {
			t.Fatalf("keys changed on the second run")
		}
	})
	t.Run("the mark moved to the end of what was read", func(t *testing.T) {
		ms, err := r.st.Marks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ResumeFrom != "" || m.TS < r.slack.Messages(m.Channel)[len(r.slack.Messages(m.Channel))-1].TS {
				t.Errorf("mark %+v: want past the newest message and no resume point", m)
			}
		}
	})
}

func TestCatchUpDryRunRecordsNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, routes)
	r.markNow("C1", "C2")
	seed(r.slack, "C1", 5)
	before, _ := r.st.Marks(context.Background())
	res := r.catchUp(context.Background(), time.Time{}, func(c *catchup.Config) { c.DryRun = true })
	if got := res.Totals(); got.Recorded != 5+3 || got.Filtered != 3 {
		// 5 messages and 3 replies would be recorded (a mention counts
		// with its message).
		t.Fatalf("dry run counted %s", res)
	}
	if k := r.keys(); len(k) != 0 {
		t.Fatalf("dry run wrote rows %v", k)
	}
	after, _ := r.st.Marks(context.Background())
	if !slices.Equal(before, after) {
		t.Fatalf("dry run moved the marks: %v → %v", before, after)
	}
}

func TestCatchUpRefetchesARateLimitedPage(t *testing.T) {
	t.Parallel()
	r := newRig(t, routes)
	r.markNow("C1", "C2")
	s1 := seed(r.slack, "C1", 26)
	s2 := seed(r.slack, "C2", 3)
	// The second page of C1 is refused with Retry-After: 1.
	r.slack.Script(catchup.MethodHistory, fakeslack.OK(), fakeslack.RateLimited("1"))
	res := r.catchUp(context.Background(), time.Time{}, nil)
	if got := res.Totals().RateLimited; got != 1 {
		t.Fatalf("rate limited %d times, want 1", got)
	}
	want := slices.Sorted(slices.Values(append(s1.want, s2.want...)))
	if got := r.keys(); !slices.Equal(got, want) {
		t.Fatalf("after a 429 on page 2:\n got %v\nwant %v", got, want)
	}
	calls := r.slack.CallsTo(catchup.MethodHistory)
	// C1: page 1, the refused page 2, page 2 again, page 3; then C2.
	if len(calls) != 5 {
		t.Fatalf("%d history calls, want 5", len(calls))
	}
	if a, b := calls[1].Params.Get("cursor"), calls[2].Params.Get("cursor"); a == "" || a != b {
		t.Fatalf("the refused page (cursor %q) was not asked for again (next cursor %q)", a, b)
	}
	for _, c := range calls[2:] {
		// No history call, to any channel, before Retry-After passed.
		if d := c.Time.Sub(calls[1].Time); d < time.Second {
			t.Errorf("history call for %s %s after the 429, before its Retry-After of 1s", c.Params.Get("channel"), d)
		}
	}
}

func TestCatchUpStopsAChannelOnMissingScope(t *testing.T) {
	t.Parallel()
	r := newRig(t, routes)
	r.markNow("C1", "C2")
	seed(r.slack, "C1", 2)
	s2 := seed(r.slack, "C2", 2)
	r.slack.Script(catchup.MethodHistory, fakeslack.MissingScope("channels:history"))
	res := r.catchUp(context.Background(), time.Time{}, nil)
	if res.Finished() {
		t.Fatal("a run with a channel refused for missing_scope says it finished")
	}
	p := res.Channels[0]
	if p.Err == nil || !strings.Contains(p.Err.Error(), "channels:history") || !strings.Contains(p.Err.Error(), "missing_scope") {
		t.Fatalf("C1 stopped with %v; want missing_scope naming channels:history", p.Err)
	}
	if got := r.keys(); !slices.Equal(got, slices.Sorted(slices.Values(s2.want))) {
		t.Fatalf("C2 must still be caught up: %v", got)
	}
	ms, _ := r.st.Marks(context.Background())
	for _, m := range ms {
		if m.Channel == "C1" && m.ResumeFrom == "" {
			t.Errorf("C1's catch-up did not finish, yet its resume point is gone")
		}
	}
}

func TestCatchUpFindsANewReplyInAThreadOlderThanTheMark(t *testing.T) {
	t.Parallel()
	r := newRig(t, routes)
	parent := r.slack.AddMessage("C1", fakeslack.Message{User: "U1", Text: "old parent"})
	old := r.slack.AddMessage("C1", fakeslack.Message{User: "U2", ThreadTS: parent, Text: "old reply"})
	r.markNow("C1", "C2") // both delivered live before
	reply := r.slack.AddMessage("C1", fakeslack.Message{User: "U2", ThreadTS: parent, Text: "new reply"})
	r.catchUp(context.Background(), time.Time{}, nil)
	if got, want := r.keys(), []string{"C1:" + reply + ":eyes"}; !slices.Equal(got, want) {
		t.Fatalf("keys %v, want only the new reply %v (not the parent, not the old reply %s)", got, want, old)
	}
	calls := r.slack.CallsTo(catchup.MethodReplies)
	if len(calls) != 1 || calls[0].Params.Get("ts") != parent {
		t.Fatalf("replies calls %v", calls)
	}
}

func TestCatchUpCutShortResumesWithoutDoubling(t *testing.T) {
	t.Parallel()
	r := newRig(t, routes)
	r.markNow("C1", "C2")
	s := seed(r.slack, "C1", 20)
	ctx, cancel := context.WithCancel(context.Background())
	var n int
	var mu sync.Mutex
	r.catchUp(ctx, time.Time{}, func(c *catchup.Config) {
		c.Batch = 3 // a transaction of three messages at a time
		tr := c.Translate
		c.Translate = func(m catchup.Message, bot string) ([]store.Intent, string, error) {
			mu.Lock()
			defer mu.Unlock()
			if n++; n == 10 {
				cancel() // the process dies while recording
			}
			return tr(m, bot)
		}
	})
	first := r.keys()
	if len(first) == 0 || len(first) >= len(s.want) {
		t.Fatalf("the cut-short run recorded %d of %d rows; the test needs it to stop midway", len(first), len(s.want))
	}
	// Live events move the mark past everything meanwhile.
	r.markNow("C1")
	var translated []string
	r.catchUp(context.Background(), time.Time{}, func(c *catchup.Config) {
		tr := c.Translate
		c.Translate = func(m catchup.Message, bot string) ([]store.Intent, string, error) {
			mu.Lock()
			translated = append(translated, m.TS)
			mu.Unlock()
			return tr(m, bot)
		}
	})
	if got, want := r.keys(), slices.Sorted(slices.Values(s.want)); !slices.Equal(got, want) {
		t.Fatalf("after resuming:\n got %v\nwant %v", got, want)
	}
	// It resumed where the first run had recorded to, not from the start.
	if len(translated) >= 20+3+3 {
		t.Errorf("the resumed run read %d messages again: it did not resume", len(translated))
	}
}

func TestCatchUpNeverReadsPastMaxAge(t *testing.T) {
	t.Parallel()
	r := newRig(t, strings.Replace(routes, "limit    = 12", "limit    = 12\nmax_age = \"1h\"", 1))
	if err := r.st.AdvanceMarks(context.Background(), []store.Mark{{Channel: "C1", TS: store.TimeTS(time.Now().Add(-48 * time.Hour))}}); err != nil {
		t.Fatal(err)
	}
	r.catchUp(context.Background(), time.Now().Add(-72*time.Hour), nil)
	for _, c := range r.slack.CallsTo(catchup.MethodHistory) {
		oldest := store.TSTime(c.Params.Get("oldest"))
		if time.Since(oldest) > time.Hour+time.Minute {
			t.Errorf("history read from %s ago, past max_age 1h", time.Since(oldest).Round(time.Second))
		}
	}
}

func TestCatchUpPacesCalls(t *testing.T) {
	t.Parallel()
	r := newRig(t, strings.Replace(routes, "rate     = 6000", "rate     = 300", 1)) // one call every 200ms
	r.markNow("C1", "C2")
	seed(r.slack, "C1", 26)
	r.catchUp(context.Background(), time.Time{}, nil)
	var calls []fakeslack.Call
	for _, c := range r.slack.Calls() {
		if c.Method == catchup.MethodHistory || c.Method == catchup.MethodReplies {
			calls = append(calls, c)
		}
	}
	if len(calls) < 4 {
		t.Fatalf("%d calls", len(calls))
	}
	// Arrival times carry each call's own transit, so the pace is checked
	// over the whole run, with one interval of slack.
	span := calls[len(calls)-1].Time.Sub(calls[0].Time)
	if min := time.Duration(len(calls)-2) * 200 * time.Millisecond; span < min {
		t.Errorf("%d calls within %s; rate 300 a minute spaces them 200ms apart (at least %s)", len(calls), span, min)
	}
}

func TestBackfillFromAfterTheMarkLeavesTheMark(t *testing.T) {
	t.Parallel()
	r := newRig(t, routes)
	r.markNow("C1")
	mark := func() string {
		ms, _ := r.st.Marks(context.Background())
		return ms[0].TS
	}
	before := mark()
	gap := r.slack.AddMessage("C1", fakeslack.Message{User: "U1", Text: "in the gap"})
	since := store.TSTime(gap) // read after the gap's message: it stays unread
	later := r.slack.AddMessage("C1", fakeslack.Message{User: "U1", Text: "after since"})
	res := r.catchUp(context.Background(), since, func(c *catchup.Config) { c.Channels = []string{"C1"} })
	if res.Totals().Recorded != 1 {
		t.Fatalf("backfill from since: %s", res)
	}
	if got := mark(); got != before {
		t.Fatalf("a backfill from after the mark moved it %s → %s, past the unread %s", before, got, gap)
	}
	// The next catch-up from the mark finds the gap.
	r.catchUp(context.Background(), time.Time{}, func(c *catchup.Config) { c.Channels = []string{"C1"} })
	if got, want := r.keys(), []string{"C1:" + gap + ":eyes", "C1:" + later + ":eyes"}; !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
}
