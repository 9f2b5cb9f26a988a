package e2e

import (
	"crypto/hmac"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Outcomes of one request to the forward handler.
const (
	hitOK        = "ok"        // answered 200 to a connected client: the work is done
	hitRejected  = "rejected"  // answered 400: the permanent-failure keys
	hitError     = "error"     // answered 503
	hitAbandoned = "abandoned" // the client went away before the answer: nothing done
	hitBad       = "bad"       // unsigned, mis-signed or inconsistent request
)

// Forward handler behaviour, per request (keys outside the 400 subset).
const (
	pError        = 0.15                    // 503
	pPastRoute    = 0.07                    // answer after slowPastRoute
	pPastLease    = 0.03                    // answer after slowPastLease
	slowPastRoute = 1500 * time.Millisecond // > route timeout (1s), < lease (3s)
	slowPastLease = 3500 * time.Millisecond // > lease
)

// hit is one request the forward handler received.
type hit struct {
	Key     string
	Attempt int
	Outcome string
	Start   time.Time // request arrived
	End     time.Time // answered or abandoned
	Note    string
}

// forwardHandler is the team's flaky handler behind the forward route. It
// checks ackd's signature and records every request.
type forwardHandler struct {
	srv       *httptest.Server
	secret    string
	inflight  atomic.Int64
	slowUntil atomic.Int64 // unix ns: until then every answer is slower than the route timeout

	mu   sync.Mutex
	rng  *rand.Rand
	hits []hit
}

func newForwardHandler(t *testing.T, secret string, seed uint64) *forwardHandler {
	t.Helper()
	h := &forwardHandler{secret: secret, rng: rand.New(rand.NewPCG(seed, 0xf0d))}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve)) // 127.0.0.1
	t.Cleanup(h.srv.Close)
	return h
}

// slowSpell makes every answer for the next d slower than the route
// timeout, the way a team's handler stalls when its own database does.
func (h *forwardHandler) slowSpell(d time.Duration) {
	h.slowUntil.Store(time.Now().Add(d).UnixNano())
}

func (h *forwardHandler) URL() string { return h.srv.URL + "/ackd" }

func (h *forwardHandler) Hits() []hit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hit(nil), h.hits...)
}

func (h *forwardHandler) record(x hit) {
	x.End = time.Now()
	h.mu.Lock()
	h.hits = append(h.hits, x)
	h.mu.Unlock()
}

func (h *forwardHandler) serve(w http.ResponseWriter, r *http.Request) {
	h.inflight.Add(1)
	defer h.inflight.Add(-1)
	x := hit{Start: time.Now(), Key: r.Header.Get("Idempotency-Key")}
	x.Attempt, _ = strconv.Atoi(r.Header.Get("X-Ackd-Attempt"))
	body, err := io.ReadAll(r.Body)
	if err != nil {
		x.Outcome, x.Note = hitAbandoned, "body: "+err.Error()
		h.record(x)
		return
	}
	if note := h.check(r, body, x.Key); note != "" {
		x.Outcome, x.Note = hitBad, note
		h.record(x)
		http.Error(w, note, http.StatusUnauthorized)
		return
	}
	n, _ := eventNum(x.Key)
	if permanentEvent(n) {
		x.Outcome = hitRejected
		h.record(x)
		http.Error(w, "this request can never succeed", http.StatusBadRequest)
		return
	}

	h.mu.Lock()
	roll := h.rng.Float64()
	delay := time.Duration(h.rng.IntN(30)) * time.Millisecond
	h.mu.Unlock()
	status := http.StatusOK
	switch {
	case roll < pError:
		status = http.StatusServiceUnavailable
	case roll < pError+pPastRoute:
		delay = slowPastRoute
	case roll < pError+pPastRoute+pPastLease:
		delay = slowPastLease
	}
	if x.Start.UnixNano() < h.slowUntil.Load() {
		status, delay = http.StatusOK, slowPastRoute
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		x.Outcome, x.Note = hitAbandoned, "client left after "+time.Since(x.Start).Round(time.Millisecond).String()
		h.record(x)
		return
	}
	if status != http.StatusOK {
		x.Outcome = hitError
		h.record(x)
		http.Error(w, "try again", status)
		return
	}
	// The handler's work commits here, as it answers a connected client.
	x.Outcome = hitOK
	h.record(x)
	reply := map[string]any{"ok": true}
	if replyEvent(n) {
		reply = map[string]any{"text": "reply to " + x.Key}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(reply)
}

// check verifies the signature ackd puts on a forward and that the body's
// key is the header's; it returns what is wrong, or "".
func (h *forwardHandler) check(r *http.Request, body []byte, key string) string {
	ts := r.Header.Get("X-Ackd-Timestamp")
	want := slackSign(h.secret, ts, body) // same v0 scheme as Slack's
	if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Ackd-Signature"))) {
		return "bad X-Ackd-Signature"
	}
	var b struct {
		IdempotencyKey string          `json:"idempotency_key"`
		Attempt        int             `json:"attempt"`
		Envelope       json.RawMessage `json:"envelope"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return "body is not JSON: " + err.Error()
	}
	if key == "" || b.IdempotencyKey != key {
		return "idempotency_key " + strconv.Quote(b.IdempotencyKey) + " != header " + strconv.Quote(key)
	}
	if a, _ := strconv.Atoi(r.Header.Get("X-Ackd-Attempt")); a < 1 || a != b.Attempt {
		return "X-Ackd-Attempt " + strconv.Quote(r.Header.Get("X-Ackd-Attempt")) + " does not match body attempt " + strconv.Itoa(b.Attempt)
	}
	var env struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(b.Envelope, &env) != nil || env.EventID+":fwd" != key {
		return "envelope event_id " + strconv.Quote(env.EventID) + " does not match key"
	}
	return ""
}
