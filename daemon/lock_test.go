package daemon_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/sqlitelock"
)

// Tests for a database ackd cannot write: another process holding the write
// lock past the ack budget, and a read-only file.

// lockHold holds the database's write lock from a sqlite3 process.
func lockHold(tb testing.TB, db string) *sqlitelock.Holder { return sqlitelock.Hold(tb, db) }

func lockGetHealth(tb testing.TB, s *testServer) response {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+"/healthz", nil)
	if err != nil {
		tb.Fatal(err)
	}
	return s.do(req)
}

func TestWriteLockHeldByAnotherProcess(t *testing.T) {
	api := fakeslack.New(t, evBotToken)
	// A short ticker: a late commit of the failed intent (harmless, see
	// store.RecordIntent) makes the retry a duplicate, which does not
	// trigger the immediate attempt; the ticker delivers it.
	s := startServer(t, evPostConfig(t, api, "[ack]\nbudget = \"500ms\"\n[sweep]\ninterval = \"300ms\""), evBotOptions())
	const budget = 500 * time.Millisecond
	const eventID = "Ev0LOCKED"
	body := eventBody(eventID, mention("C1", "1700000000.000800", "<@UBOT> hi"))
	if r := lockGetHealth(t, s); r.Status != http.StatusOK {
		t.Fatalf("healthz before the lock: %d %q", r.Status, r.Body)
	}

	holder := lockHold(t, s.DB)

	start := time.Now()
	r := s.postEvent(body)
	took := time.Since(start)
	if r.Status != http.StatusInternalServerError {
		t.Fatalf("status %d %q while another process holds the write lock, want 500", r.Status, r.Body)
	}
	if took < budget || took > budget+2*time.Second {
		t.Errorf("answered in %s, want after the %s budget and within %s", took, budget, budget+2*time.Second)
	}
	evWaitLog(t, s.Logs, "event_id", eventID, "status", 500, "outcome", "failed", "reason", "database busy past the ack budget")
	if receipts, outbox := s.rows(); receipts != 0 || outbox != 0 {
		t.Fatalf("%d receipts and %d outbox rows while the lock is held, want none", receipts, outbox)
	}
	// /healthz answers from a write check at most a second old (the one
	// before the lock may still be it).
	var h response
	waitFor(t, "healthz to say 503 while the lock is held", 10*time.Second, func() bool {
		h = lockGetHealth(t, s)
		return h.Status == http.StatusServiceUnavailable
	})
	if !strings.Contains(string(h.Body), "database locked by another process") {
		t.Fatalf("healthz while the lock is held: %d %q, want 503 saying the database is locked by another process", h.Status, h.Body)
	}
	if n := len(api.Calls()); n != 0 {
		t.Fatalf("%d Slack calls before anything was recorded, want 0", n)
	}

	holder.Release(t)

	// Slack retries the same body.
	r = s.post("/slack/events", "application/json", body, http.Header{
		"X-Slack-Retry-Num": {"1"}, "X-Slack-Retry-Reason": {"http_error"},
	})
	if r.Status != http.StatusOK {
		t.Fatalf("retry after the lock was released: status %d %q, want 200", r.Status, r.Body)
	}
	// Whether the retry is "first" or "duplicate" depends on whether the
	// failed delivery's transaction committed late, once the lock was free.
	retry := evWaitLog(t, s.Logs, "event_id", eventID, "status", 200, "retry_num", "1")
	t.Logf("the retry was %v", retry["outcome"])
	evDrained(t, s)
	if receipts, outbox := s.rows(); receipts != 1 || outbox != 1 {
		t.Fatalf("%d receipts and %d outbox rows, want 1 and 1", receipts, outbox)
	}
	if n := len(api.CallsTo("chat.postMessage")); n != 1 {
		t.Fatalf("%d chat.postMessage calls, want exactly 1", n)
	}
	waitFor(t, "healthz to recover", 15*time.Second, func() bool { return lockGetHealth(t, s).Status == http.StatusOK })
}

// lockChattr runs chattr with args, skipping the test when the file system
// or the privileges do not allow it.
func lockChattr(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command("chattr", args...).CombinedOutput(); err != nil {
		tb.Fatalf("chattr %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// lockRequireChattr skips unless chattr +i works in dir: it needs the chattr
// binary, CAP_LINUX_IMMUTABLE (root) and a file system that supports it.
func lockRequireChattr(tb testing.TB, dir string) {
	tb.Helper()
	if _, err := exec.LookPath("chattr"); err != nil {
		tb.Skip("chattr not found; it is needed to make the database read-only for root (e2fsprogs)")
	}
	probe := filepath.Join(dir, "chattr-probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", probe).CombinedOutput(); err != nil {
		tb.Skipf("chattr +i does not work in %s (needs root and a file system with the immutable flag): %v: %s", dir, err, out)
	}
	lockChattr(tb, "-i", probe)
}

// A read-only database file (made immutable: as root, chmod would not stop
// writes). ackd opens it and serves, but cannot record: each delivery gets
// 500 and is logged as read-only; nothing already recorded is lost.
//
// The file is made immutable before Open. Making it immutable under a running
// server does not give SQLITE_READONLY: in WAL mode writes go to the -wal
// file through descriptors opened earlier (and an immutable -wal gives a disk
// I/O error instead).
func TestReadOnlyDatabase(t *testing.T) {
	cfg := configFor(t, "")
	lockRequireChattr(t, filepath.Dir(cfg.DB))

	// Record one event with a writable file, then close every handle on it.
	if !t.Run("record an event while writable", func(t *testing.T) {
		first := startServer(t, cfg, daemon.Options{})
		if r := first.postEvent(eventBody("Ev0BEFORE", mention("C1", "1.1", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("status %d %q, want 200", r.Status, r.Body)
		}
		evDrained(t, first)
	}) {
		t.FailNow()
	}

	lockChattr(t, "+i", cfg.DB)
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", cfg.DB).Run() }) // before TempDir removal
	if f, err := os.OpenFile(cfg.DB, os.O_WRONLY, 0); err == nil {
		f.Close()
		t.Fatal("the immutable database file opened for writing")
	}

	s := startServer(t, cfg, daemon.Options{})
	const eventID = "Ev0READONLY"
	r := s.postEvent(eventBody(eventID, mention("C1", "1.2", "hi")))
	if r.Status != http.StatusInternalServerError {
		t.Fatalf("status %d %q on a read-only database, want 500", r.Status, r.Body)
	}
	evWaitLog(t, s.Logs, "event_id", eventID, "status", 500, "outcome", "failed", "reason", "database is read-only")
	if h := lockGetHealth(t, s); h.Status != http.StatusServiceUnavailable {
		t.Errorf("healthz on a read-only database: %d %q, want 503", h.Status, h.Body)
	}

	lockChattr(t, "-i", cfg.DB)
	if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id = 'Ev0BEFORE'`); n != 1 {
		t.Fatalf("the receipt recorded before is gone")
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = ? AND status = 'done'`, "Ev0BEFORE:"+config.DefaultRouteName); n != 1 {
		t.Fatalf("the outbox row recorded before is gone")
	}
	if receipts, outbox := s.rows(); receipts != 1 || outbox != 1 {
		t.Fatalf("%d receipts and %d outbox rows, want only the ones recorded before", receipts, outbox)
	}
}
