package sweep_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Issue 21.7: the hand-back limit parks a signed forward that this process
// cannot sign only when no live instance records that it can: a daemon
// that has the secret and is still retrying the row (its handler down for
// hours) keeps it.
func TestHandBackLimitAsksTheLiveInstances(t *testing.T) {
	ctx := context.Background()
	signed := sweep.Params{URL: "http://127.0.0.1:1/never", Signed: true}
	for _, tc := range []struct {
		name     string
		peer     *store.Instance // heartbeated just before the sweep
		peerAge  time.Duration   // how long ago that heartbeat was
		wantPark bool
	}{
		{name: "no instance at all: parked", wantPark: true},
		{name: "a live instance with the forward secret: handed back",
			peer: &store.Instance{Performs: []string{"forward", sweep.CapForwardSigned, "log"}}},
		{name: "a live instance from before the column (records nothing): handed back",
			peer: &store.Instance{}},
		{name: "a live instance without the forward secret: parked", wantPark: true,
			peer: &store.Instance{Performs: []string{"forward", "log"}}},
		{name: "an instance with the secret whose heartbeat is stale: parked", wantPark: true,
			peer: &store.Instance{Performs: []string{"forward", sweep.CapForwardSigned}}, peerAge: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.UnixMilli(1_800_000_000_000)}
			s := openStore(t, c.Now)
			p, _ := sweep.Payload{Route: "fwd", Source: sweep.SourceEvent, Params: signed}.Encode()
			if _, err := s.RecordIntent(ctx, store.Intent{EventID: "Ev1", EventType: "app_mention",
				Rows: []store.NewRow{{Key: "Ev1:fwd", Effect: "forward", Payload: p}}}); err != nil {
				t.Fatal(err)
			}
			c.Advance(sweep.HandBackLimit + time.Minute)
			if tc.peer != nil {
				in := *tc.peer
				in.ID, in.PID, in.Host, in.Listen, in.StartedAt = "peer", 4242, "vm2", "127.0.0.1:3000", c.Now()
				c.Advance(-tc.peerAge)
				if err := s.Heartbeat(ctx, in); err != nil {
					t.Fatal(err)
				}
				c.Advance(tc.peerAge)
			}
			ec := sweep.EffectConfig{} // no ACKD_FORWARD_SECRET
			sw := sweep.New(s, sweep.Effects(ec), sweep.Config{Skip: ec.Unavailable()}, quiet(), nil)
			res, err := sw.RunOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			row, err := s.GetByKey(ctx, "Ev1:fwd")
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantPark {
				if res.Parked != 1 || row.Status != store.StatusParked ||
					!strings.Contains(row.LastError, "no_forward_secret") || !strings.Contains(row.LastError, "no running ackd can") {
					t.Fatalf("result %+v, row %s %q: want parked, naming the secret and that no running ackd can", res, row.Status, row.LastError)
				}
				return
			}
			if res.Skipped != 1 || res.Parked != 0 || row.Status != store.StatusPending || row.Attempts != 0 {
				t.Fatalf("result %+v, row %s attempts %d: want handed back untouched", res, row.Status, row.Attempts)
			}
		})
	}
}

func TestPerforms(t *testing.T) {
	s := openStore(t, nil)
	for _, tc := range []struct {
		name string
		ec   sweep.EffectConfig
		want []string
	}{
		{"every credential", sweep.EffectConfig{BotToken: "xoxb-1", ForwardSecret: "f", RedeliverSecret: "r"},
			[]string{"forward", sweep.CapForwardSigned, "log", "post", "react", "redeliver", "respond", "stream", sweep.EffectStreamStop, "update"}},
		// A user's stop is recorded without a token (its session call is a
		// courtesy): every ackd records it.
		{"none", sweep.EffectConfig{}, []string{"forward", "log", "respond", sweep.EffectStreamStop}},
	} {
		sw := sweep.New(s, sweep.Effects(tc.ec), sweep.Config{Skip: tc.ec.Unavailable()}, quiet(), nil)
		if got := sw.Performs(tc.ec); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Performs = %v, want %v", tc.name, got, tc.want)
		}
	}
}
