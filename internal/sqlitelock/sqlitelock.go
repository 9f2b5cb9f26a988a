// Package sqlitelock holds an SQLite database's write lock from another
// process — the sqlite3 CLI in BEGIN IMMEDIATE — for tests of what ackd does
// when it cannot write within its ack budget (a hand-run `ackd sweep
// --once`, a backup, an operator's sqlite3 session).
package sqlitelock

import (
	"bufio"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/testreq"
)

// Holder is a sqlite3 CLI process holding a database's write lock.
type Holder struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *strings.Builder
	done   chan error
}

// Hold starts `sqlite3 db`, takes the write lock with BEGIN IMMEDIATE and
// returns once the CLI says it holds it. The process is killed at cleanup
// unless Release ended it first. Without the sqlite3 CLI the test skips
// (fails under ACKD_REQUIRE_REAL=1).
func Hold(tb testing.TB, db string) *Holder {
	tb.Helper()
	bin, err := exec.LookPath("sqlite3")
	testreq.Need(tb, err == nil, "the sqlite3 CLI holds the write lock from another process (apt-get install sqlite3)")
	cmd := exec.Command(bin, "-bail", db)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	h := &Holder{cmd: cmd, stdin: stdin, stderr: &strings.Builder{}, done: make(chan error, 1)}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		h.done <- cmd.Wait()
	}()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.done
	})
	// ackd may hold the lock for a moment (a sweep): wait for it.
	if _, err := io.WriteString(stdin, ".timeout 10000\nBEGIN IMMEDIATE;\nSELECT 'locked';\n"); err != nil {
		tb.Fatal(err)
	}
	select {
	case line := <-lines:
		if line != "locked" {
			tb.Fatalf("sqlite3 said %q, want locked; stderr: %s", line, h.stderr)
		}
	case err := <-h.done:
		tb.Fatalf("sqlite3 exited before taking the lock: %v; stderr: %s", err, h.stderr)
	case <-time.After(20 * time.Second):
		tb.Fatalf("sqlite3 did not take the write lock; stderr: %s", h.stderr)
	}
	return h
}

// Release commits the empty transaction and waits for the process to exit.
func (h *Holder) Release(tb testing.TB) {
	tb.Helper()
	if _, err := io.WriteString(h.stdin, "COMMIT;\n.quit\n"); err != nil {
		tb.Fatal(err)
	}
	_ = h.stdin.Close()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		if err != nil {
			tb.Fatalf("sqlite3: %v", err)
		}
	case <-time.After(10 * time.Second):
		tb.Fatal("sqlite3 did not exit after COMMIT")
	}
}
