package postgres

import (
	"syscall"
	"time"
)

// tcpUserTimeoutOpt is Linux's TCP_USER_TIMEOUT (linux/tcp.h), which the
// syscall package does not name.
const tcpUserTimeoutOpt = 0x12

// setUserTimeout makes the socket give up when sent data stays
// unacknowledged for d.
func setUserTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeoutOpt, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
