//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing off Linux: keepalives alone bound a silent
// peer there.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }
