package cli

// Tests of `ackd bench compare` as a real process (procBin, built by
// TestMain) starting its real children: two `ackd serve` and one
// `ackd ceiling`, each on a free 127.0.0.1 port, at a tiny load.

import (
	"encoding/json"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/ackd/ackd/internal/testreq"
	"github.com/ackd/ackd/slacksim"
)

// compareTestRun runs `ackd bench compare` at 200 events/s for 1 s with
// 20% duplicates and a fixed seed, in a fresh directory, plus extra args.
func compareTestRun(tb testing.TB, extra ...string) (procResult, string) {
	tb.Helper()
	dir := tb.TempDir()
	args := append([]string{"bench", "compare", "--rate", "200", "--duration", "1s",
		"--dup-fraction", "0.2", "--seed", "7", "--dir", dir}, extra...)
	return procMustRun(tb, procEnv(), args...), dir
}

func TestBenchCompare(t *testing.T) {
	testreq.Short(t, "benchmarks three daemons")
	t.Run("measures FULL, NORMAL and the ceiling under identical load and checks both databases", func(t *testing.T) {
		r, dir := compareTestRun(t, "--json")
		var rep slacksim.CompareReport
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("stdout is not the JSON report: %v\n%s", err, r.Stdout)
		}
		if !rep.OK {
			t.Errorf("report not OK: %s", r.Stdout)
		}
		if rep.Machine.CPUs != runtime.NumCPU() || rep.Machine.GoVersion == "" {
			t.Errorf("machine = %+v, want %d CPUs and a Go version", rep.Machine, runtime.NumCPU())
		}
		if !strings.Contains(rep.Command, "bench compare --rate 200 --duration 1s") {
			t.Errorf("command = %q, want the command line", rep.Command)
		}
		names := make([]string, len(rep.Rows))
		for i, row := range rep.Rows {
			names[i] = row.Config
		}
		if got := strings.Join(names, ","); got != "FULL,NORMAL,ceiling" {
			t.Fatalf("rows = %s, want FULL,NORMAL,ceiling", got)
		}

		ceil := rep.Rows[2].Bench
		for _, row := range rep.Rows {
			b := row.Bench
			// 200/s for 1 s schedules exactly 200 events; the seed fixes which are duplicated.
			if b.Unique != 200 || b.Skipped != 0 || b.Sent != b.Unique+b.Duplicates {
				t.Errorf("%s: %d events + %d duplicates = %d sent, %d skipped; want 200 events, none skipped",
					row.Config, b.Unique, b.Duplicates, b.Sent, b.Skipped)
			}
			if b.Duplicates == 0 || b.Duplicates != ceil.Duplicates {
				t.Errorf("%s: %d duplicates, ceiling %d: want the same non-zero number (same seed)", row.Config, b.Duplicates, ceil.Duplicates)
			}
			if row.Non2xx != 0 || b.Errors != 0 || b.Acked() != b.Sent {
				t.Errorf("%s: %d non-2xx, %d errors (%s), %d of %d acked; want every request acked",
					row.Config, row.Non2xx, b.Errors, b.FirstError, b.Acked(), b.Sent)
			}
			if !(0 < b.P50 && b.P50 <= b.P90 && b.P90 <= b.P99 && b.P99 <= b.P999 && b.P999 <= b.Max) {
				t.Errorf("%s: percentiles not ordered: p50 %v p90 %v p99 %v p99.9 %v max %v",
					row.Config, b.P50, b.P90, b.P99, b.P999, b.Max)
			}
			if b.AchievedRate <= 0 {
				t.Errorf("%s: achieved %v/s", row.Config, b.AchievedRate)
			}
			if _, err := os.Stat("/proc/self/status"); err == nil && !(row.PeakRSSMiB > 1 && row.PeakRSSMiB < 1024) {
				t.Errorf("%s: peak RSS %.1f MiB, want a real process's (1 MiB .. 1 GiB)", row.Config, row.PeakRSSMiB)
			}
			if row.Exit != "exit 0" {
				t.Errorf("%s: after SIGTERM %s, want exit 0", row.Config, row.Exit)
			}
			wantP99 := float64(b.P99) / float64(ceil.P99)
			wantRate := b.AchievedRate / ceil.AchievedRate
			if math.Abs(row.P99VsCeiling-wantP99) > 1e-9 || math.Abs(row.ThroughputVsCeiling-wantRate) > 1e-9 {
				t.Errorf("%s: ratios %v, %v; want p99/ceiling p99 = %v and achieved/ceiling achieved = %v",
					row.Config, row.P99VsCeiling, row.ThroughputVsCeiling, wantP99, wantRate)
			}
		}

		for _, row := range rep.Rows[:2] {
			c := row.Check
			if c == nil {
				t.Errorf("%s: no database check", row.Config)
				continue
			}
			b := row.Bench
			if c.AckedEvents != b.Unique || c.WithReceipt != b.Unique || c.WithRow != b.Unique {
				t.Errorf("%s: check %+v, want all %d events acked with receipt and row", row.Config, *c, b.Unique)
			}
			// Each duplicate got 200 above; here: it added no receipt and no row.
			if c.Receipts != int64(b.Unique) || c.Rows != int64(b.Unique) || c.Parked != 0 || !c.OK() {
				t.Errorf("%s: %d receipts, %d rows, %d parked, problems %v; want %d, %d, 0, none",
					row.Config, c.Receipts, c.Rows, c.Parked, c.Problems, b.Unique, b.Unique)
			}
			// The dry-run route cannot fail: the outbox drains.
			if row.RowsAcked != b.Unique || row.DoneAtEnd < 0 || row.DoneAtEnd > int64(row.RowsAcked) || row.DrainSeconds < 0 {
				t.Errorf("%s: %d rows acked, %d done at the end, drained after %vs; want %d, 0..%d, ≥ 0",
					row.Config, row.RowsAcked, row.DoneAtEnd, row.DrainSeconds, b.Unique, b.Unique)
			}
			if row.DBBytes <= 0 || row.BytesPerEvent <= 0 {
				t.Errorf("%s: database %d bytes, %v per event; want both measured", row.Config, row.DBBytes, row.BytesPerEvent)
			}
		}
		if rep.Rows[2].Check != nil {
			t.Errorf("ceiling has a database check: %+v", *rep.Rows[2].Check)
		}

		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("left %d entries in --dir %s without --keep", len(left), dir)
		}
	})

	t.Run("prints a table with the machine, the command and one row per server", func(t *testing.T) {
		r, _ := compareTestRun(t)
		var rows []string
		for _, line := range strings.Split(r.Stdout, "\n") {
			f := strings.Fields(line)
			if len(f) == 13 && (f[0] == "FULL" || f[0] == "NORMAL" || f[0] == "ceiling") {
				rows = append(rows, f[0])
				if f[2] != "0" || f[3] != "0" {
					t.Errorf("row %q: non-2xx %s, errors %s; want 0 and 0", line, f[2], f[3])
				}
			}
		}
		if got := strings.Join(rows, ","); got != "FULL,NORMAL,ceiling" {
			t.Errorf("table rows = %q, want FULL,NORMAL,ceiling\n%s", got, r.Stdout)
		}
		for _, want := range []string{"machine: ", "CPUs", runtime.Version(), "command: ", "bench compare --rate 200",
			"p99 vs ceiling", "throughput vs ceiling", "db check ok"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("output lacks %q:\n%s", want, r.Stdout)
			}
		}
		if strings.Count(r.Stdout, "db check ok") != 2 {
			t.Errorf("want two passing database checks (FULL and NORMAL):\n%s", r.Stdout)
		}
		// The sizing table: one line per server with a database, rows acked,
		// done at load end (with its share), drain time, size, bytes per event.
		sizing := 0
		for _, line := range strings.Split(r.Stdout, "\n") {
			f := strings.Fields(line)
			if len(f) == 7 && (f[0] == "FULL" || f[0] == "NORMAL") && strings.HasSuffix(f[3], "%)") && strings.HasSuffix(f[4], "s") {
				sizing++
			}
		}
		if !strings.Contains(r.Stdout, "done at load end") || sizing != 2 {
			t.Errorf("want the rows table with a FULL and a NORMAL line, found %d:\n%s", sizing, r.Stdout)
		}
	})

	t.Run("--prefill adds FULL on a pre-filled database, served without and with pruning, each check still passing", func(t *testing.T) {
		r, _ := compareTestRun(t, "--json", "--prefill", "300")
		var rep slacksim.CompareReport
		if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
			t.Fatalf("stdout is not the JSON report: %v\n%s", err, r.Stdout)
		}
		names := make([]string, len(rep.Rows))
		for i, row := range rep.Rows {
			names[i] = row.Config
		}
		if got := strings.Join(names, ","); got != "FULL,FULL+300,FULL+300 prune,NORMAL,ceiling" {
			t.Fatalf("rows = %s", got)
		}
		if !rep.OK {
			t.Errorf("report not OK: %s", r.Stdout)
		}
		for _, row := range rep.Rows[1:3] {
			c := row.Check
			if c == nil || !c.OK() || c.WithReceipt != row.Bench.Unique || c.WithRow != row.Bench.Unique {
				t.Fatalf("%s: check %+v, want every acked event with its receipt and row", row.Config, c)
			}
		}
		if rep.Rows[1].BytesPerEvent <= 0 {
			t.Errorf("%s: no bytes per event", rep.Rows[1].Config)
		}
		// Without pruning every pre-filled receipt stays; with it, they may go.
		if left := rep.Rows[1].Check.PrefillLeft; left != 300 {
			t.Errorf("pre-filled receipts left without pruning = %d, want 300", left)
		}
		if left := rep.Rows[2].Check.PrefillLeft; left < 0 || left > 300 {
			t.Errorf("pre-filled receipts left while pruning = %d, want 0..300", left)
		}
	})

	t.Run("rate and concurrency together are refused before any server starts", func(t *testing.T) {
		dir := t.TempDir()
		r := procRun(t, procEnv(), "bench", "compare", "--rate", "100", "--concurrency", "8", "--dir", dir)
		if r.Code == 0 || !strings.Contains(r.Stderr, "not both") {
			t.Errorf("exit %d, stderr %q; want an error naming the conflict", r.Code, r.Stderr)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("created %d entries in --dir before refusing", len(left))
		}
	})
}
