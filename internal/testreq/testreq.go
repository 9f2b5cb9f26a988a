// Package testreq lets a test that needs a real component (PostgreSQL, the
// real @slack/bolt under node, strace, a tmpfs it mounts as root, promtool)
// skip on a developer's machine that lacks it, with a one-line reason, while
// CI fails instead: .ci/run sets ACKD_REQUIRE_REAL=1, so a CI run in which
// such a test would have skipped fails.
package testreq

import (
	"os"
	"testing"
)

// Strict reports whether missing components are failures (CI).
func Strict() bool { return os.Getenv("ACKD_REQUIRE_REAL") == "1" }

// Need skips tb (or fails it under ACKD_REQUIRE_REAL=1) unless ok.
// reason says what is missing and how to provide it, in one line.
func Need(tb testing.TB, ok bool, reason string) {
	tb.Helper()
	if ok {
		return
	}
	if Strict() {
		tb.Fatalf("required in CI (ACKD_REQUIRE_REAL=1) but missing: %s", reason)
	}
	tb.Skip("skipped: " + reason)
}
