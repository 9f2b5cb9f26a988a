package testreq

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNeed runs a child test binary with and without ACKD_REQUIRE_REAL and
// checks that a missing component skips locally and fails in CI.
func TestNeed(t *testing.T) {
	if os.Getenv("TESTREQ_CHILD") == "1" {
		Need(t, false, "the thing is not installed")
		return
	}
	for _, tc := range []struct {
		strict   string
		wantFail bool
		want     string
	}{
		{"", false, "skipped: the thing is not installed"},
		{"1", true, "required in CI (ACKD_REQUIRE_REAL=1) but missing: the thing is not installed"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNeed$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTREQ_CHILD=1", "ACKD_REQUIRE_REAL="+tc.strict)
		out, err := cmd.CombinedOutput()
		if failed := err != nil; failed != tc.wantFail {
			t.Errorf("ACKD_REQUIRE_REAL=%q: failed=%v, want %v\n%s", tc.strict, failed, tc.wantFail, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("ACKD_REQUIRE_REAL=%q: output lacks %q:\n%s", tc.strict, tc.want, out)
		}
	}
}
