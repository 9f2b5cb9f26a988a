package testreq

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// Issue 30.4: a package whose tests skipped for a missing component says
// so in one line, without -v too, where `go test`'s "ok" would hide it: the
// child test binary's parent here is a shell whose stderr the test reads,
// as the go command's is the terminal's.
func TestReportWithoutVerbose(t *testing.T) {
	want := "SKIPPED in github.com/ackd/ackd/internal/testreq: 1 test: the thing is not installed (TestNeed)\n"
	for _, args := range [][]string{{}, {"-test.v"}} {
		script := `"$0" -test.run='^TestNeed$' "$@"; true` // not exec: the shell stays the parent
		cmd := exec.Command("sh", append([]string{"-c", script, os.Args[0]}, args...)...)
		cmd.Env = append(os.Environ(), "TESTREQ_CHILD=1", "ACKD_REQUIRE_REAL=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if n := strings.Count(string(out), want); n != 1 {
			t.Errorf("args %v: the summary line appears %d times, want once:\n%s", args, n, out)
		}
	}
}

func TestSummaryGroupsByReason(t *testing.T) {
	mu.Lock()
	saved := skipped
	skipped = map[string][]string{}
	mu.Unlock()
	defer func() { mu.Lock(); skipped = saved; mu.Unlock() }()
	for _, n := range []string{"TestA", "TestB", "TestC", "TestD", "TestE"} {
		record(n, "no PostgreSQL")
	}
	record("TestF", "-short: builds the previous release")
	got := Summary("p")
	want := "SKIPPED in p: 6 tests: -short: builds the previous release (TestF); no PostgreSQL (TestA, TestB, TestC, TestD, 1 more)"
	if got != want {
		t.Errorf("Summary = %q\nwant      %q", got, want)
	}
}
