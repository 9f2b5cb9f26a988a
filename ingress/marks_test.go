package ingress

import (
	"context"
	"errors"
	"testing"

	"github.com/ackd/ackd/store"
)

// The live path's share of catch-up: one mutex-guarded map update per
// message event in a watched channel (flushed to the database once a
// second, off the ack path).
//
//	go test -run '^$' -bench MarkTracker ./daemon/
func BenchmarkMarkTrackerSaw(b *testing.B) {
	t := newMarkTracker([]string{"C1", "C2"})
	in := InnerEvent{Type: "message", Channel: "C1", TS: "1700000000.000100"}
	for b.Loop() {
		t.saw(in)
	}
}

// failingMarks fails AdvanceMarks; the rest of store.Store is not used.
type failingMarks struct {
	store.Store
	got [][]store.Mark
}

func (f *failingMarks) AdvanceMarks(_ context.Context, ms []store.Mark) error {
	f.got = append(f.got, ms)
	return errors.New("disk full")
}

func TestMarkTrackerKeepsMarksAWriteFailed(t *testing.T) {
	tr := newMarkTracker([]string{"C1"})
	tr.saw(InnerEvent{Type: "message", Channel: "C1", TS: "1700000000.000200"})
	tr.saw(InnerEvent{Type: "message", Channel: "C1", TS: "1700000000.000100"}) // older: ignored
	tr.saw(InnerEvent{Type: "message", Subtype: "message_changed", Channel: "C1", TS: "1700000000.000900"})
	tr.saw(InnerEvent{Type: "app_mention", Channel: "C1", TS: "1700000000.000800"})
	tr.saw(InnerEvent{Type: "message", Channel: "C9", TS: "1700000000.000700"})
	f := &failingMarks{}
	if err := tr.Flush(context.Background(), f); err == nil {
		t.Fatal("flush hid the failure")
	}
	if err := tr.Flush(context.Background(), f); err == nil || len(f.got) != 2 {
		t.Fatalf("the failed marks were not kept for the next flush: %v", f.got)
	}
	if m := f.got[1]; len(m) != 1 || m[0].Channel != "C1" || m[0].TS != "1700000000.000200" {
		t.Fatalf("marks %v: want only C1's newest plain message", m)
	}
}
