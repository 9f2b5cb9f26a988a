package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// searchIDs runs Search and returns the ids found, in the order given.
func searchIDs(tb testing.TB, s store.Store, q string) []int64 {
	tb.Helper()
	rows, err := s.Search(ctx, q, 50)
	if err != nil {
		tb.Fatalf("Search(%q): %v", q, err)
	}
	return ids(rows)
}

// testSearch: the console's search finds a row by each thing an operator
// holds (row id, key, event id, trigger or operation id, channel, ts,
// route), newest first, and nothing for an empty or unknown term; the
// backlog counts by route.
func testSearch(t *testing.T, newDB NewDB) {
	db := newDB(t)
	s := db.Open(t, store.Options{})
	payload := func(route, channel, ts string) string {
		return fmt.Sprintf(`{"route":%q,"source":"event","facts":{"channel":%q,"ts":%q,"text":"<script>alert(1)</script>"}}`, route, channel, ts)
	}
	// An event with two routes (event-keyed), a message-keyed row, a slash
	// command (operation id cmd:TRIGGER), an interaction, and one row
	// whose payload is not JSON.
	mustRecord(t, s, store.Intent{EventID: "Ev1", EventType: "app_mention", Rows: []store.NewRow{
		{Key: "Ev1:greet", Effect: "log", Payload: payload("greet", "C1", "1700000000.000100")},
		{Key: "Ev1:audit", Effect: "log", Payload: payload("audit", "C1", "1700000000.000100")},
	}})
	mustRecord(t, s, store.Intent{EventID: "Ev2", EventType: "message", Request: &store.Request{ContentType: "application/json", Body: []byte(`{}`)},
		Rows: []store.NewRow{{Key: "C2:1700000000.000200:thread", Effect: "log", Payload: payload("thread", "C2", "1700000000.000200"), RequestID: "Ev2"}}})
	mustRecord(t, s, store.Intent{EventID: "cmd:123.456.abc", EventType: "command", Rows: []store.NewRow{
		{Key: "cmd:123.456.abc:deploy", Effect: "log", Payload: `{"route":"deploy","source":"command","facts":{"channel":"C3","trigger_id":"123.456.abc"}}`},
	}})
	mustRecord(t, s, store.Intent{EventID: "ix:789.1.def", EventType: "block_actions", Rows: []store.NewRow{
		{Key: "ix:789.1.def:button", Effect: "log", Payload: `{"route":"button","source":"interaction","facts":{"trigger_id":"789.1.def"}}`},
	}})
	mustRecord(t, s, store.Intent{EventID: "Ev3", EventType: "app_mention", Rows: []store.NewRow{
		{Key: "Ev3:greet", Effect: "log", Payload: `not json "greet"`},
	}})
	byKey := map[string]int64{}
	for _, r := range all(t, s) {
		byKey[r.Key] = r.ID
	}
	greet1, audit1, thread, deploy, button, broken := byKey["Ev1:greet"], byKey["Ev1:audit"], byKey["C2:1700000000.000200:thread"],
		byKey["cmd:123.456.abc:deploy"], byKey["ix:789.1.def:button"], byKey["Ev3:greet"]

	cases := []struct {
		name, q string
		want    []int64
	}{
		{"a row id", fmt.Sprint(thread), []int64{thread}},
		{"a row id with spaces around it", " " + fmt.Sprint(deploy) + " ", []int64{deploy}},
		{"an idempotency key", "Ev1:audit", []int64{audit1}},
		{"an event id: every row of the event", "Ev1", []int64{audit1, greet1}},
		{"the event id of a message-keyed row (its stored request)", "Ev2", []int64{thread}},
		{"a slash command's trigger id", "123.456.abc", []int64{deploy}},
		{"a slash command's operation id", "cmd:123.456.abc", []int64{deploy}},
		{"an interaction's trigger id", "789.1.def", []int64{button}},
		{"a channel id", "C1", []int64{audit1, greet1}},
		{"a channel id of a message key", "C2", []int64{thread}},
		{"a message ts", "1700000000.000200", []int64{thread}},
		{"a route name", "greet", []int64{greet1}},
		{"a route name, newest first", "thread", []int64{thread}},
		{"nothing for an unknown term", "Ev404", nil},
		{"nothing for a prefix of an id", "Ev", nil},
		{"nothing for an empty term", "", nil},
		{"nothing for blanks", "  \t", nil},
		{"a row id that does not exist", "99999", nil},
		{"no SQL from the term", "' OR 1=1 --", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := searchIDs(t, s, tc.q); !slices.Equal(got, tc.want) {
				t.Fatalf("Search(%q) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	t.Run("a row with a payload that is not JSON is found by its key and event id", func(t *testing.T) {
		if got := searchIDs(t, s, "Ev3"); !slices.Equal(got, []int64{broken}) {
			t.Fatalf("Search(Ev3) = %v", got)
		}
	})
	t.Run("rows come back whole, with their status", func(t *testing.T) {
		rows, err := s.Search(ctx, "Ev1:greet", 10)
		if err != nil || len(rows) != 1 {
			t.Fatal(rows, err)
		}
		if r := rows[0]; r.Status != store.StatusPending || r.Effect != "log" || r.Payload != payload("greet", "C1", "1700000000.000100") || r.CreatedAt.IsZero() {
			t.Fatalf("row %+v", r)
		}
	})
	t.Run("the limit holds", func(t *testing.T) {
		rows, err := s.Search(ctx, "C1", 1)
		if err != nil || len(rows) != 1 || rows[0].ID != audit1 {
			t.Fatal(rows, err)
		}
	})
	t.Run("a parked and a done row are found by a payload value", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		parked := parkAll(t, s, "EvP", "pr")
		mustRecord(t, s, intent("EvD", "dr"))
		done := claimOne(t, s, "T")
		if held, err := s.Complete(ctx, done.ID, "T", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		if got := searchIDs(t, s, "pr"); !slices.Equal(got, []int64{parked[0].ID}) {
			t.Fatalf("Search(pr) = %v", got)
		}
		rows, err := s.Search(ctx, "dr", 5)
		if err != nil || len(rows) != 1 || rows[0].ID != done.ID || rows[0].Status != store.StatusDone {
			t.Fatal(rows, err)
		}
	})
	t.Run("a receipt by its event id; an unknown one is ErrNotFound", func(t *testing.T) {
		before := db.Now(t)
		rc, err := s.Receipt(ctx, "cmd:123.456.abc")
		if err != nil || rc.EventID != "cmd:123.456.abc" || rc.EventType != "command" || rc.ReceivedAt.IsZero() || rc.ReceivedAt.After(before.Add(time.Second)) {
			t.Fatal(rc, err)
		}
		if _, err := s.Receipt(ctx, "Ev404"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Receipt(Ev404): %v, want ErrNotFound", err)
		}
	})
	t.Run("route counts: parked and discarded rows by route", func(t *testing.T) {
		db := newDB(t)
		s := db.Open(t, store.Options{})
		parked := parkAll(t, s, "EvA", "a", "b")
		if err := s.Discard(ctx, parked[1].ID); err != nil {
			t.Fatal(err)
		}
		mustRecord(t, s, intent("EvB", "a", "c"))
		mustRecord(t, s, store.Intent{EventID: "EvX", EventType: "x", Rows: []store.NewRow{{Key: "EvX:x", Effect: "log", Payload: "not json"}}})
		mustRecord(t, s, intent("EvC", "d"))
		done := claimOne(t, s, "T") // the oldest due row: EvB:a
		if held, err := s.Complete(ctx, done.ID, "T", "", nil); err != nil || !held {
			t.Fatal(held, err)
		}
		got, err := s.RouteCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[store.RouteCount]bool{}
		for _, c := range []store.RouteCount{
			{Route: "a", Status: store.StatusParked, Rows: 1},
			{Route: "b", Status: store.StatusDiscarded, Rows: 1},
		} {
			want[c] = true
		}
		if len(got) != len(want) {
			t.Fatalf("RouteCounts = %+v", got)
		}
		for _, c := range got {
			if !want[c] {
				t.Fatalf("RouteCounts = %+v: %+v not expected", got, c)
			}
		}
	})
}
