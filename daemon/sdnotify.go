package daemon

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Notifier reports service state to systemd with the sd_notify protocol: one
// datagram of newline-separated VAR=value assignments sent to the unix socket
// named by $NOTIFY_SOCKET (see sd_notify(3)). It is written by hand so that
// ackd needs no systemd library.
//
// Outside systemd (NOTIFY_SOCKET unset) every method sends nothing and returns
// nil; so do a nil *Notifier and the zero Notifier, so callers never check.
// A Notifier is immutable after NewNotifier and safe for concurrent use: each
// Notify dials, writes one datagram and closes.
type Notifier struct {
	addr *net.UnixAddr // nil: nothing is sent
	err  error         // NOTIFY_SOCKET is set but unusable; returned by Notify

	watchdog time.Duration // from WATCHDOG_USEC; 0 when not for this process
}

// NewNotifier reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from the
// environment. NOTIFY_SOCKET may be a file system path ("/run/systemd/notify")
// or an abstract socket name ("@…"; Go's net package maps the leading '@' to
// the NUL byte of the abstract namespace).
func NewNotifier() *Notifier {
	n := &Notifier{}
	switch sock := os.Getenv("NOTIFY_SOCKET"); {
	case sock == "":
		return n // not started by systemd with Type=notify
	case strings.HasPrefix(sock, "/"), strings.HasPrefix(sock, "@"):
		n.addr = &net.UnixAddr{Name: sock, Net: "unixgram"}
	default:
		// systemd 253+ may also pass "vsock:…" addresses, for VMs; ackd does not speak them.
		n.err = fmt.Errorf("sd_notify: unsupported NOTIFY_SOCKET %q", sock)
	}
	n.watchdog, _ = parseWatchdog(os.Getenv("WATCHDOG_USEC"), os.Getenv("WATCHDOG_PID"), os.Getpid())
	return n
}

// Enabled reports whether NOTIFY_SOCKET was set: Notify then sends, or
// returns why it cannot.
func (n *Notifier) Enabled() bool {
	return n != nil && (n.addr != nil || n.err != nil)
}

// Notify sends state, one or more newline-separated VAR=value assignments, as
// a single datagram. It returns nil without sending when n is not enabled.
func (n *Notifier) Notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	if n.err != nil {
		return n.err
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	_, werr := conn.Write([]byte(state))
	cerr := conn.Close()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// Ready tells systemd that start-up is complete (READY=1): with Type=notify,
// units ordered after ackd start only now.
func (n *Notifier) Ready() error { return n.Notify("READY=1") }

// Stopping tells systemd that graceful shutdown has begun (STOPPING=1).
func (n *Notifier) Stopping() error { return n.Notify("STOPPING=1") }

// Watchdog pets the service watchdog (WATCHDOG=1). Send it every
// WatchdogInterval()/2, from the loop whose liveness it vouches for.
func (n *Notifier) Watchdog() error { return n.Notify("WATCHDOG=1") }

// Status sets the one-line status shown by `systemctl status` (STATUS=…).
// Newlines in s would start new assignments, so they become spaces.
func (n *Notifier) Status(s string) error {
	return n.Notify("STATUS=" + strings.ReplaceAll(s, "\n", " "))
}

// WatchdogInterval returns WatchdogSec= as passed in WATCHDOG_USEC, and false
// when no watchdog is expected from this process: WATCHDOG_USEC unset, zero or
// malformed, WATCHDOG_PID set to another process, or no NOTIFY_SOCKET to send
// the pings to. Like sd_watchdog_enabled(3), it returns the full timeout; ping
// at half of it.
func (n *Notifier) WatchdogInterval() (time.Duration, bool) {
	if n == nil || n.addr == nil || n.watchdog <= 0 {
		return 0, false
	}
	return n.watchdog, true
}

// parseWatchdog interprets WATCHDOG_USEC and WATCHDOG_PID for process self.
func parseWatchdog(usec, pid string, self int) (time.Duration, bool) {
	if usec == "" {
		return 0, false
	}
	us, err := strconv.ParseUint(usec, 10, 64)
	if err != nil || us == 0 || us > math.MaxInt64/uint64(time.Microsecond) { // must fit a Duration
		return 0, false
	}
	if pid != "" {
		p, err := strconv.Atoi(pid)
		if err != nil || p != self {
			return 0, false // meant for another process (e.g. our parent)
		}
	}
	return time.Duration(us) * time.Microsecond, true
}
