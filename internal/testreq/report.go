package testreq

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	mu      sync.Mutex
	skipped = map[string][]string{} // reason → tests
)

func record(test, reason string) {
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(skipped[reason], test) {
		skipped[reason] = append(skipped[reason], test)
	}
}

// Main runs the package's tests and then Report: a package's TestMain is
// `func TestMain(m *testing.M) { os.Exit(testreq.Main(m)) }`.
func Main(m *testing.M) int {
	code := m.Run()
	Report()
	return code
}

// Summary is the one line Report prints: the package, how many tests
// skipped, and each reason with the tests it skipped. Empty when nothing
// skipped through Need or Short.
func Summary(pkg string) string {
	mu.Lock()
	defer mu.Unlock()
	if len(skipped) == 0 {
		return ""
	}
	reasons := make([]string, 0, len(skipped))
	n := 0
	for r, tests := range skipped {
		n += len(tests)
		names := tests
		if len(names) > 4 {
			names = append(slices.Clone(names[:4]), fmt.Sprintf("%d more", len(tests)-4))
		}
		reasons = append(reasons, fmt.Sprintf("%s (%s)", r, strings.Join(names, ", ")))
	}
	slices.Sort(reasons)
	word := "tests"
	if n == 1 {
		word = "test"
	}
	return fmt.Sprintf("SKIPPED in %s: %d %s: %s", pkg, n, word, strings.Join(reasons, "; "))
}

// Report prints Summary where the person running the tests sees it.
//
// Under `go test ./...` without -v, the go command keeps a passing test
// binary's output to itself and prints only "ok": the line would be lost.
// So, unless -v passes the output through, Report writes to the go
// command's own stderr (its parent's fd 2) when that is a terminal or a
// pipe; into a regular file it could overwrite the go command's own lines
// (two offsets), so there it writes to its own stderr like under -v.
func Report() {
	line := Summary(packagePath())
	if line == "" {
		return
	}
	fmt.Fprintln(summaryWriter(), line)
}

func summaryWriter() io.Writer {
	if f := flag.Lookup("test.v"); f != nil && f.Value.String() != "false" {
		return os.Stderr // -v, -json: the go command shows the binary's output
	}
	parent, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", os.Getppid()), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return os.Stderr
	}
	var st syscall.Stat_t
	if syscall.Fstat(int(parent.Fd()), &st) != nil || st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		parent.Close()
		return os.Stderr
	}
	return parent // closed at exit
}

// packagePath is the tested package's import path, from the test binary's
// build info ("github.com/ackd/ackd/daemon.test").
func packagePath() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return strings.TrimSuffix(os.Args[0], ".test")
}
