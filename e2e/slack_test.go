package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Slack's delivery timing, compressed where Slack waits minutes.
const (
	slackDeadline = 3 * time.Second // no 2xx within this: the delivery failed
	retry2Delay   = time.Second     // Slack: about 1 minute
	retry3Delay   = 3 * time.Second // Slack: about 5 minutes
)

// event is one Events API event the player generated.
type event struct {
	N         int
	ID        string
	TS        string
	Body      []byte
	Permanent bool // the forward handler answers 400 to its key, always
	Reply     bool // the forward handler replies with text: a follow-up post
	Dup       bool // delivered twice at once

	mu         sync.Mutex
	acked      bool
	deliveries []delivery
}

// delivery is one HTTP attempt at delivering an event.
type delivery struct {
	Retry  int
	Status int    // 0 when no answer
	Err    string // transport error or timeout
	At     time.Time
}

func (e *event) Acked() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.acked
}

// Event ids carry their number so that the fakes can tell an event's class
// from an idempotency key alone.
const eventPrefix = "EvE2E"

func eventID(n int) string { return fmt.Sprintf("%s%07d", eventPrefix, n) }

// eventNum parses an event id, or the event id at the start of a key
// ("EvE2E0000042:fwd"); ok is false for anything else.
func eventNum(s string) (int, bool) {
	id, _, _ := strings.Cut(s, ":")
	rest, ok := strings.CutPrefix(id, eventPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// Fixed classes of events, by number: the same on every run and seed.
func permanentEvent(n int) bool { return n%13 == 5 }
func replyEvent(n int) bool     { return n%3 == 1 && !permanentEvent(n) }

// slackPlayer plays Slack's Events API at the daemon.
type slackPlayer struct {
	url    string
	urls   []string // when set: replicas behind a load balancer (see target)
	secret string
	client *http.Client

	wg sync.WaitGroup // delivery chains in flight

	mu     sync.Mutex
	rng    *rand.Rand
	events []*event
}

func newSlackPlayer(url, secret string, seed uint64) *slackPlayer {
	return &slackPlayer{
		url:    url,
		secret: secret,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		rng:    rand.New(rand.NewPCG(seed, 0x51ac)),
	}
}

func (p *slackPlayer) randFloat() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64()
}

// newEvent makes the next unique app_mention event.
func (p *slackPlayer) newEvent() *event {
	p.mu.Lock()
	n := len(p.events)
	dup := p.rng.Float64() < 0.10
	ev := &event{N: n, ID: eventID(n), TS: fmt.Sprintf("1700000001.%06d", n),
		Permanent: permanentEvent(n), Reply: replyEvent(n), Dup: dup}
	p.events = append(p.events, ev)
	p.mu.Unlock()
	ev.Body, _ = json.Marshal(map[string]any{
		"token": "tok", "team_id": "T0E2E", "api_app_id": "A0E2E", "type": "event_callback",
		"event_id": ev.ID, "event_time": 1700000001 + n,
		"event": map[string]any{
			"type": "app_mention", "user": "U0HUMAN", "text": fmt.Sprintf("<@U0ACKD> please %d", n),
			"ts": ev.TS, "event_ts": ev.TS, "channel": "C0E2E",
		},
	})
	return ev
}

// fire generates n events now, each delivered by its own chain (two chains
// for a duplicate).
func (p *slackPlayer) fire(n int) {
	for range n {
		ev := p.newEvent()
		chains := 1
		if ev.Dup {
			chains = 2
		}
		p.wg.Add(chains)
		for c := range chains {
			go p.deliver(ev, c)
		}
	}
}

// run fires events at rate per second until ctx ends.
func (p *slackPlayer) run(ctx context.Context, rate int) {
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.fire(1)
		}
	}
}

// wait waits for every delivery chain to end, at most timeout.
func (p *slackPlayer) wait(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

func (p *slackPlayer) all() []*event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*event(nil), p.events...)
}

// deliver is Slack's delivery of one event: the first attempt, then up to
// three retries while no attempt got a 2xx. The waits between retries are
// Slack's schedule, compressed; they are the behaviour being simulated.
func (p *slackPlayer) deliver(ev *event, chain int) {
	defer p.wg.Done()
	delays := []time.Duration{0, time.Duration(20+p.randFloat()*200) * time.Millisecond, retry2Delay, retry3Delay}
	reason := ""
	for retry, d := range delays {
		time.Sleep(d)
		status, err := p.send(ev, p.target(ev, chain, retry), retry, reason)
		dl := delivery{Retry: retry, Status: status, At: time.Now()}
		if err != nil {
			dl.Err = err.Error()
		}
		ev.mu.Lock()
		ev.deliveries = append(ev.deliveries, dl)
		if status >= 200 && status < 300 {
			ev.acked = true
		}
		ev.mu.Unlock()
		switch {
		case status >= 200 && status < 300:
			return // never retried after a 2xx
		case errors.Is(err, context.DeadlineExceeded):
			reason = "http_timeout"
		case err != nil:
			reason = "connection_failed"
		default:
			reason = "http_error"
		}
	}
}

// target is where one attempt goes: the one URL, or with replicas the
// load balancer's choice, which sends the two chains of a duplicate to two
// different replicas at the same moment and each retry to the next one.
func (p *slackPlayer) target(ev *event, chain, retry int) string {
	if len(p.urls) == 0 {
		return p.url
	}
	return p.urls[(ev.N+chain+retry)%len(p.urls)]
}

// send makes one signed delivery attempt, bounded by Slack's deadline.
func (p *slackPlayer) send(ev *event, url string, retry int, reason string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), slackDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(ev.Body))
	if err != nil {
		return 0, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", slackSign(p.secret, ts, ev.Body))
	if retry > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(retry))
		req.Header.Set("X-Slack-Retry-Reason", reason)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		// Slack judges by the status line, but a body cut off by a crash is
		// not an answer Slack would have taken.
		return 0, err
	}
	return resp.StatusCode, nil
}

// slackSign is Slack's v0 signature, written here from Slack's documentation
// rather than borrowed from the code under test.
func slackSign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}
