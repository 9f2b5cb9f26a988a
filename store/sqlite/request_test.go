package sqlite_test

import (
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// The engine-agnostic stored-request tests are in store/storetest
// (StoredRequest); this one deletes a request behind the store's back.

func TestStoredRequestGone(t *testing.T) {
	s, path := newStore(t, nil)
	in := intent("ix:2", "a")
	in.Request = &store.Request{ContentType: "application/x-www-form-urlencoded", Body: []byte("x")}
	in.Rows[0].Effect, in.Rows[0].RequestID = "redeliver", "ix:2"
	mustRecord(t, s, in)
	if _, err := rawDB(t, path).Exec(`DELETE FROM slack_requests`); err != nil {
		t.Fatal(err)
	}
	rows := mustClaim(t, s, "A", 10, time.Minute)
	if len(rows) != 1 || rows[0].RequestID != "ix:2" || rows[0].Request != nil {
		t.Fatalf("a row whose request is gone: rows = %+v, want request_id ix:2 and no request", rows)
	}
}
