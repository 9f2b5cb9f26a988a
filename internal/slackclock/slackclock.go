// Package slackclock estimates Slack's clock from the Date header of its
// answers, so that bounds on Slack's data (a message's ts is stamped by
// Slack's clock) can be taken on Slack's clock rather than this host's.
//
// An answer whose Date header says D, to a request sent at local time s and
// answered at local time r, tells that Slack's clock read between D and
// D+1s (the header has whole seconds) at some instant between s and r. So
// Slack's clock minus this host's lies in [D−r, D+1s−s]: Offset returns
// those bounds, from the latest answer (a clock that steps is followed at
// the next answer). Lower and Upper turn a local time into the earliest and
// latest time Slack's clock could read then.
//
// Limits: the bounds are as wide as a round trip plus a second; clock drift
// between two answers is not modelled. Without any answer carrying a Date
// header, nothing is known (Known is false) and callers fall back to this
// host's clock.
package slackclock

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// Clock is what the latest answer from Slack said of its clock. The zero
// value knows nothing and compares with time.Now; safe for concurrent use.
type Clock struct {
	// Local is the clock Slack's is compared with (the store's, so that
	// bounds translate the times it stamps); nil means time.Now.
	Local func() time.Time

	mu     sync.Mutex
	known  bool
	lo, hi time.Duration // Slack's clock minus Local's
}

// New returns a Clock compared with local (nil: time.Now).
func New(local func() time.Time) *Clock { return &Clock{Local: local} }

// LocalNow reads the clock Slack's is compared with.
func (c *Clock) LocalNow() time.Time { return c.now() }

func (c *Clock) now() time.Time {
	if c.Local != nil {
		return c.Local()
	}
	return time.Now()
}

// Observe notes an answer: date is its Date header, sent and received the
// local times just before the request went out and just after the answer
// came. An empty or unreadable date is ignored.
func (c *Clock) Observe(date string, sent, received time.Time) {
	if c == nil || date == "" {
		return
	}
	d, err := http.ParseTime(date)
	if err != nil {
		return
	}
	c.mu.Lock()
	c.known, c.lo, c.hi = true, d.Sub(received), d.Add(time.Second).Sub(sent)
	c.mu.Unlock()
}

// Offset returns the bounds of Slack's clock minus this host's (Local), and
// whether any answer told them.
func (c *Clock) Offset() (lo, hi time.Duration, known bool) {
	if c == nil {
		return 0, 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lo, c.hi, c.known
}

// Lower is the earliest time Slack's clock could read when Local read t
// (t itself when nothing is known).
func (c *Clock) Lower(t time.Time) time.Time {
	lo, _, _ := c.Offset()
	return t.Add(lo)
}

// Upper is the latest time Slack's clock could read when Local read t (t
// itself when nothing is known).
func (c *Clock) Upper(t time.Time) time.Time {
	_, hi, _ := c.Offset()
	return t.Add(hi)
}

// Now returns the bounds of Slack's clock now.
func (c *Clock) Now() (lo, hi time.Time) {
	t := c.now()
	return c.Lower(t), c.Upper(t)
}

// Transport wraps next (nil: http.DefaultTransport) so that every answer to
// a request under base (the Web API's URL) is observed. Other hosts' answers
// (a team's forward handler) say nothing of Slack's clock and are ignored.
func (c *Clock) Transport(next http.RoundTripper, base string) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &observer{c: c, next: next, base: base}
}

type observer struct {
	c    *Clock
	next http.RoundTripper
	base string
}

func (o *observer) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := o.c.now()
	resp, err := o.next.RoundTrip(req)
	if err == nil && strings.HasPrefix(req.URL.String(), o.base) {
		o.c.Observe(resp.Header.Get("Date"), sent, o.c.now())
	}
	return resp, err
}
