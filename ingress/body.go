package ingress

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
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

// bodyBudget bounds the bytes of request bodies held at once (from the first
// byte's arrival until the answer is written). A body is charged only for
// what has arrived: its buffer grows with the bytes read (at most doubling,
// never past the declared Content-Length or the limit), and the budget is
// charged for each growth before it is made. A declared length reserves
// nothing, so a connection that declares 64 KiB and sends one byte holds one
// byte, however long it stalls. Each body being read also uses one pooled
// readChunk buffer that is not charged, like net/http's own per-connection
// buffers.
//
// The budget has two halves so that a flood of large bodies cannot starve
// Slack's small ones: a body whose declared Content-Length is at most
// SmallBody takes from the small half, falling back to the large half; a
// larger body takes from the large half only; a body of unknown length
// counts as small until it passes SmallBody. When neither has room the
// request is refused at once (503 with Retry-After) rather than queued: a
// queue would only move the unbounded part elsewhere.
type bodyBudget struct {
	total        int64
	small, large *semaphore.Weighted
	held         atomic.Int64 // bytes charged now (ackd_request_body_bytes_held)
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

// readChunk is the size of each read of a body.
const readChunk = 4 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// bodyCharge is what one body holds of the budget.
type bodyCharge struct {
	b        *bodyBudget
	declared int64 // -1 when unknown
	total    int64
	held     []heldBytes
}

type heldBytes struct {
	sem *semaphore.Weighted
	n   int64
}

// take charges n more bytes, from the half the body's size class allows.
func (c *bodyCharge) take(n int64) bool {
	small := c.declared >= 0 && c.declared <= SmallBody || c.declared < 0 && c.total+n <= SmallBody
	for _, sem := range []*semaphore.Weighted{c.b.small, c.b.large} {
		if sem == c.b.small && !small {
			continue
		}
		if sem.TryAcquire(n) {
			c.b.held.Add(n)
			c.total += n
			c.held = append(c.held, heldBytes{sem, n})
			return true
		}
	}
	return false
}

// release returns everything the body holds.
func (c *bodyCharge) release() {
	for _, h := range c.held {
		c.b.held.Add(-h.n)
		h.sem.Release(h.n)
	}
	c.held, c.total = nil, 0
}

// Why a charged read stopped early.
var (
	errBodyTooLarge = errors.New("body over the limit")
	errBudgetFull   = errors.New("body budget full")
)

// read reads r to its end, at most limit bytes, into a buffer that grows
// only as bytes arrive, each growth charged first.
func (c *bodyCharge) read(r io.Reader, limit int64) ([]byte, error) {
	bound := limit
	if c.declared >= 0 {
		bound = min(c.declared, limit)
	}
	chunk := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(chunk)
	body := []byte{}
	for {
		var n int
		var err error
		if len(body) < cap(body) {
			// Room already charged: read straight into it.
			n, err = r.Read(body[len(body):cap(body)])
			body = body[:len(body)+n]
		} else {
			n, err = r.Read(*chunk)
			if n > 0 {
				have := int64(len(body))
				if have+int64(n) > bound {
					return body, errBodyTooLarge
				}
				grown := min(max(have+int64(n), 2*have), bound)
				if !c.take(grown - int64(cap(body))) {
					return body, errBudgetFull
				}
				next := make([]byte, len(body), grown)
				copy(next, body)
				body = append(next, (*chunk)[:n]...)
			}
		}
		if errors.Is(err, io.EOF) {
			return body, nil
		}
		if err != nil {
			return body, err
		}
	}
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
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64, start time.Time) ([]byte, func(), *answer) {
	declared := r.ContentLength
	tooLarge := answer{status: http.StatusRequestEntityTooLarge, outcome: outcomeRejected,
		reason: "body over " + strconv.FormatInt(limit, 10) + " bytes"}
	if declared > limit {
		a := s.refuse(w, tooLarge)
		return nil, nil, &a
	}
	c := &bodyCharge{b: s.bodies, declared: declared}
	rc := http.NewResponseController(w)
	// Replaces the server's ReadTimeout for this body; cleared after the
	// read so that the connection's background read (which watches for the
	// client going away) cannot time out and cancel the intent.
	_ = rc.SetReadDeadline(start.Add(s.bodyTimeout()))
	body, err := c.read(r.Body, limit)
	_ = rc.SetReadDeadline(time.Time{})
	if err == nil {
		return body, c.release, nil
	}
	c.release()
	var a answer
	switch {
	case errors.Is(err, errBodyTooLarge):
		a = tooLarge
	case errors.Is(err, errBudgetFull):
		w.Header().Set("Retry-After", "1")
		a = answer{status: http.StatusServiceUnavailable, outcome: outcomeRejected,
			reason: fmt.Sprintf("request bodies being read already hold the %d-byte budget", s.bodies.total)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		a = answer{status: http.StatusRequestTimeout, outcome: outcomeRejected,
			reason: "body not received within " + s.bodyTimeout().String()}
	default:
		a = answer{status: http.StatusBadRequest, outcome: outcomeRejected, reason: "body read: " + err.Error()}
	}
	a = s.refuse(w, a)
	return nil, nil, &a
}

// MaxBody caps a Slack request body. Slack's payloads are a few KiB.
const MaxBody = 1 << 20
