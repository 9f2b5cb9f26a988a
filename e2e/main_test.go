package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/testreq"
)

var (
	flagDuration = flag.Duration("e2e.duration", envDuration("ACKD_E2E_DURATION", 20*time.Second),
		"how long to play Slack at the daemon (env ACKD_E2E_DURATION)")
	flagSeed = flag.Uint64("e2e.seed", envUint("ACKD_E2E_SEED", 0),
		"seed of the fault schedule and the fakes; 0 picks one (env ACKD_E2E_SEED)")
	flagRate = flag.Int("e2e.rate", 40, "events per second between bursts")
	flagKeep = flag.Bool("e2e.keep", false, "keep the run's directory (database, config, every process's log) and print its path")
)

// ackdBin is the binary TestMain built for this run.
var ackdBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(testreq.Main(m)) // TestFaults skips itself; no need to build
	}
	dir, err := os.MkdirTemp("", "ackd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	ackdBin, err = buildAckd(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	testreq.Report() // what skipped, and why, without -v too
	os.Exit(code)
}

// buildAckd builds the module's main package into dir with `go build -o`,
// with -race when this test binary has it.
func buildAckd(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "ackd")
	args := []string{"build", "-o", bin}
	if raceBuild() {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, ".")...)
	cmd.Dir = ".." // the module root: package main
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	return bin, nil
}

// raceBuild reports whether this test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func envUint(name string, def uint64) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}
