package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ackd/ackd/store"
)

// recovered is one recovered message's intent with message-keyed rows,
// the way catch-up records it.
func recovered(ch, ts string, routes ...string) store.Recovered {
	in := store.Intent{EventID: "msg:T1:" + ch + ":" + ts, EventType: "message (recovered)",
		Request: &store.Request{ContentType: "application/json", Body: []byte(`{"type":"event_callback"}`)}}
	for _, r := range routes {
		in.Rows = append(in.Rows, store.NewRow{Key: ch + ":" + ts + ":" + r, Effect: "log",
			Payload: fmt.Sprintf(`{"route":%q}`, r), RequestID: in.EventID})
	}
	return store.Recovered{Intents: []store.Intent{in}, Channel: ch, TS: ts}
}

func markOf(tb testing.TB, s store.Store, ch string) store.Mark {
	tb.Helper()
	ms, err := s.Marks(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	for _, m := range ms {
		if m.Channel == ch {
			return m
		}
	}
	return store.Mark{}
}

func mustRecover(tb testing.TB, s store.Store, rec store.Recovered) int {
	tb.Helper()
	n, err := s.RecordRecovered(ctx, []store.Recovered{rec})
	if err != nil {
		tb.Fatal(err)
	}
	return n[0]
}

func testMarks(t *testing.T, newDB NewDB) {
	t.Run("a recovered message records once, whichever of live and catch-up comes first", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		// Catch-up first: rows, receipt and request are written.
		if n := mustRecover(t, s, recovered("C1", "1700000000.000100", "eyes")); n != 1 {
			t.Fatalf("first recovery inserted %d rows, want 1", n)
		}
		if ok, _ := s.HasReceipt(ctx, "msg:T1:C1:1700000000.000100"); !ok {
			t.Fatal("no receipt for the recovered message")
		}
		// Catch-up again: nothing new.
		if n := mustRecover(t, s, recovered("C1", "1700000000.000100", "eyes")); n != 0 {
			t.Fatalf("second recovery inserted %d rows, want 0", n)
		}
		// The live delivery of the same message (message-keyed row): a new
		// receipt, no new row.
		live := store.Intent{EventID: "EvLate", EventType: "message",
			Rows: []store.NewRow{{Key: "C1:1700000000.000100:eyes", Effect: "log", Payload: "{}"}}}
		mustRecord(t, s, live)
		if got := len(all(t, s)); got != 1 {
			t.Fatalf("%d outbox rows, want 1", got)
		}

		// Live first: catch-up adds nothing, and writes no receipt (receipts
		// count what catch-up acted on).
		mustRecord(t, s, store.Intent{EventID: "EvLive", EventType: "message",
			Rows: []store.NewRow{{Key: "C1:1700000000.000200:eyes", Effect: "log", Payload: "{}"}}})
		if n := mustRecover(t, s, recovered("C1", "1700000000.000200", "eyes")); n != 0 {
			t.Fatalf("recovery after the live delivery inserted %d rows, want 0", n)
		}
		if ok, _ := s.HasReceipt(ctx, "msg:T1:C1:1700000000.000200"); ok {
			t.Fatal("a receipt was written for a message the live path had recorded")
		}
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Recovered != 1 {
			t.Fatalf("Stats.Recovered = %d, want 1", st.Recovered)
		}
		if got := markOf(t, s, "C1").TS; got != "1700000000.000200" {
			t.Fatalf("mark %q, want the newest recovered ts", got)
		}
	})

	t.Run("marks only move forward", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if err := s.AdvanceMarks(ctx, []store.Mark{{Channel: "C1", TS: "1700000000.000500"}, {Channel: "C2", TS: "1700000000.000001"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.AdvanceMarks(ctx, []store.Mark{{Channel: "C1", TS: "1700000000.000400"}}); err != nil {
			t.Fatal(err)
		}
		mustRecover(t, s, recovered("C1", "1700000000.000300", "r"))
		if got := markOf(t, s, "C1").TS; got != "1700000000.000500" {
			t.Fatalf("C1 mark %q went back", got)
		}
		if got := markOf(t, s, "C2").TS; got != "1700000000.000001" {
			t.Fatalf("C2 mark %q", got)
		}
		if err := s.AdvanceMarks(ctx, []store.Mark{{Channel: "C1", TS: "not-a-ts"}}); err == nil {
			t.Fatal("a malformed ts was accepted as a mark")
		}
	})

	t.Run("a catch-up cut short resumes where it had recorded to, though live events moved the mark on", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		if _, ok, err := s.BeginCatchUp(ctx, "C1"); err != nil || ok {
			t.Fatalf("BeginCatchUp without a mark = %v, %v; want not found", ok, err)
		}
		if err := s.AdvanceMarks(ctx, []store.Mark{{Channel: "C1", TS: "1700000000.000100"}}); err != nil {
			t.Fatal(err)
		}
		m, ok, err := s.BeginCatchUp(ctx, "C1")
		if err != nil || !ok || m.ResumeFrom != "1700000000.000100" {
			t.Fatalf("BeginCatchUp = %+v, %v, %v", m, ok, err)
		}
		rec := recovered("C1", "1700000000.000200", "r")
		rec.Resume = true
		mustRecover(t, s, rec)
		// Live events arrive meanwhile.
		if err := s.AdvanceMarks(ctx, []store.Mark{{Channel: "C1", TS: "1700000000.000900"}}); err != nil {
			t.Fatal(err)
		}
		// The process dies here; the next one begins from the resume point.
		m, _, err = s.BeginCatchUp(ctx, "C1")
		if err != nil || m.ResumeFrom != "1700000000.000200" || m.TS != "1700000000.000900" {
			t.Fatalf("after a cut-short catch-up BeginCatchUp = %+v, %v", m, err)
		}
		if err := s.EndCatchUp(ctx, "C1"); err != nil {
			t.Fatal(err)
		}
		if m := markOf(t, s, "C1"); m.ResumeFrom != "" {
			t.Fatalf("resume point %q kept after EndCatchUp", m.ResumeFrom)
		}
		// With none set, Resume does not create one.
		rec = recovered("C1", "1700000000.000950", "r")
		rec.Resume = true
		mustRecover(t, s, rec)
		if m := markOf(t, s, "C1"); m.ResumeFrom != "" {
			t.Fatalf("a resume point %q appeared outside a catch-up", m.ResumeFrom)
		}
	})

	t.Run("several messages in one call: counted each, in order, the mark at the last", func(t *testing.T) {
		s := newDB(t).Open(t, store.Options{})
		mustRecover(t, s, recovered("C1", "1700000000.000200", "r"))
		n, err := s.RecordRecovered(ctx, []store.Recovered{
			recovered("C1", "1700000000.000100", "r"), recovered("C1", "1700000000.000200", "r"), recovered("C1", "1700000000.000300", "r", "q"),
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(n) != "[1 0 2]" {
			t.Fatalf("rows per message %v, want [1 0 2]", n)
		}
		if got := markOf(t, s, "C1").TS; got != "1700000000.000300" {
			t.Fatalf("mark %q", got)
		}
		if _, err := s.RecordRecovered(ctx, []store.Recovered{recovered("C2", "1700000000.000100", "r"), {Channel: "C2", TS: "bad"}}); err == nil {
			t.Fatal("a malformed ts was accepted")
		}
		if m := markOf(t, s, "C2"); m.TS != "" {
			t.Fatalf("a refused call wrote the mark %q", m.TS)
		}
	})

	t.Run("concurrent recoveries of one message insert its rows once", func(t *testing.T) {
		db := newDB(t)
		a, b := db.Open(t, store.Options{}), db.Open(t, store.Options{})
		var wg sync.WaitGroup
		total := make([]int, 8)
		for i := range total {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := a
				if i%2 == 1 {
					st = b
				}
				n, err := st.RecordRecovered(ctx, []store.Recovered{recovered("C9", "1700000000.000001", "x", "y")})
				if err != nil {
					t.Error(err)
					return
				}
				total[i] = n[0]
			}()
		}
		wg.Wait()
		sum := 0
		for _, n := range total {
			sum += n
		}
		if sum != 2 {
			t.Fatalf("rows inserted across racing recoveries = %d, want 2", sum)
		}
	})
}
