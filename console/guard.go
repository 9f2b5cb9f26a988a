package console

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The console resists guessing (DESIGN §12). A client address that has
// given a wrong password freeFailures times is answered 429 with
// Retry-After, without its password being looked at, until a delay that
// doubles with each further failure (from 1 s up to maxDelay) has passed;
// a right password after the delay clears its record. Other addresses are
// not slowed: the operator, from another address, gets in at once. An
// address's record is forgotten after forgetAfter without a failure.
//
// The address is the peer's IP (an IPv6 one by its /64, which one host
// holds). Behind a proxy on loopback (Caddy, an SSH tunnel) every peer is
// 127.0.0.1: there the last X-Forwarded-For entry, which the proxy writes,
// names the client; a direct client on another address cannot choose its
// key that way.
//
// Failed logins are logged at warn with the address, at most one line per
// address per logEvery and one line per second in all; the lines left out
// are counted in the next one (suppressed), so a flood of guesses grows
// the log by a summary, not a line per guess.
const (
	freeFailures = 5
	maxDelay     = 5 * time.Minute
	forgetAfter  = 15 * time.Minute
	logEvery     = time.Minute
	maxTracked   = 10000
)

type guard struct {
	mu         sync.Mutex
	by         map[string]*strikes
	lastLog    time.Time
	suppressed int
}

type strikes struct {
	failures int
	last     time.Time // the last failure
	until    time.Time // refused before this
	logged   time.Time // this address's last log line
}

// clientKey is the address a request's failures are counted under.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		if f := r.Header.Values("X-Forwarded-For"); len(f) > 0 {
			parts := strings.Split(f[len(f)-1], ",")
			if fwd := net.ParseIP(strings.TrimSpace(parts[len(parts)-1])); fwd != nil {
				ip = fwd
			}
		}
	}
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// refused is how long key must still wait (0: its password is checked).
func (g *guard) refused(key string, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.by[key]
	if s == nil || !now.Before(s.until) {
		return 0
	}
	return s.until.Sub(now)
}

// failed counts a wrong password from key and says whether to log it, and
// how many lines were left out before it.
func (g *guard) failed(key string, now time.Time) (failures int, log bool, suppressed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.by[key]
	if s != nil && now.Sub(s.last) > forgetAfter {
		s = nil
	}
	if s == nil {
		if len(g.by) >= maxTracked {
			g.forget(now)
		}
		s = &strikes{}
		g.by[key] = s
	}
	s.failures++
	s.last = now
	if over := s.failures - freeFailures; over >= 0 {
		d := maxDelay
		if over < 20 {
			d = min(time.Second<<over, maxDelay)
		}
		s.until = now.Add(d)
	}
	log, suppressed = g.logNow(s, now)
	return s.failures, log, suppressed
}

// logNow decides whether a line about s is written now, and if so how many
// lines were left out before it (counted out otherwise). Called with g.mu
// held.
func (g *guard) logNow(s *strikes, now time.Time) (bool, int) {
	if (!s.logged.IsZero() && now.Sub(s.logged) < logEvery) || now.Sub(g.lastLog) < time.Second {
		g.suppressed++
		return false, 0
	}
	s.logged, g.lastLog = now, now
	n := g.suppressed
	g.suppressed = 0
	return true, n
}

// refusedLog says whether a 429 for key is logged now, and how many lines
// were left out before it.
func (g *guard) refusedLog(key string, now time.Time) (bool, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.by[key]
	if s == nil {
		return false, 0
	}
	return g.logNow(s, now)
}

// succeeded clears key's record: the right password, after any delay.
func (g *guard) succeeded(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.by, key)
}

// forget drops the records older than forgetAfter, or, when none is, one
// record (the map stays bounded whatever the number of addresses). Called
// with g.mu held.
func (g *guard) forget(now time.Time) {
	for k, s := range g.by {
		if now.Sub(s.last) > forgetAfter {
			delete(g.by, k)
		}
	}
	if len(g.by) >= maxTracked {
		for k := range g.by {
			delete(g.by, k)
			break
		}
	}
}

// retryAfter is a Retry-After value: whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}
