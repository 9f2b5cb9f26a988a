// Package testreq lets a test that needs a real component (PostgreSQL, the
// real @slack/bolt under node, strace, a tmpfs it mounts as root, promtool)
// skip on a developer's machine that lacks it, with a one-line reason, while
// CI fails instead: .ci/run sets ACKD_REQUIRE_REAL=1, so a CI run in which
// such a test would have skipped fails.
//
// Skips are visible without -v: a package whose tests use Need (directly or
// through pgtest, oldbuild, diskfull…) has a TestMain that ends with
// Report, which prints one line naming what skipped and why (report.go).
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
	record(tb.Name(), reason)
	tb.Skip("skipped: " + reason)
}

// Short skips tb under `go test -short` (the quick loop), and records it
// like Need, so the package's summary line names it. reason says what the
// test does that makes it slow, e.g. "builds the previous release".
func Short(tb testing.TB, reason string) {
	tb.Helper()
	if !testing.Short() {
		return
	}
	record(tb.Name(), "-short: "+reason)
	tb.Skip("skipped under -short: " + reason)
}
