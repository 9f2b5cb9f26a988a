package sweep_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Issue 31.3: a replayed row is performed under its own key, so that the
// handler and Slack tell the replay from the original.

func TestReplayForwardCarriesTheNewKey(t *testing.T) {
	ctx := context.Background()
	c := &clock{t: time.Now()}
	st := openStore(t, c.Now)
	h := fakeslack.NewHook(t)
	log := slog.New(slog.NewTextHandler(&logSink{}, nil))
	sw := sweep.New(st, sweep.Effects(sweep.EffectConfig{Logger: log, Now: c.Now}),
		sweep.Config{Batch: 10, Workers: 1, Lease: time.Minute}, log, nil)
	p, _ := sweep.Payload{Route: "r", Source: sweep.SourceEvent, Params: sweep.Params{URL: h.URL()},
		Facts: sweep.Facts{EventID: "Ev1", Channel: "C1"}}.Encode()
	if _, err := st.RecordIntent(ctx, store.Intent{EventID: "Ev1", EventType: "app_mention",
		Rows: []store.NewRow{{Key: "Ev1:fwd", Effect: "forward", Payload: p}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	orig, err := st.GetByKey(ctx, "Ev1:fwd")
	if err != nil || orig.Status != store.StatusDone {
		t.Fatalf("original: %+v %v", orig, err)
	}
	got, err := st.Replay(ctx, store.ReplayFilter{IDs: []int64{orig.ID}})
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if _, err := sw.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	posts := h.Posts()
	if len(posts) != 2 {
		t.Fatalf("the handler got %d requests, want 2 (the original and the replay)", len(posts))
	}
	for i, want := range []string{"Ev1:fwd", "Ev1:fwd#r1"} {
		if k := posts[i].Header.Get(sweep.HeaderIdempotencyKey); k != want {
			t.Errorf("request %d: Idempotency-Key %q, want %q", i+1, k, want)
		}
		var body struct {
			Key string `json:"idempotency_key"`
		}
		posts[i].JSON(t, &body)
		if body.Key != want {
			t.Errorf("request %d: body idempotency_key %q, want %q", i+1, body.Key, want)
		}
	}
	if r, err := st.GetByKey(ctx, "Ev1:fwd#r1"); err != nil || r.Status != store.StatusDone {
		t.Fatalf("replay row: %+v %v", r, err)
	}
}

func TestReplayPostConfirmsItsOwnKey(t *testing.T) {
	t.Run("the original's message is not taken for the replay's: the replay posts once, under its key", func(t *testing.T) {
		ctx := context.Background()
		r := newConfirmRig(t)
		r.enqueuePost(t, "Ev1:post", "")
		orig := r.doneRow(t, "Ev1:post")
		r.mustOnePost(t, orig)
		got, err := r.st.Replay(ctx, store.ReplayFilter{IDs: []int64{orig.ID}})
		if err != nil || len(got) != 1 || got[0].Key != "Ev1:post#r1" {
			t.Fatal(got, err)
		}
		// The replay's first post is stored but its answer lost: the
		// lookup before the repeat must look for Ev1:post#r1, and not
		// stop at the original's message (key Ev1:post).
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"})
		replay := r.doneRow(t, "Ev1:post#r1")
		r.mustOnePost(t, replay)
		r.mustOnePost(t, orig) // the original's message is there, once, unchanged
		if n := len(r.api.CallsTo("chat.postMessage")); n != 2 {
			t.Fatalf("chat.postMessage called %d times, want 2 (the original, the replay's stored attempt)", n)
		}
		if r.lookups(sweep.ConfirmFound) != 1 {
			t.Fatalf("lookups %v, want the replay's own post found", r.tally)
		}
	})
}
