package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

func TestMigrations(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		want         []int
		err          string
	}{
		{"sections in order", "-- header\n-- migrate: 1\nCREATE TABLE a (x);\n-- migrate: 2\nCREATE TABLE b (y);\n", []int{1, 2}, ""},
		{"no section", "CREATE TABLE a (x);", nil, "no \"-- migrate: N\" section"},
		{"a gap", "-- migrate: 1\nSELECT 1;\n-- migrate: 3\nSELECT 3;\n", nil, "migration 3 found where 2 was expected"},
		{"out of order", "-- migrate: 2\nSELECT 2;\n", nil, "migration 2 found where 1 was expected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := store.Migrations(tc.schema)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.Version)
			}
			if len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
				t.Fatalf("versions %v, want %v", got, tc.want)
			}
			if !strings.Contains(ms[1].SQL, "CREATE TABLE b") || strings.Contains(ms[0].SQL, "CREATE TABLE b") {
				t.Fatalf("sections split wrongly: %+v", ms)
			}
		})
	}
}

func TestSlackTS(t *testing.T) {
	for ts, ok := range map[string]bool{
		"1700000000.000100": true, "1700000000.00010": false, "1700000000000100": false, "170000000a.000100": false,
		"": false, "1700000000.0001000": false,
	} {
		if store.ValidTS(ts) != ok {
			t.Errorf("ValidTS(%q) = %v", ts, !ok)
		}
	}
	tm := time.UnixMicro(1700000000000100)
	if got := store.TimeTS(tm); got != "1700000000.000100" || !store.TSTime(got).Equal(tm) {
		t.Fatalf("TimeTS %q, TSTime %v", got, store.TSTime(got))
	}
}

// CheckSchema refuses a version outside [needed, known] in one line that
// names both versions and what to do.
func TestCheckSchema(t *testing.T) {
	for _, tc := range []struct {
		found, known, needed int
		want                 []string // in the message; nil: accepted
	}{
		{5, 5, 0, nil},
		{4, 5, 3, nil},
		{3, 5, 3, nil},
		{4, 5, 0, []string{"version 4 is older than this ackd's (5)", "`ackd migrate`"}},
		{2, 5, 3, []string{"version 2 is older than this command needs (3; this ackd knows 5)", "`ackd migrate`"}},
		{6, 5, 3, []string{"version 6 is newer than this ackd knows (5)", "`ackd migrate` never downgrades"}},
	} {
		err := store.CheckSchema(tc.found, tc.known, tc.needed)
		if tc.want == nil {
			if err != nil {
				t.Errorf("CheckSchema(%d, %d, %d) = %v, want nil", tc.found, tc.known, tc.needed, err)
			}
			continue
		}
		var se *store.SchemaError
		if !errors.As(err, &se) || se.Found != tc.found || se.Known != tc.known {
			t.Errorf("CheckSchema(%d, %d, %d) = %v, want a *SchemaError", tc.found, tc.known, tc.needed, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
				t.Errorf("CheckSchema(%d, %d, %d) = %q, want one line containing %q", tc.found, tc.known, tc.needed, err, w)
			}
		}
	}
}

// A section's "-- cost:" and "-- rows:" lines are its cost and its count
// query, and no part of its summary.
func TestMigrationCost(t *testing.T) {
	ms, err := store.Migrations("-- migrate: 1\n-- cost: in place: adds a\n-- cost: column\n-- rows: SELECT count(*) FROM t\n\n-- What it is for. More.\nALTER TABLE t ADD COLUMN c;\n-- migrate: 2\n-- Nothing to say\nSELECT 1;\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := ms[0].Summary(); got != "What it is for." {
		t.Errorf("Summary = %q", got)
	}
	if got := ms[0].Cost(); got != "in place: adds a column" {
		t.Errorf("Cost = %q", got)
	}
	if got := ms[0].RowsSQL(); got != "SELECT count(*) FROM t" {
		t.Errorf("RowsSQL = %q", got)
	}
	if ms[1].Cost() != "" || ms[1].RowsSQL() != "" || ms[1].Summary() != "Nothing to say" {
		t.Errorf("a section without annotations: %q %q %q", ms[1].Cost(), ms[1].RowsSQL(), ms[1].Summary())
	}
}
