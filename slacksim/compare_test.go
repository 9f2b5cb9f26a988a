package slacksim

import (
	"slices"
	"strings"
	"testing"

	"github.com/ackd/ackd/store"
)

// TestJudgeCompareDB proves the database check fails the comparison on
// each kind of loss or duplication it exists to catch.
func TestJudgeCompareDB(t *testing.T) {
	res := BenchResult{Unique: 3, EventIDs: []string{"E1", "E2", "E3"}}
	good := store.EventCheck{Receipts: 3, WithRows: 3}
	stats := func(receipts, pending, done, parked int64) store.Stats {
		return store.Stats{Receipts: receipts, Queue: store.Queue{Pending: pending, Done: done, Parked: parked}}
	}
	tests := []struct {
		name    string
		ev      store.EventCheck
		st      store.Stats
		problem string // "" = passes
		routes  int    // 0: 1
	}{
		{"every acked event with receipt and row passes", good, stats(3, 1, 2, 0), "", 0},
		{"an acked event without a receipt fails", store.EventCheck{Receipts: 2, WithRows: 2, Missing: []string{"E2"}}, stats(2, 2, 0, 0), "have no receipt", 0},
		{"an acked event without an outbox row fails", store.EventCheck{Receipts: 3, WithRows: 2}, stats(3, 2, 0, 0), "have no outbox row", 0},
		{"a duplicate that added a row fails", good, stats(3, 4, 0, 0), "a duplicate added a row", 0},
		{"more receipts than events sent fails", good, stats(4, 4, 0, 0), "4 receipts", 0},
		{"a parked row fails", good, stats(3, 2, 0, 1), "parked", 0},
		{"two routes: two rows per receipt pass", good, stats(3, 2, 4, 0), "", 2},
		{"two routes: one row per receipt fails", good, stats(3, 1, 2, 0), "with 2 route(s)", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := judgeCompareDB(res, tt.ev, tt.st, 0, 0, max(tt.routes, 1))
			got := strings.Join(c.Problems, "; ")
			switch {
			case tt.problem == "" && !c.OK():
				t.Errorf("problems %q, want none", got)
			case tt.problem != "" && (c.OK() || !strings.Contains(got, tt.problem)):
				t.Errorf("problems %q, want one mentioning %q", got, tt.problem)
			}
		})
	}
}

func TestCompareOnly(t *testing.T) {
	names := func(o CompareOptions) []string {
		var out []string
		for _, s := range o.servers() {
			out = append(out, s.Name)
		}
		return out
	}
	all := CompareOptions{Prefill: 1000000}
	if got, want := names(all), []string{"FULL", "FULL+1M", "FULL+1M prune", "NORMAL", "ceiling"}; !slices.Equal(got, want) {
		t.Fatalf("servers = %q, want %q", got, want)
	}
	only := CompareOptions{Prefill: 1000000, Only: []string{"FULL+1M prune", "FULL+1M"}}
	if err := only.checkOnly(); err != nil {
		t.Fatal(err)
	}
	if got, want := names(only), []string{"FULL+1M", "FULL+1M prune", "ceiling"}; !slices.Equal(got, want) {
		t.Fatalf("servers with --only = %q, want %q", got, want)
	}
	bad := CompareOptions{Only: []string{"FULL+1M"}} // no --prefill: there is no such row
	err := bad.checkOnly()
	if err == nil || !strings.Contains(err.Error(), `"FULL+1M"`) || !strings.Contains(err.Error(), "FULL, NORMAL, ceiling") {
		t.Fatalf("checkOnly = %v, want an error naming FULL+1M and the configurations there are", err)
	}
}
