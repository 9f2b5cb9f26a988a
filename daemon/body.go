package daemon

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// Limits on reading Slack request bodies. Only requests that carry Slack's
// signature headers with a fresh timestamp are read at all (checked before
// the body); these bound what such requests — or anyone who copies the
// header shape, since the signature itself can only be checked over the
// whole body — can make ackd hold.
const (
	// DefaultBodyBudget is the default for Options.BodyBudget.
	DefaultBodyBudget = 16 << 20
	// SmallBody is the largest declared Content-Length read from the small
	// bodies' half of the budget. Slack's payloads are a few KiB; a message
	// with rich blocks rarely passes 40 KiB.
	SmallBody = 64 << 10
	// sslCheckMax caps the unsigned body read for Slack's ssl_check, which is
	// "ssl_check=1&token=…", well under 100 bytes.
	sslCheckMax = 4 << 10
)

// bodyBudget bounds the bytes of request bodies held at once (from the start
// of the read until the answer is written). It has two halves so that a
// flood of large bodies cannot starve Slack's small ones: a body whose
// declared Content-Length is at most SmallBody takes from the small half,
// falling back to the large half; a larger body takes from the large half
// only (a body of unknown length counts as small until it passes SmallBody,
// see readBody). When neither has room the request is refused at once (503
// with Retry-After) rather than queued: a queue would only move the
// unbounded part elsewhere.
type bodyBudget struct {
	total        int64
	small, large *semaphore.Weighted
	held         atomic.Int64 // bytes reserved now (ackd_request_body_bytes_held)
}

func newBodyBudget(total int64) *bodyBudget {
	if total <= 0 {
		total = DefaultBodyBudget
	}
	// The large half must fit one MaxBody body, or large bodies could never
	// be read.
	large := max(total/2, MaxBody)
	return &bodyBudget{total: total, small: semaphore.NewWeighted(max(total-large, SmallBody)), large: semaphore.NewWeighted(large)}
}

// acquire reserves n bytes for a body of declared length declared (-1 when
// unknown). It returns the release function, or false when there is no room.
func (b *bodyBudget) acquire(n, declared int64) (release func(), ok bool) {
	for _, sem := range []*semaphore.Weighted{b.small, b.large} {
		if sem == b.small && (declared < 0 || declared > SmallBody) {
			continue
		}
		if sem.TryAcquire(n) {
			b.held.Add(n)
			return func() { b.held.Add(-n); sem.Release(n) }, true
		}
	}
	return nil, false
}

// bodyTimeout is how long a request's body may take to arrive once its
// headers are read: half the ack budget, so that a body dribbled in slowly
// still leaves the intent its time, and a stalled one is cut off well before
// Slack gives up on the answer (3 s).
func (s *Server) bodyTimeout() time.Duration { return s.cfg.Ack.Budget.Duration / 2 }

// refuse marks an answer given without reading the body: the connection is
// closed after it, and whatever the client still sends has at most the body
// timeout to arrive. The server reads (and discards, keeping nothing) up to
// 256 KiB of an unread body after the answer, so that a client that sent it
// all reads the answer instead of a connection reset; a larger rest is not
// read at all, and a stalled client is cut off at the deadline instead of
// holding the connection until ReadTimeout.
func (s *Server) refuse(w http.ResponseWriter, a answer) answer {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout()))
	return a
}

// readBody reads r's body, of at most limit bytes, under the body budget and
// the body deadline. It returns the body and the function that returns its
// bytes to the budget (call it once the answer is written), or the answer
// refusing the request.
//
// A body of declared length is charged exactly that and read into a buffer
// of that size: no growth, no slack. A body of unknown length (chunked, as
// some proxies send) is charged as a small one until it proves longer, then
// the rest of the limit is taken from the large half.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64, start time.Time) ([]byte, func(), *answer) {
	declared := r.ContentLength
	if declared > limit {
		a := s.refuse(w, answer{status: http.StatusRequestEntityTooLarge, outcome: outcomeRejected,
			reason: "body over " + strconv.FormatInt(limit, 10) + " bytes"})
		return nil, nil, &a
	}
	var held []func()
	release := func() {
		for _, f := range held {
			f()
		}
	}
	take := func(n, class int64) bool {
		f, ok := s.bodies.acquire(n, class)
		if ok {
			held = append(held, f)
		}
		return ok
	}
	full := func() *answer {
		release()
		w.Header().Set("Retry-After", "1")
		a := s.refuse(w, answer{status: http.StatusServiceUnavailable, outcome: outcomeRejected,
			reason: fmt.Sprintf("request bodies being read already hold the %d-byte budget", s.bodies.total)})
		return &a
	}

	first := declared
	if declared < 0 {
		first = min(limit, SmallBody)
	}
	if !take(first, first) {
		return nil, nil, full()
	}
	rc := http.NewResponseController(w)
	// Replaces the server's ReadTimeout for this body; cleared after the
	// read so that the connection's background read (which watches for the
	// client going away) cannot time out and cancel the intent.
	_ = rc.SetReadDeadline(start.Add(s.bodyTimeout()))
	// One byte over the charge shows that a body of unknown length is longer.
	body, err := readInto(r.Body, make([]byte, 0, first+1))
	if err == nil && declared < 0 && int64(len(body)) > first && first < limit {
		if !take(limit-first, -1) {
			return nil, nil, full()
		}
		more := make([]byte, len(body), limit+1)
		copy(more, body)
		body, err = readInto(r.Body, more)
	}
	_ = rc.SetReadDeadline(time.Time{})
	if err == nil && int64(len(body)) <= limit {
		return body, release, nil
	}
	release()
	var a answer
	switch {
	case err == nil:
		a = answer{status: http.StatusRequestEntityTooLarge, outcome: outcomeRejected,
			reason: "body over " + strconv.FormatInt(limit, 10) + " bytes"}
	case errors.Is(err, os.ErrDeadlineExceeded):
		a = answer{status: http.StatusRequestTimeout, outcome: outcomeRejected,
			reason: "body not received within " + s.bodyTimeout().String()}
	default:
		a = answer{status: http.StatusBadRequest, outcome: outcomeRejected, reason: "body read: " + err.Error()}
	}
	a = s.refuse(w, a)
	return nil, nil, &a
}

// readInto reads from r into buf's free capacity until it is full or r ends.
func readInto(r io.Reader, buf []byte) ([]byte, error) {
	for len(buf) < cap(buf) {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}
