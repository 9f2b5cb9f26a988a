package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
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

func TestStoredRequest(t *testing.T) {
	t.Run("bytes are stored once per request and come back exactly with each claimed row", func(t *testing.T) {
		s, path := newStore(t, nil)
		body := []byte("payload=%7B%22type%22%3A%22x%22%7D&\x00\xff raw")
		if !mustRecord(t, s, requestIntent("ix:1", body, "a", "b")) {
			t.Fatal("first delivery not first")
		}
		if mustRecord(t, s, requestIntent("ix:1", []byte("other bytes"), "a", "b")) {
			t.Fatal("redelivery reported first")
		}
		db := rawDB(t, path)
		if n := count(t, db, `SELECT count(*) FROM slack_requests`); n != 1 {
			t.Fatalf("stored requests = %d, want 1 (once per request, not per route)", n)
		}
		rows := mustClaim(t, s, "A", 10, time.Minute)
		if len(rows) != 2 {
			t.Fatalf("claimed %d rows, want 2", len(rows))
		}
		for _, r := range rows {
			if r.RequestID != "ix:1" || r.Request == nil || !bytes.Equal(r.Request.Body, body) ||
				r.Request.ContentType != "application/x-www-form-urlencoded" {
				t.Fatalf("row %s: request_id %q request %+v", r.Key, r.RequestID, r.Request)
			}
		}
		plain := mustClaimOther(t, s)
		if plain != nil {
			t.Fatalf("unexpected row %+v", plain)
		}
	})

	t.Run("a row whose request is gone is claimed with no request", func(t *testing.T) {
		s, path := newStore(t, nil)
		mustRecord(t, s, requestIntent("ix:2", []byte("x"), "a"))
		if _, err := rawDB(t, path).Exec(`DELETE FROM slack_requests`); err != nil {
			t.Fatal(err)
		}
		rows := mustClaim(t, s, "A", 10, time.Minute)
		if len(rows) != 1 || rows[0].RequestID != "ix:2" || rows[0].Request != nil {
			t.Fatalf("rows = %+v", rows)
		}
	})

	t.Run("a row written claimed is not claimable by another token until its lease ends", func(t *testing.T) {
		c := newClock()
		s, _ := newStore(t, c)
		in := requestIntent("ix:3", []byte("x"), "a")
		in.Rows[0].ClaimToken, in.Rows[0].ClaimLease = "INLINE", 3*time.Second
		mustRecord(t, s, in)
		if rows := mustClaim(t, s, "SWEEP", 10, time.Minute); len(rows) != 0 {
			t.Fatalf("sweep claimed a row held by the inline attempt: %+v", rows)
		}
		rows := mustClaim(t, s, "INLINE", 10, time.Minute)
		if len(rows) != 1 || rows[0].Request == nil {
			t.Fatalf("the inline token does not hold its row: %+v", rows)
		}
		c.Advance(2 * time.Minute)
		if rows := mustClaim(t, s, "SWEEP", 10, time.Minute); len(rows) != 1 {
			t.Fatalf("after the lease, sweep claimed %d rows, want 1", len(rows))
		}
	})

	t.Run("a redelivery does not re-claim an existing row", func(t *testing.T) {
		s, _ := newStore(t, nil)
		mustRecord(t, s, requestIntent("ix:4", []byte("x"), "a"))
		again := requestIntent("ix:4", []byte("x"), "a")
		again.Rows[0].ClaimToken, again.Rows[0].ClaimLease = "LATE", time.Hour
		mustRecord(t, s, again)
		if rows := mustClaim(t, s, "SWEEP", 10, time.Minute); len(rows) != 1 {
			t.Fatalf("sweep claimed %d rows, want 1: the duplicate must not have leased it", len(rows))
		}
	})

	t.Run("pruning keeps a request while a pending or parked row needs it", func(t *testing.T) {
		c := newClock()
		s, path := newStore(t, c)
		ctx := context.Background()
		for i := range 4 {
			mustRecord(t, s, requestIntent(fmt.Sprintf("ix:p%d", i), []byte("x"), "r"))
		}
		rows := mustClaim(t, s, "A", 3, time.Minute)
		// p0 done, p1 parked, p2 pending under lease, p3 pending unclaimed.
		if held, err := s.Complete(ctx, rows[0].ID, "A", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		if _, err := s.Fail(ctx, rows[1].ID, "A", store.FailPermanent, "x", 0); err != nil {
			t.Fatal(err)
		}
		c.Advance(72 * time.Hour)
		mustRecord(t, s, requestIntent("ix:fresh", []byte("x"), "r"))
		// ix:fresh's row is done, but its request is younger than retention.
		fresh := mustClaimKey(t, s, "ix:fresh:r")
		if held, _ := s.Complete(ctx, fresh.ID, "F", "", nil); !held {
			t.Fatal("fresh row not completed")
		}
		res, err := s.Prune(ctx, 48*time.Hour, 7*24*time.Hour, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Requests != 1 {
			t.Fatalf("pruned %+v, want exactly 1 request (the done row's)", res)
		}
		db := rawDB(t, path)
		for id, want := range map[string]int{"ix:p0": 0, "ix:p1": 1, "ix:p2": 1, "ix:p3": 1, "ix:fresh": 1} {
			if n := count(t, db, `SELECT count(*) FROM slack_requests WHERE event_id = ?`, id); n != want {
				t.Errorf("request %s: %d stored, want %d", id, n, want)
			}
		}
	})
}

// mustClaimOther claims with a fresh token and returns a row, or nil.
func mustClaimOther(t *testing.T, s interface {
	Claim(context.Context, string, int, time.Duration, *store.ClaimFilter) ([]store.Row, error)
}) *store.Row {
	t.Helper()
	rows, err := s.Claim(context.Background(), "OTHER", 10, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		return nil
	}
	return &rows[0]
}

// mustClaimKey claims with token F until it holds the row with key.
func mustClaimKey(t *testing.T, s interface {
	Claim(context.Context, string, int, time.Duration, *store.ClaimFilter) ([]store.Row, error)
}, key string) store.Row {
	t.Helper()
	rows, err := s.Claim(context.Background(), "F", 100, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Key == key {
			return r
		}
	}
	t.Fatalf("row %s not claimable", key)
	return store.Row{}
}
