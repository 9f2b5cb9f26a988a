package daemon

import (
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listenNotify opens a unixgram socket standing in for systemd's notify socket.
func listenNotify(tb testing.TB, name string) *net.UnixConn {
	tb.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		tb.Fatalf("listen %s: %v", name, err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// mustReceive reads the next datagram, failing after a generous deadline
// rather than hanging the test run.
func mustReceive(tb testing.TB, conn *net.UnixConn) string {
	tb.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		tb.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _, err := conn.ReadFromUnix(buf)
	if err != nil {
		tb.Fatalf("receive: %v", err)
	}
	return string(buf[:n])
}

// unsetenv removes key for the rest of the test and restores it afterwards.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // registers the restore
	os.Unsetenv(key)
}

func TestNotifierSendsStatesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		addr func(t *testing.T) string
	}{
		{"path socket", func(t *testing.T) string { return filepath.Join(t.TempDir(), "notify.sock") }},
		{"abstract socket", func(t *testing.T) string { return "@ackd-test-" + rand.Text() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := tc.addr(t)
			conn := listenNotify(t, addr)
			t.Setenv("NOTIFY_SOCKET", addr)

			n := NewNotifier()
			if !n.Enabled() {
				t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
			}
			steps := []struct {
				send func() error
				want string
			}{
				{n.Ready, "READY=1"},
				{n.Watchdog, "WATCHDOG=1"},
				{func() error { return n.Status("sweeping\n3 due") }, "STATUS=sweeping 3 due"},
				{n.Stopping, "STOPPING=1"},
			}
			for _, s := range steps {
				if err := s.send(); err != nil {
					t.Fatalf("send %q: %v", s.want, err)
				}
			}
			for i, s := range steps {
				if got := mustReceive(t, conn); got != s.want {
					t.Errorf("datagram %d = %q, want %q", i, got, s.want)
				}
			}
		})
	}
}

func TestNotifierWithoutSocketSendsNothing(t *testing.T) {
	// A socket exists but NOTIFY_SOCKET does not name it. After the calls, a
	// sentinel is sent directly: if it is the first datagram to arrive, the
	// notifier sent nothing (unix datagrams are queued when sendmsg returns).
	addr := filepath.Join(t.TempDir(), "notify.sock")
	conn := listenNotify(t, addr)
	unsetenv(t, "NOTIFY_SOCKET")
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	for name, n := range map[string]*Notifier{
		"NewNotifier": NewNotifier(),
		"nil":         nil,
		"zero value":  {},
	} {
		if n.Enabled() {
			t.Errorf("%s: Enabled() = true", name)
		}
		for _, err := range []error{n.Ready(), n.Watchdog(), n.Status("x"), n.Stopping(), n.Notify("READY=1")} {
			if err != nil {
				t.Errorf("%s: got error %v, want nil", name, err)
			}
		}
		if d, ok := n.WatchdogInterval(); ok {
			t.Errorf("%s: WatchdogInterval() = %v, true; want false without a socket to ping", name, d)
		}
	}

	sender, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	if _, err := sender.Write([]byte("sentinel")); err != nil {
		t.Fatal(err)
	}
	if got := mustReceive(t, conn); got != "sentinel" {
		t.Errorf("first datagram = %q, want the sentinel", got)
	}
}

func TestNotifierReportsUnusableSocket(t *testing.T) {
	t.Run("missing socket file", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "absent.sock"))
		if err := NewNotifier().Ready(); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Ready() = %v, want an error wrapping ENOENT", err)
		}
	})
	t.Run("unsupported address", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
		n := NewNotifier()
		if !n.Enabled() {
			t.Error("Enabled() = false, want true (set but unusable)")
		}
		if err := n.Ready(); err == nil {
			t.Error("Ready() = nil, want an error")
		}
	})
}

func TestNotifierWatchdogInterval(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "notify.sock")
	listenNotify(t, addr)
	t.Setenv("NOTIFY_SOCKET", addr)
	t.Setenv("WATCHDOG_USEC", "30000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	if d, ok := NewNotifier().WatchdogInterval(); !ok || d != 30*time.Second {
		t.Errorf("WatchdogInterval() = %v, %v; want 30s, true", d, ok)
	}

	unsetenv(t, "WATCHDOG_USEC")
	if d, ok := NewNotifier().WatchdogInterval(); ok {
		t.Errorf("without WATCHDOG_USEC: WatchdogInterval() = %v, true; want false", d)
	}
}

func TestNotifierParseWatchdog(t *testing.T) {
	const self = 4242
	for _, tc := range []struct {
		name      string
		usec, pid string
		want      time.Duration
		wantOK    bool
	}{
		{"unset", "", "", 0, false},
		{"30s, no pid", "30000000", "", 30 * time.Second, true},
		{"30s for this pid", "30000000", "4242", 30 * time.Second, true},
		{"for another pid", "30000000", "1", 0, false},
		{"malformed pid", "30000000", "self", 0, false},
		{"zero", "0", "", 0, false},
		{"negative", "-5", "", 0, false},
		{"not a number", "30s", "", 0, false},
		{"sub-millisecond", "500", "", 500 * time.Microsecond, true},
		{"largest Duration", "9223372036854775", "", 9223372036854775 * time.Microsecond, true},
		{"overflows Duration", "9223372036854776", "", 0, false},
		{"overflows uint64", "18446744073709551616", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseWatchdog(tc.usec, tc.pid, self)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("parseWatchdog(%q, %q) = %v, %v; want %v, %v", tc.usec, tc.pid, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
