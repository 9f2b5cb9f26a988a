package catchup_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
)

// Issue 29.5: catch-up's marks and bounds are on Slack's clock. Issue 29.6:
// catch-up never reads further back than the period whose rows ackd keeps.

func onlyC1(c *catchup.Config) { c.Channels = []string{"C1"} }

var catchupSecrets = config.Secrets{BotToken: token}

func TestCatchUpOnSlacksClock(t *testing.T) {
	// Slack's clock minus ackd's: negative = ackd's clock is ahead.
	for _, off := range []time.Duration{-10 * time.Minute, -5 * time.Minute, 5 * time.Minute, 10 * time.Minute} {
		t.Run(fmt.Sprintf("Slack's clock %+v: two outages, every message recorded once", off), func(t *testing.T) {
			t.Parallel()
			r := newRig(t, routes)
			r.slack.SetClockOffset(off)
			ctx := context.Background()
			// A first start: no mark yet, the mark starts at Slack's now.
			if res := r.catchUp(ctx, time.Time{}, onlyC1); res.Totals().Messages != 0 {
				t.Fatalf("first run read %s", res)
			}
			var want []string
			for outage := range 2 {
				s := seed(r.slack, "C1", 6) // posted while ackd was down
				want = append(want, s.want...)
				res := r.catchUp(ctx, time.Time{}, onlyC1)
				if got := r.keys(); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
					t.Fatalf("after outage %d (%s):\n got %v\nwant %v", outage+1, res, got, slices.Sorted(slices.Values(want)))
				}
			}
			ms, err := r.st.Marks(ctx)
			if err != nil || len(ms) != 1 {
				t.Fatal(ms, err)
			}
			newest := r.slack.Messages("C1")[len(r.slack.Messages("C1"))-1].TS
			if ms[0].TS < newest || store.TSTime(ms[0].TS).After(r.slack.Now()) {
				t.Fatalf("mark %s: want past the newest message %s and not past Slack's now %s", ms[0].TS, newest, store.TimeTS(r.slack.Now()))
			}
		})
	}
}

// prunedRig has a channel whose older messages were recorded, performed
// and pruned: done rows are kept 2h, catch-up may read back 24h.
type prunedRig struct {
	*rig
	old, kept []string // keys of messages past retention.done (rows pruned) and within it (rows done)
}

const keepRoutes = `
[retention]
done = "2h"

[backfill]
channels = ["C1"]
rate     = 6000
max_age  = "24h"

[[route]]
name     = "eyes"
event    = "message"
key      = "message"
effect   = "react"
reaction = "eyes"
`

// newPrunedRig seeds C1 on a Slack clock off by off: three messages 2h10m
// and 3h ago on Slack's clock (their rows performed and pruned), and two
// 1h ago (performed, kept). Each row completed a minute after its message
// was posted, on this host's clock.
func newPrunedRig(t *testing.T, off time.Duration) *prunedRig {
	t.Helper()
	r := &prunedRig{rig: newRig(t, keepRoutes)}
	r.slack.SetClockOffset(off)
	now := r.slack.Now()
	add := func(ago time.Duration, i int) string {
		ts := store.TimeTS(now.Add(-ago).Add(time.Duration(i) * time.Millisecond))
		r.slack.AddMessage("C1", fakeslack.Message{TS: ts, User: "U1", Text: fmt.Sprint("message ", ago, i)})
		return ts
	}
	var olds, kepts []string
	for i := range 3 {
		olds = append(olds, add(3*time.Hour, i))
	}
	olds = append(olds, add(2*time.Hour+10*time.Minute, 0))
	for i := range 2 {
		kepts = append(kepts, add(time.Hour, i))
	}
	// The rows as a daemon recorded them then (no bound yet)…
	res := r.catchUp(context.Background(), now.Add(-4*time.Hour), func(c *catchup.Config) { c.KeepDone = 0 })
	if res.Totals().Recorded != 6 {
		t.Fatalf("seeding: %s", res)
	}
	// …performed a minute after each message, on this host's clock…
	h, err := sql.Open("sqlite", r.db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, ts := range append(slices.Clone(olds), kepts...) {
		done := store.TSTime(ts).Add(-off).Add(time.Minute).UnixMilli()
		if _, err := h.Exec(`UPDATE outbox SET status = 'done', completed_at = ? WHERE idempotency_key = ?`, done, "C1:"+ts+":eyes"); err != nil {
			t.Fatal(err)
		}
	}
	// …and pruned by retention.done.
	if pr, err := r.st.Prune(context.Background(), 48*time.Hour, 2*time.Hour, 0); err != nil || pr.Done != int64(len(olds)) {
		t.Fatalf("prune: %+v %v, want the %d old rows gone", pr, err, len(olds))
	}
	for _, ts := range olds {
		r.old = append(r.old, "C1:"+ts+":eyes")
	}
	for _, ts := range kepts {
		r.kept = append(r.kept, "C1:"+ts+":eyes")
	}
	if got := r.keys(); !slices.Equal(got, r.kept) {
		t.Fatalf("after the prune: %v, want %v", got, r.kept)
	}
	return r
}

// mustNotRepeat checks that no pruned message was recorded again.
func (r *prunedRig) mustNotRepeat(t *testing.T) {
	t.Helper()
	if got := r.keys(); !slices.Equal(got, r.kept) {
		t.Fatalf("outbox keys %v, want only the kept %v: a message whose rows were pruned was recorded again", got, r.kept)
	}
}

func TestCatchUpNeverReadsPastWhatIsKept(t *testing.T) {
	for _, off := range []time.Duration{-10 * time.Minute, 0, 10 * time.Minute} {
		t.Run(fmt.Sprintf("Slack's clock %+v", off), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newPrunedRig(t, off)

			t.Run("a start before retention.done is refused, nothing read", func(t *testing.T) {
				before := len(r.slack.CallsTo(catchup.MethodHistory))
				for _, run := range []func(*catchup.CatchUp) (catchup.Result, error){
					func(cu *catchup.CatchUp) (catchup.Result, error) { return cu.RunAgo(ctx, 3*time.Hour) },
					func(cu *catchup.CatchUp) (catchup.Result, error) {
						return cu.Run(ctx, r.slack.Now().Add(-2*time.Hour-5*time.Minute))
					},
				} {
					cc := ingress.CatchUpConfig(r.cfg, catchupSecrets, r.st, nil)
					cc.APIURL = r.slack.URL()
					cu, err := catchup.New(cc)
					if err != nil {
						t.Fatal(err)
					}
					_, err = run(cu)
					if !errors.Is(err, catchup.ErrBeforeKept) || !strings.Contains(err.Error(), "reads back at most 1h50m0s") {
						t.Fatalf("err %v, want ErrBeforeKept naming the reach", err)
					}
				}
				if n := len(r.slack.CallsTo(catchup.MethodHistory)) - before; n != 0 {
					t.Fatalf("%d history reads for a refused start", n)
				}
				r.mustNotRepeat(t)
			})

			t.Run("a mark older than retention.done is clamped: nothing repeated", func(t *testing.T) {
				h, err := sql.Open("sqlite", r.db+"?_pragma=busy_timeout(5000)")
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				// ackd was down for 5 hours: its mark is from then.
				if _, err := h.Exec(`UPDATE catchup_marks SET ts = ?`, store.TimeTS(r.slack.Now().Add(-5*time.Hour))); err != nil {
					t.Fatal(err)
				}
				res := r.catchUp(ctx, time.Time{}, nil)
				if tot := res.Totals(); tot.Recorded != 0 || tot.Duplicates != len(r.kept) {
					t.Fatalf("from an old mark: %s, want the %d kept messages found done and nothing else read", res, len(r.kept))
				}
				r.mustNotRepeat(t)
			})

			t.Run("within retention.done a start is read as asked", func(t *testing.T) {
				res := r.catchUp(ctx, r.slack.Now().Add(-90*time.Minute), nil)
				if tot := res.Totals(); tot.Recorded != 0 || tot.Duplicates != len(r.kept) {
					t.Fatalf("%s", res)
				}
				r.mustNotRepeat(t)
			})
		})
	}
}

func TestCatchUpReach(t *testing.T) {
	for _, tc := range []struct {
		maxAge, keep, want time.Duration
		clamped            bool
	}{
		{24 * time.Hour, 168 * time.Hour, 24 * time.Hour, false},
		{24 * time.Hour, 0, 24 * time.Hour, false},
		{24 * time.Hour, 12 * time.Hour, 12*time.Hour - catchup.KeepMargin, true},
		{24 * time.Hour, 24 * time.Hour, 24*time.Hour - catchup.KeepMargin, true},
		{time.Hour, 5 * time.Minute, 0, true},
	} {
		got, clamped := catchup.Config{MaxAge: tc.maxAge, KeepDone: tc.keep}.Reach()
		if got != tc.want || clamped != tc.clamped {
			t.Errorf("max_age %s, done %s: reach %s clamped %t, want %s %t", tc.maxAge, tc.keep, got, clamped, tc.want, tc.clamped)
		}
	}
}
