// Package slackrate paces ackd's calls to Slack's rate-limited read methods
// (conversations.history, conversations.replies) within one process: one
// budget of calls per minute shared by every caller that holds the same
// *Budget (catch-up and the post-confirmation lookup share one), and a
// per-method hold after a 429, because Slack's Retry-After applies to the
// method: no call to that method goes out, for any channel, before it has
// passed.
//
// Limits: it paces one process. A hand-run command beside a daemon has a
// budget of its own; Slack's 429 and its Retry-After are the backstop.
package slackrate

import (
	"context"
	"sync"
	"time"
)

// Budget is a shared pace: at most PerMinute calls a minute (evenly spaced,
// no burst), and no call to a held method before its hold ends. Safe for
// concurrent use.
type Budget struct {
	interval time.Duration

	mu    sync.Mutex
	next  time.Time            // the earliest start of the next call, any method
	holds map[string]time.Time // method → no call before this
	// OnWait, when set, is told of every wait longer than zero and why
	// ("pace" or "retry_after"), for metrics and progress lines.
	OnWait func(method string, d time.Duration, reason string)
}

// New returns a budget of perMinute calls a minute (at least 1).
func New(perMinute int) *Budget {
	perMinute = max(perMinute, 1)
	return &Budget{interval: time.Minute / time.Duration(perMinute), holds: map[string]time.Time{}}
}

// Wait blocks until a call to method may start, and takes that call's slot.
// It returns ctx's error if ctx ends first (the slot is then not taken).
func (b *Budget) Wait(ctx context.Context, method string) error {
	for {
		b.mu.Lock()
		now := time.Now()
		start, reason := b.next, "pace"
		if h := b.holds[method]; h.After(start) {
			start, reason = h, "retry_after"
		}
		if !start.After(now) {
			b.next = now.Add(b.interval)
			b.mu.Unlock()
			return nil
		}
		d := start.Sub(now)
		onWait := b.OnWait
		b.mu.Unlock()
		if onWait != nil {
			onWait(method, d, reason)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		// Loop: another caller may have taken the slot, or a 429 may
		// have set a hold meanwhile.
	}
}

// Hold records a 429's Retry-After for method: no call to it starts before
// d from now. A shorter hold never shortens a longer one.
func (b *Budget) Hold(method string, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	until := time.Now().Add(d)
	if until.After(b.holds[method]) {
		b.holds[method] = until
	}
}

// HeldUntil reports when method's hold ends (zero time: not held).
func (b *Budget) HeldUntil(method string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.holds[method]
	if !h.After(time.Now()) {
		return time.Time{}
	}
	return h
}

// Ready reports when a call to method could start if nobody else took a
// slot first: the later of the pace's next slot and method's hold (a time
// not after now: at once).
func (b *Budget) Ready(method string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.holds[method]; h.After(b.next) {
		return h
	}
	return b.next
}
