package daemon_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// notifySocket stands in for systemd's notify socket: a unixgram socket in
// t.TempDir() whose datagrams a goroutine hands to the test in arrival order.
type notifySocket struct {
	t    *testing.T
	addr string
	got  chan string
}

// notifyListen opens the socket and points NOTIFY_SOCKET at it, with a
// watchdog of WATCHDOG_USEC = watchdog meant for any process (WATCHDOG_PID
// unset). t.Setenv forbids t.Parallel in these tests.
func notifyListen(t *testing.T, watchdog time.Duration) *notifySocket {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	ns := &notifySocket{t: t, addr: addr, got: make(chan string, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, _, err := conn.ReadFromUnix(buf)
			if err != nil {
				close(ns.got)
				return
			}
			ns.got <- string(buf[:n])
		}
	}()
	// Registered before startServer's cleanup, so it runs after the server
	// is closed: the socket outlives every datagram the server sends.
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	t.Setenv("NOTIFY_SOCKET", addr)
	t.Setenv("WATCHDOG_USEC", fmt.Sprint(watchdog.Microseconds()))
	t.Setenv("WATCHDOG_PID", "") // registers the restore
	os.Unsetenv("WATCHDOG_PID")
	return ns
}

// next returns the next datagram, failing after a generous deadline rather
// than hanging the run.
func (ns *notifySocket) next() string {
	ns.t.Helper()
	select {
	case d, ok := <-ns.got:
		if !ok {
			ns.t.Fatal("notify socket closed")
		}
		return d
	case <-time.After(10 * time.Second):
		ns.t.Fatal("no sd_notify datagram within 10s")
		return ""
	}
}

// until reads datagrams until one equals want and returns those before it,
// failing if want has not come within a generous deadline.
func (ns *notifySocket) until(want string) []string {
	ns.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var before []string
	for {
		if time.Now().After(deadline) {
			ns.t.Fatalf("no %q within 10s; got %q", want, before)
		}
		d := ns.next()
		if d == want {
			return before
		}
		before = append(before, d)
	}
}

// flush sends a sentinel datagram of its own and returns everything the
// server sent before it. Datagrams queue on the socket in the order their
// send returned, so the result is exactly what the server had sent when
// flush was called.
func (ns *notifySocket) flush() []string {
	ns.t.Helper()
	sentinel := fmt.Sprintf("X-TEST-SENTINEL=%d", time.Now().UnixNano())
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: ns.addr, Net: "unixgram"})
	if err != nil {
		ns.t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(sentinel)); err != nil {
		ns.t.Fatal(err)
	}
	return ns.until(sentinel)
}

var notifyStatusLine = regexp.MustCompile(`^STATUS=pending=(\d+) parked=(\d+) oldest_pending=\S+$`)

// notifyOnly fails unless every datagram is a watchdog ping or a status line.
func notifyOnly(tb testing.TB, what string, ds []string) {
	tb.Helper()
	for _, d := range ds {
		if d != "WATCHDOG=1" && !notifyStatusLine.MatchString(d) {
			tb.Errorf("%s: unexpected datagram %q (all: %q)", what, d, ds)
		}
	}
}

// notifyNotPinging counts the watchdog loop's "unhealthy, not pinging" logs.
func notifyNotPinging(srv *testServer) int {
	n := 0
	for _, m := range srv.Logs.Lines() {
		if strings.HasPrefix(fmt.Sprint(m["msg"]), "not pinging the systemd watchdog") {
			n++
		}
	}
	return n
}

func TestServerNotifiesSystemd(t *testing.T) {
	// WatchdogSec=400ms: the server pings every 200ms.
	const watchdog = 400 * time.Millisecond

	t.Run("READY=1 once listening, status and watchdog pings while running, STOPPING=1 at Close", func(t *testing.T) {
		ns := notifyListen(t, watchdog)
		srv := startServer(t, configFor(t, metricsQuietSweep+`
[[route]]
name   = "log"
event  = "message"
effect = "log"
`), daemon.Options{Notifier: daemon.NewNotifier()})

		if d := ns.next(); d != "READY=1" {
			t.Fatalf("first datagram = %q, want READY=1", d)
		}
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatalf("GET /healthz right after READY=1: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /healthz right after READY=1: %d %s", resp.StatusCode, b)
		}

		// The status line describes the queue: with the sweep held back, an
		// acked event is pending in the next status after a ping.
		if r := srv.postEvent(eventBody("EvNotify", message("C1", "1700000000.000100", "hi"))); r.Status != http.StatusOK {
			t.Fatalf("event: %d %s", r.Status, r.Body)
		}
		var seen []string
		pinged, pendingShown := false, false
		deadline := time.Now().Add(10 * time.Second)
		for !pinged || !pendingShown {
			if time.Now().After(deadline) {
				t.Fatalf("within 10s: watchdog ping %v, status pending=1 parked=0 %v; got %q", pinged, pendingShown, seen)
			}
			d := ns.next()
			seen = append(seen, d)
			switch m := notifyStatusLine.FindStringSubmatch(d); {
			case d == "WATCHDOG=1":
				pinged = true
			case m != nil:
				if m[1] == "1" && m[2] == "0" {
					pendingShown = true
				}
			default:
				t.Fatalf("unexpected datagram %q while running (so far: %q)", d, seen)
			}
		}

		if err := srv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := srv.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		// STOPPING=1 is sent first thing in Close; a ping already under way
		// may land on either side of it, but neither a second STOPPING=1
		// (the second Close is a no-op) nor anything else.
		notifyOnly(t, "before STOPPING=1", ns.until("STOPPING=1"))
		notifyOnly(t, "after STOPPING=1", ns.flush())
	})

	t.Run("no watchdog ping while another process holds the write lock, pings resume after", func(t *testing.T) {
		sqlite3, err := exec.LookPath("sqlite3")
		if err != nil {
			t.Skip("sqlite3 CLI not installed")
		}
		ns := notifyListen(t, watchdog)
		srv := startServer(t, configFor(t, metricsQuietSweep), daemon.Options{Notifier: daemon.NewNotifier()})
		if d := ns.next(); d != "READY=1" {
			t.Fatalf("first datagram = %q, want READY=1", d)
		}
		ns.until("WATCHDOG=1") // pings flow while the database is writable

		// An operator's sqlite3 session takes the write lock and keeps it.
		cmd := exec.Command(sqlite3, "-batch", "-bail", srv.DB)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := false
		t.Cleanup(func() {
			if !exited {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		out := bufio.NewScanner(stdout)
		say := func(sql, ack string) {
			t.Helper()
			if _, err := fmt.Fprintf(stdin, "%s\nSELECT '%s';\n", sql, ack); err != nil {
				t.Fatalf("sqlite3: %v", err)
			}
			if !out.Scan() || out.Text() != ack {
				t.Fatalf("sqlite3 answered %q (%v), want %q", out.Text(), out.Err(), ack)
			}
		}
		say(".timeout 5000\nBEGIN IMMEDIATE;", "locked")

		// A tick that began after the lock was taken has failed; any ping
		// sent before it is on the socket already and is flushed away.
		base := notifyNotPinging(srv)
		waitFor(t, "a watchdog tick to fail on the lock (a tick that pings anyway never logs)", 10*time.Second, func() bool {
			return notifyNotPinging(srv) > base
		})
		ns.flush()
		// Three more ticks, all failing, and not one ping among them.
		mark := notifyNotPinging(srv)
		waitFor(t, "three more watchdog ticks to fail", 10*time.Second, func() bool {
			return notifyNotPinging(srv) >= mark+3
		})
		// Only STATUS lines saying why may arrive: never a ping.
		during := ns.flush()
		for _, m := range during {
			if !strings.HasPrefix(m, "STATUS=unhealthy: database not writable") {
				t.Errorf("while the write lock was held elsewhere the server sent %q, want only unhealthy STATUS lines", during)
				break
			}
		}
		if len(during) == 0 {
			t.Error("no STATUS line told systemd why the service is unhealthy")
		}
		if line := srv.Logs.Find("msg", "not pinging the systemd watchdog: unhealthy"); line == nil || line["db_err"] == nil || fmt.Sprint(line["sweep_healthy"]) != "true" {
			t.Errorf("the unhealthy log does not name the database as the reason: %v", line)
		}

		say("COMMIT;", "released")
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("sqlite3: %v", err)
		}
		exited = true
		notifyOnly(t, "after the lock was released", ns.until("WATCHDOG=1"))
	})
}

// Issue 29.2: a start that migrates the database tells systemd it is
// still starting (EXTEND_TIMEOUT_USEC, and which migration in STATUS=)
// once a migration has run MigrateNotifyAfter, before READY=1, so that
// TimeoutStartSec= does not kill a long migration. Here every migration is
// reported at once (a negative MigrateNotifyAfter): the database is at
// schema 9, so migration 10 is.
func TestServerExtendsTheStartWhileMigrating(t *testing.T) {
	ns := notifyListen(t, 0)
	cfg := configFor(t, metricsQuietSweep)
	full := readSchema(t)
	ms, err := store.Migrations(full)
	if err != nil {
		t.Fatal(err)
	}
	last := ms[len(ms)-1]
	before := full[:strings.Index(full, fmt.Sprintf("\n-- migrate: %d\n", last.Version))+1]
	s, err := sqlite.Open(context.Background(), cfg.DB, store.Options{Schema: before})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	startServer(t, cfg, daemon.Options{Notifier: daemon.NewNotifier(), MigrateNotifyAfter: -1})
	got := ns.until("READY=1")
	want := fmt.Sprintf("EXTEND_TIMEOUT_USEC=30000000\nSTATUS=migrating the database schema to version %d: %s", last.Version, last.Summary())
	if len(got) != 1 || got[0] != want {
		t.Fatalf("before READY=1: %q; want %q", got, want)
	}
}

// A migration still running is reported again every third of the
// extension, and nothing is sent once it has ended.
func TestMigrationNotifierRenews(t *testing.T) {
	ns := notifyListen(t, 0)
	ignore := goleak.IgnoreCurrent()
	m := daemon.NewMigrationNotifier(daemon.NewNotifier(), 5*time.Millisecond, 30*time.Millisecond)
	m(store.MigrationStep{Version: 7, Summary: "a slow one."})
	want := "EXTEND_TIMEOUT_USEC=30000\nSTATUS=migrating the database schema to version 7: a slow one."
	for range 3 {
		if d := ns.next(); d != want {
			t.Fatalf("datagram %q, want %q", d, want)
		}
	}
	m(store.MigrationStep{Version: 7, Done: true})
	// The end waits for the reporter: nothing is left that could send.
	if err := goleak.Find(ignore); err != nil {
		t.Fatalf("after the migration ended: %v", err)
	}
}
