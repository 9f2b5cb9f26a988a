package storetest

import (
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// testSteps is what a workflow step needs from the store: a row first due
// after a delay (its deadline timer), on the store's own clock, recorded
// once however many deliveries race; and the handler's reply kept in the
// row under the fence, surviving a failure and replaced by the completion.
func testSteps(t *testing.T, newDB NewDB) {
	t.Run("a delayed row is due its delay after the store's now, and redeliveries never move it", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		in := store.Intent{EventID: "Ev1", EventType: "function_executed", Rows: []store.NewRow{
			{Key: "Fx1:step", Effect: "log", Payload: `{"route":"step"}`},
			{Key: "Fx1:step:deadline", Effect: "log", Payload: `{"route":"step"}`, Delay: 5 * time.Minute},
		}}
		before := db.Now(t)
		mustRecord(t, s, in)
		after := db.Now(t)
		rows := all(t, s)
		if len(rows) != 2 {
			t.Fatalf("%d rows", len(rows))
		}
		timer := rows[1]
		within(t, "deadline row due after its creation", timer.NextAttemptAt.Sub(timer.CreatedAt), 5*time.Minute, 5*time.Minute)
		within(t, "created on the store's clock", timer.CreatedAt.Sub(before), -time.Millisecond, after.Sub(before)+time.Millisecond)
		got := mustClaim(t, s, "A", 10, time.Minute)
		if len(got) != 1 || got[0].Key != "Fx1:step" {
			t.Fatalf("claimed %v, want only the step row", ids(got))
		}
		if held, err := s.Complete(ctx, got[0].ID, "A", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		// A redelivery four minutes later (another event id: Slack's own
		// retry dedups on the receipt) does not push the deadline on.
		db.Advance(4 * time.Minute)
		in.EventID = "Ev2"
		mustRecord(t, s, in)
		if n := len(all(t, s)); n != 2 {
			t.Fatalf("%d rows after a redelivery", n)
		}
		if got := mustClaim(t, s, "B", 10, time.Minute); len(got) != 0 {
			t.Fatalf("deadline row claimed a minute early: %v", ids(got))
		}
		db.Advance(time.Minute + time.Millisecond)
		got = mustClaim(t, s, "B", 10, time.Minute)
		if len(got) != 1 || got[0].Key != "Fx1:step:deadline" {
			t.Fatalf("claimed %v at the deadline, want the deadline row", ids(got))
		}
	})

	t.Run("a saved reply is fenced, survives a failed attempt and is replaced by the completion", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "step"))
		row := claimOne(t, s, "A")
		if held, err := s.SaveStepReply(ctx, row.ID, "stale", `{"x":1}`); err != nil || held {
			t.Fatalf("a token that holds nothing saved: %v %v", held, err)
		}
		if held, err := s.SaveStepReply(ctx, row.ID, "A", `{"step_reply":{"outputs":{"a":"b"}}}`); err != nil || !held {
			t.Fatalf("holder could not save: %v %v", held, err)
		}
		got := mustGet(t, s, row.ID)
		if got.Status != store.StatusPending || got.Result != `{"step_reply":{"outputs":{"a":"b"}}}` || got.Attempts != 0 || got.ClaimToken != "A" {
			t.Fatalf("after save: %+v", got)
		}
		if res, err := s.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailRetryable, Msg: "slack 500"}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		db.Advance(time.Hour)
		again := claimOne(t, s, "B")
		if again.Result != `{"step_reply":{"outputs":{"a":"b"}}}` {
			t.Fatalf("the next claim lost the reply: %q", again.Result)
		}
		if held, err := s.SaveStepReply(ctx, row.ID, "A", `{"lost":true}`); err != nil || held {
			t.Fatalf("the old holder saved after losing the lease: %v %v", held, err)
		}
		if held, err := s.Complete(ctx, row.ID, "B", `{"completed":"success"}`, nil); err != nil || !held {
			t.Fatal(held, err)
		}
		if got := mustGet(t, s, row.ID); got.Result != `{"completed":"success"}` {
			t.Fatalf("done row's result %q", got.Result)
		}
		if held, err := s.SaveStepReply(ctx, row.ID, "B", `{"late":true}`); err != nil || held {
			t.Fatalf("saved into a done row: %v %v", held, err)
		}
		if got := mustGet(t, s, row.ID); got.Result != `{"completed":"success"}` {
			t.Fatalf("done row's result changed: %q", got.Result)
		}
	})

	t.Run("what a row about to park saved is kept by the parked row, for its deadline row to read", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		mustRecord(t, s, intent("Ev1", "step"))
		row := claimOne(t, s, "A")
		if held, err := s.SaveStepReply(ctx, row.ID, "A", `{"step":"parked"}`); err != nil || !held {
			t.Fatalf("holder could not save: %v %v", held, err)
		}
		if res, err := s.Fail(ctx, row.ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "http_400"}); err != nil || !res.Held || res.Status != store.StatusParked {
			t.Fatal(res, err)
		}
		if got, err := s.GetByKey(ctx, row.Key); err != nil || got.Status != store.StatusParked || got.Result != `{"step":"parked"}` {
			t.Fatalf("parked row %+v (%v), want its saved result kept", got, err)
		}
	})
}
