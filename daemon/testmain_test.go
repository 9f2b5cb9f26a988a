package daemon_test

import (
	"os"
	"testing"

	"github.com/ackd/ackd/internal/testreq"
)

// TestMain runs the tests, then prints one line naming what skipped for a
// missing component (PostgreSQL, promtool, root…) and why, without -v too.
func TestMain(m *testing.M) { os.Exit(testreq.Main(m)) }
