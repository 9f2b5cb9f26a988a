package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// requestIntent is an intent whose rows are performed from Slack's stored bytes.
func requestIntent(eventID string, body []byte, routes ...string) store.Intent {
	in := intent(eventID, routes...)
	in.Request = &store.Request{ContentType: "application/x-www-form-urlencoded", Body: body}
	for i := range in.Rows {
		in.Rows[i].Effect = "redeliver"
		in.Rows[i].RequestID = eventID
	}
	return in
}

func testStoredRequest(t *testing.T, newDB NewDB) {
	t.Run("bytes are stored once per request and come back exactly with each claimed row", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		body := []byte("payload=%7B%22type%22%3A%22x%22%7D&\x00\xff raw")
		if !mustRecord(t, s, requestIntent("ix:1", body, "a", "b")) {
			t.Fatal("first delivery not first")
		}
		if mustRecord(t, s, requestIntent("ix:1", []byte("other bytes"), "a", "b")) {
			t.Fatal("redelivery reported first")
		}
		mustRecord(t, s, intent("Ev2", "plain"))
		if got := db.StoredRequests(t); !slices.Equal(got, []string{"ix:1"}) {
			t.Fatalf("stored requests = %q, want [ix:1] (once per request, not per route)", got)
		}
		rows := mustClaim(t, s, "A", 10, time.Minute)
		if len(rows) != 3 {
			t.Fatalf("claimed %d rows, want 3", len(rows))
		}
		for _, r := range rows {
			if r.Key == "Ev2:plain" {
				if r.RequestID != "" || r.Request != nil {
					t.Fatalf("plain row: request_id %q request %+v", r.RequestID, r.Request)
				}
				continue
			}
			if r.RequestID != "ix:1" || r.Request == nil || !bytes.Equal(r.Request.Body, body) ||
				r.Request.ContentType != "application/x-www-form-urlencoded" {
				t.Fatalf("row %s: request_id %q request %+v", r.Key, r.RequestID, r.Request)
			}
		}
		// Get and GetByKey (what an operator's outbox show reads) bring the
		// request too; List names it without reading it.
		got := mustGet(t, s, rows[0].ID)
		byKey, err := s.GetByKey(ctx, rows[0].Key)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []store.Row{got, byKey} {
			if r.RequestID != "ix:1" || r.Request == nil || !bytes.Equal(r.Request.Body, body) {
				t.Fatalf("read row %s: request_id %q request %+v, want ix:1 with the bytes", r.Key, r.RequestID, r.Request)
			}
		}
		if listed := all(t, s); listed[0].RequestID != "ix:1" || listed[0].Request != nil {
			t.Fatalf("listed row %s: request_id %q request %+v, want ix:1 and nil", listed[0].Key, listed[0].RequestID, listed[0].Request)
		}
	})

	t.Run("an empty body is stored and comes back empty", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecord(t, s, requestIntent("ix:e", nil, "a"))
		rows := mustClaim(t, s, "A", 10, time.Minute)
		if len(rows) != 1 || rows[0].Request == nil || len(rows[0].Request.Body) != 0 {
			t.Fatalf("rows = %+v", rows)
		}
	})

	t.Run("a row written claimed is not claimable by another token until its lease ends", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		in := requestIntent("ix:3", []byte("x"), "a")
		in.Rows[0].ClaimToken, in.Rows[0].ClaimLease = "INLINE", 3*time.Second
		before := db.Now(t)
		mustRecord(t, s, in)
		after := db.Now(t)
		r, err := s.GetByKey(ctx, "ix:3:a")
		if err != nil {
			t.Fatal(err)
		}
		if r.ClaimToken != "INLINE" {
			t.Fatalf("claim token = %q, want INLINE", r.ClaimToken)
		}
		within(t, "lease end - now", r.ClaimExpiresAt.Sub(before), 3*time.Second-time.Millisecond, 3*time.Second+after.Sub(before)+time.Millisecond)
		if rows := mustClaim(t, s, "SWEEP", 10, time.Minute); len(rows) != 0 {
			t.Fatalf("sweep claimed a row held by the inline attempt: %+v", rows)
		}
		rows := mustClaim(t, s, "INLINE", 10, time.Minute)
		if len(rows) != 1 || rows[0].Request == nil {
			t.Fatalf("the inline token does not hold its row: %+v", rows)
		}
		db.Advance(2 * time.Minute)
		if rows := mustClaim(t, s, "SWEEP", 10, time.Minute); len(rows) != 1 {
			t.Fatalf("after the lease, sweep claimed %d rows, want 1", len(rows))
		}
	})

	t.Run("a redelivery does not re-claim an existing row", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecord(t, s, requestIntent("ix:4", []byte("x"), "a"))
		again := requestIntent("ix:4", []byte("x"), "a")
		again.Rows[0].ClaimToken, again.Rows[0].ClaimLease = "LATE", time.Hour
		mustRecord(t, s, again)
		if r, err := s.GetByKey(ctx, "ix:4:a"); err != nil || r.ClaimToken != "" {
			t.Fatalf("row after the duplicate: %+v %v (want no lease)", r, err)
		}
		if rows := mustClaim(t, s, "SWEEP", 10, time.Minute); len(rows) != 1 {
			t.Fatalf("sweep claimed %d rows, want 1: the duplicate must not have leased it", len(rows))
		}
	})

	t.Run("a follow-up of Complete or CompleteBatch may name the stored request", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecord(t, s, requestIntent("ix:f1", []byte("one"), "a"))
		mustRecord(t, s, requestIntent("ix:f2", []byte("two"), "a"))
		rows := mustClaim(t, s, "A", 10, time.Minute)
		if len(rows) != 2 {
			t.Fatalf("claimed %d rows, want 2", len(rows))
		}
		follow := func(r store.Row) []store.NewRow {
			return []store.NewRow{{Key: r.Key + ":again", Effect: "redeliver", Payload: `{}`, RequestID: r.RequestID}}
		}
		if held, err := s.Complete(ctx, rows[0].ID, "A", "", follow(rows[0])); err != nil || !held {
			t.Fatal(held, err)
		}
		if held, err := s.CompleteBatch(ctx, "A", []store.Completion{{ID: rows[1].ID, FollowUps: follow(rows[1])}}); err != nil || !held[0] {
			t.Fatal(held, err)
		}
		got := mustClaim(t, s, "B", 10, time.Minute)
		if len(got) != 2 {
			t.Fatalf("claimed %d follow-ups, want 2", len(got))
		}
		for i, want := range []string{"one", "two"} {
			if got[i].RequestID != rows[i].RequestID || got[i].Request == nil || string(got[i].Request.Body) != want {
				t.Fatalf("follow-up %s: request_id %q request %+v", got[i].Key, got[i].RequestID, got[i].Request)
			}
		}
	})

	t.Run("pruning keeps a request while a pending or parked row needs it", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		for i := range 4 {
			mustRecord(t, s, requestIntent(fmt.Sprintf("ix:p%d", i), []byte("x"), "r"))
		}
		rows := mustClaim(t, s, "A", 3, time.Minute)
		// p0 done, p1 parked, p2 pending under lease, p3 pending unclaimed.
		if held, err := s.Complete(ctx, rows[0].ID, "A", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		if res, err := s.Fail(ctx, rows[1].ID, "A", store.Failure{Kind: store.FailPermanent, Msg: "x"}); err != nil || !res.Held {
			t.Fatal(res, err)
		}
		db.Advance(72 * time.Hour)
		mustRecord(t, s, requestIntent("ix:fresh", []byte("x"), "r"))
		// ix:fresh's row is done, but its request is younger than retention.
		var fresh store.Row
		for _, r := range mustClaim(t, s, "F", 100, time.Minute) {
			if r.Key == "ix:fresh:r" {
				fresh = r
			}
		}
		if held, err := s.Complete(ctx, fresh.ID, "F", "", nil); err != nil || !held {
			t.Fatalf("fresh row not completed: %v %v", held, err)
		}
		res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 1 {
			t.Fatalf("pruned %+v, want exactly 1 request (the done row's)", res)
		}
		want := []string{"ix:fresh", "ix:p1", "ix:p2", "ix:p3"}
		if got := db.StoredRequests(t); !slices.Equal(got, want) {
			t.Fatalf("stored requests = %q, want %q", got, want)
		}
	})
}
