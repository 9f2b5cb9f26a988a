package ingress

// The Socket Mode ingress: ackd holds several WebSocket connections to Slack
// (opened with apps.connections.open and the app-level xapp- token) and hands
// every envelope to the same handlers as the HTTP routes. An envelope is
// acked by its envelope_id only after its intent committed; one that did not
// commit within the ack budget is not acked, and Slack sends it again.
// Receipts dedup on event_id / operation id, never on envelope_id, so an
// envelope Slack sends to two connections, or again after a lost ack, acts
// once.
//
// Why not slack-go's socketmode.Client: one client holds one connection and
// at a `disconnect` closes it before dialling the next (a gap, and envelopes
// read meanwhile are dropped unacked); its liveness watches server pings
// only; acks are queued per client rather than written on the connection the
// envelope came on; invalid_auth ends Run. This file keeps slack-go for the
// apps.connections.open call (its error types: SlackErrorResponse,
// *RateLimitedError) and speaks the small WebSocket protocol itself over
// gorilla/websocket, which socketmode uses too.
//
// Each of socket_mode.connections slots keeps one connection: at a refresh it
// opens the replacement, waits for its hello, and only then drains and
// closes the old one; a connection that receives nothing (no ping, no
// envelope) for socket_mode.silence is closed and replaced; failed opens back
// off (honouring Retry-After on 429); an auth failure stops the slot and
// fails /healthz. ackd pings every silence/3 as well, so Slack's pongs count
// as something received.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/slack-go/slack"
)

// maxAckSize: Slack drops Socket Mode responses of 20 KB or more.
const maxAckSize = 20 * 1024

// authErrors are apps.connections.open errors that no retry can fix.
var authErrors = []string{"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired",
	"not_allowed_token_type", "missing_scope", "no_permission", "invalid_token"}

// socketFrame is one message from Slack over a Socket Mode connection.
type socketFrame struct {
	Type           string          `json:"type"`
	EnvelopeID     string          `json:"envelope_id"`
	Payload        json.RawMessage `json:"payload"`
	RetryAttempt   int             `json:"retry_attempt"`
	RetryReason    string          `json:"retry_reason"`
	Reason         string          `json:"reason"`          // disconnect
	NumConnections *int            `json:"num_connections"` // hello: Slack's count of the app's connections
}

// socketIngress owns the Socket Mode connections.
type socketIngress struct {
	s      *Server
	log    *slog.Logger
	cfg    config.SocketConfig
	api    *slack.Client
	hc     *http.Client // apps.connections.open
	ownHC  bool         // hc is ours: its idle connections close at stop
	dialer *websocket.Dialer

	ctx    context.Context // cancelled at stop: slots stop (re)connecting
	cancel context.CancelFunc
	slots  sync.WaitGroup
	seq    atomic.Int64 // connection ids, for logs

	live       atomic.Int64 // connections that said hello and are not closing
	lastHello  atomic.Int64 // unix ms of the last hello on any connection; 0 none yet
	reconnects atomic.Int64 // connections replaced (ackd_socket_reconnects_total, all reasons)

	// Slack's side (python-slack-sdk #1940): a connection Slack still
	// counts after its path went half-open is a ghost; at Slack's cap of 10
	// envelopes go to ghosts and interactive ones are lost silently.
	open      atomic.Int64               // WebSockets dialled whose read loop has not ended
	lastCount atomic.Pointer[helloCount] // the latest hello that carried num_connections

	mu        sync.Mutex
	notBefore time.Time // apps.connections.open is rate limited until then
	fatal     error     // an auth failure: the slots that hit it stopped

	envelopes *prometheus.CounterVec // type, outcome
	replaced  *prometheus.CounterVec // reason
}

// helloCount is what one hello said, beside what this daemon held then.
type helloCount struct {
	slack int64 // num_connections: Slack's count of the app's open connections, every daemon's
	held  int64 // this daemon's open WebSockets then, the new one and any closing included
}

func newSocketIngress(s *Server) *socketIngress {
	hc, own := s.opts.HTTPClient, false
	if hc == nil {
		hc, own = &http.Client{Timeout: 10 * time.Second}, true
	}
	opts := []slack.Option{slack.OptionAppLevelToken(s.opts.Secrets.AppToken), slack.OptionHTTPClient(hc)}
	if u := s.cfg.Slack.APIURL; u != "" {
		if !strings.HasSuffix(u, "/") {
			u += "/"
		}
		opts = append(opts, slack.OptionAPIURL(u))
	}
	si := &socketIngress{
		s: s, log: s.opts.Logger.With("component", "socket"), cfg: s.cfg.Socket,
		api:   slack.New("", opts...),
		ownHC: own, hc: hc,
		dialer: &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 10 * time.Second},
		envelopes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_socket_envelopes_total",
			Help: "Socket Mode envelopes received, by envelope type and outcome (first, duplicate, ignored, rejected, failed = not acked, control).",
		}, []string{"type", "outcome"}),
		replaced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ackd_socket_reconnects_total",
			Help: "Socket Mode connections replaced, by reason (refresh, silent, write_failed, closed).",
		}, []string{"reason"}),
	}
	s.metrics.Registry.MustRegister(si.envelopes, si.replaced, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ackd_socket_connections",
		Help: "Socket Mode connections open and live (hello received, not closing).",
	}, func() float64 { return float64(si.live.Load()) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ackd_socket_connections_configured",
		Help: "Socket Mode connections this daemon means to hold ([socket_mode] connections).",
	}, func() float64 { return float64(si.cfg.Connections) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ackd_socket_slack_connections",
		Help: "Socket Mode connections Slack counts for this app (num_connections of the latest hello on this daemon's connections; every daemon's, and any ghosts); 0 before the first.",
	}, func() float64 { return float64(si.helloCount().slack) }), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ackd_socket_connections_at_hello",
		Help: "Socket Mode connections this daemon had open when that hello came (the new one and any closing included): ackd_socket_slack_connections less this is what the others and ghosts hold.",
	}, func() float64 { return float64(si.helloCount().held) }))
	return si
}

// helloCount is the latest hello's count; zero before the first.
func (si *socketIngress) helloCount() helloCount {
	if p := si.lastCount.Load(); p != nil {
		return *p
	}
	return helloCount{}
}

func (si *socketIngress) start() {
	si.ctx, si.cancel = context.WithCancel(context.Background())
	si.log.Info("socket mode: opening connections", "connections", si.cfg.Connections, "silence", si.cfg.Silence.String())
	for slot := range si.cfg.Connections {
		si.slots.Add(1)
		go func() {
			defer si.slots.Done()
			si.runSlot(slot)
		}()
	}
}

// stop ends every slot: each drains its connection's in-flight envelopes
// (bounded by the ack budget) and closes it. It waits at most timeout.
func (si *socketIngress) stop(timeout time.Duration) {
	si.cancel()
	done := make(chan struct{})
	go func() {
		si.slots.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		si.log.Warn("socket mode: connections did not close within the shutdown timeout")
	}
	if si.ownHC {
		si.hc.CloseIdleConnections()
	}
}

// health is nil when Socket Mode is off, or on with a live connection and
// no auth failure.
// SocketState is what a daemon reports of its Socket Mode ingress at each
// heartbeat (store.Instance.State), for `ackd status`.
type SocketState struct {
	Configured  int       `json:"configured"`             // socket_mode.connections
	Connections int       `json:"connections"`            // live now (hello received, not closing)
	LastHelloAt time.Time `json:"last_hello_at,omitzero"` // the last hello on any connection
	Reconnects  int64     `json:"reconnects"`             // connections replaced since start
	Stopped     string    `json:"stopped,omitempty"`      // Slack refused the app-level token
}

func (si *socketIngress) state() *SocketState {
	if si == nil {
		return nil
	}
	st := &SocketState{Configured: si.cfg.Connections, Connections: int(si.live.Load()), Reconnects: si.reconnects.Load()}
	if ms := si.lastHello.Load(); ms != 0 {
		st.LastHelloAt = time.UnixMilli(ms).UTC()
	}
	si.mu.Lock()
	if si.fatal != nil {
		st.Stopped = si.fatal.Error()
	}
	si.mu.Unlock()
	return st
}

func (si *socketIngress) health() error {
	if si == nil {
		return nil
	}
	si.mu.Lock()
	fatal := si.fatal
	si.mu.Unlock()
	if fatal != nil {
		return fmt.Errorf("socket mode stopped: Slack refused the app-level token: %v", fatal)
	}
	if si.live.Load() == 0 {
		return errors.New("socket mode: no live connection to Slack")
	}
	return nil
}

// runSlot keeps one connection open until stop, or until an auth failure.
func (si *socketIngress) runSlot(slot int) {
	log := si.log.With("slot", slot)
	var cur *sockConn
	defer func() {
		if cur != nil {
			cur.shutdown()
		}
	}()
	var b backoff
	for {
		if cur == nil {
			c, err := si.connect(slot, &b)
			if err != nil {
				return // stopped, or an auth failure (logged)
			}
			cur = c
		}
		select {
		case <-si.ctx.Done():
			return
		case reason := <-cur.disconnect:
			// Open the replacement first: the old connection keeps
			// delivering (and acking) until the new one said hello.
			si.replaced.WithLabelValues("refresh").Inc()
			si.reconnects.Add(1)
			if reason == "link_disabled" {
				log.Error("socket mode: Slack reports Socket Mode was turned off in the app's settings; reconnecting will fail until it is turned on again",
					"conn", cur.id, "reason", reason)
			} else {
				log.Info("socket mode: Slack asked to refresh a connection; opening its replacement before closing it",
					"conn", cur.id, "reason", reason)
			}
			b = backoff{}
			next, err := si.connect(slot, &b)
			old := cur
			cur = next
			si.goShutdown(old)
			if err != nil {
				cur = nil
				return
			}
		case <-cur.ended:
			err := cur.endErr
			reason, lvl := "closed", slog.LevelWarn
			var ne net.Error
			if werr := cur.failedWrite(); werr != nil {
				reason, err = "write_failed", werr
			} else if errors.As(err, &ne) && ne.Timeout() {
				reason = "silent"
			}
			si.replaced.WithLabelValues(reason).Inc()
			si.reconnects.Add(1)
			if si.ctx.Err() != nil {
				lvl = slog.LevelDebug
			}
			msg := "socket mode: connection closed; replacing it"
			switch reason {
			case "silent":
				msg = "socket mode: connection received nothing (no envelope, ping or pong) within socket_mode.silence; closing and replacing it"
			case "write_failed":
				msg = "socket mode: a write on the connection failed (it cannot write again: acks on it would be lost); closed it, replacing it"
			}
			lived := time.Since(cur.opened)
			log.Log(context.Background(), lvl, msg, "conn", cur.id, "err", err.Error(), "lived", lived.Round(time.Millisecond).String())
			si.goShutdown(cur)
			cur = nil
			if lived < 5*time.Second {
				// A server that closes at once would otherwise be redialled
				// in a tight loop.
				if !sleepCtx(si.ctx, b.next()) {
					return
				}
			} else {
				b = backoff{}
			}
		}
	}
}

// goShutdown closes a connection in the background; stop waits for it.
func (si *socketIngress) goShutdown(c *sockConn) {
	si.slots.Add(1)
	go func() {
		defer si.slots.Done()
		c.shutdown()
	}()
}

// connect opens one connection and waits for its hello, retrying with
// backoff. It returns an error only when stopped or on an auth failure.
func (si *socketIngress) connect(slot int, b *backoff) (*sockConn, error) {
	failures := 0
	for {
		if err := si.waitRateLimit(); err != nil {
			return nil, err
		}
		c, err := si.dial(slot)
		if err == nil {
			attrs := []any{"slot", slot, "conn", c.id, "live", si.live.Load()}
			if failures > 0 {
				attrs = append(attrs, "failed_attempts", failures)
			}
			si.log.Info("socket mode: connection live", attrs...)
			return c, nil
		}
		if si.ctx.Err() != nil {
			return nil, si.ctx.Err()
		}
		if code, ok := authFailure(err); ok {
			// Logged before /healthz can report it.
			si.log.Error("socket mode stopped: apps.connections.open refused the app-level token; this connection will not be retried and /healthz fails until SLACK_APP_TOKEN is fixed and ackd restarted",
				"slot", slot, "error_code", code, "hint", "use an xapp- token of this app with the connections:write scope, and enable Socket Mode in the app's settings")
			si.mu.Lock()
			si.fatal = err
			si.mu.Unlock()
			return nil, err
		}
		wait := b.next()
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) {
			wait = max(wait, rl.RetryAfter)
			si.mu.Lock()
			si.notBefore = time.Now().Add(rl.RetryAfter)
			si.mu.Unlock()
		}
		failures++
		lvl := slog.LevelWarn
		if failures > 1 {
			lvl = slog.LevelDebug // once per failing streak at Warn
		}
		si.log.Log(context.Background(), lvl, "socket mode: could not open a connection; retrying with backoff",
			"slot", slot, "attempt", failures, "err", err.Error(), "retry_in", wait.Round(time.Millisecond).String())
		if !sleepCtx(si.ctx, wait) {
			return nil, si.ctx.Err()
		}
	}
}

// authFailure reports whether err means the token is refused.
func authFailure(err error) (string, bool) {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && slices.Contains(authErrors, se.Err) {
		return se.Err, true
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && (sc.Code == http.StatusUnauthorized || sc.Code == http.StatusForbidden) {
		return strconv.Itoa(sc.Code), true
	}
	return "", false
}

// waitRateLimit waits until apps.connections.open may be called again.
func (si *socketIngress) waitRateLimit() error {
	si.mu.Lock()
	wait := time.Until(si.notBefore)
	si.mu.Unlock()
	if wait > 0 && !sleepCtx(si.ctx, wait) {
		return si.ctx.Err()
	}
	return si.ctx.Err()
}

// dial calls apps.connections.open, dials the URL it returns, and waits for
// Slack's hello (at most socket_mode.silence).
func (si *socketIngress) dial(slot int) (*sockConn, error) {
	ctx, cancel := context.WithTimeout(si.ctx, 10*time.Second)
	defer cancel()
	_, wsURL, err := si.api.StartSocketModeContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("apps.connections.open: %w", err)
	}
	ws, resp, err := si.dialer.DialContext(ctx, wsURL, nil)
	if err != nil {
		// The URL carries a one-time ticket: only its host is logged.
		host := ""
		if u, perr := url.Parse(wsURL); perr == nil {
			host = u.Host
		}
		return nil, fmt.Errorf("dial socket mode url on %s: %w", host, err)
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	ws.SetReadLimit(MaxBody)
	si.open.Add(1) // until its read loop ends: Slack has let it go, or the path is dead
	c := &sockConn{si: si, id: si.seq.Add(1), slot: slot, ws: ws, opened: time.Now(),
		hello: make(chan struct{}), disconnect: make(chan string, 1), ended: make(chan struct{})}
	go c.readLoop()
	t := time.NewTimer(si.cfg.Silence.Duration)
	defer t.Stop()
	select {
	case <-c.hello:
		return c, nil
	case <-c.ended:
		c.close()
		return nil, fmt.Errorf("connection ended before hello: %w", c.endErr)
	case <-t.C:
		c.close()
		return nil, fmt.Errorf("no hello within %s", si.cfg.Silence.Duration)
	case <-si.ctx.Done():
		c.close()
		return nil, si.ctx.Err()
	}
}

// sockConn is one WebSocket connection to Slack.
type sockConn struct {
	si     *socketIngress
	id     int64
	slot   int
	ws     *websocket.Conn
	opened time.Time

	wmu sync.Mutex // gorilla allows one writer at a time

	hello      chan struct{} // closed at Slack's hello
	helloOnce  sync.Once
	disconnect chan string   // Slack asked for a refresh
	ended      chan struct{} // the read loop returned
	endErr     error         // why; read after ended

	mu       sync.Mutex
	live     bool  // counted in si.live
	writeErr error // the first write that failed; the connection is closing
	inflight int
	idle     chan struct{} // closed when inflight drops to 0
	closed   sync.Once
}

func (c *sockConn) setLive(v bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live == v {
		return
	}
	c.live = v
	if v {
		c.si.live.Add(1)
	} else {
		c.si.live.Add(-1)
	}
}

func (c *sockConn) begin() {
	c.mu.Lock()
	if c.inflight == 0 {
		c.idle = make(chan struct{})
	}
	c.inflight++
	c.mu.Unlock()
}

func (c *sockConn) end() {
	c.mu.Lock()
	c.inflight--
	if c.inflight == 0 {
		close(c.idle)
	}
	c.mu.Unlock()
}

// drained returns a channel closed when no envelope is in flight.
func (c *sockConn) drained() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inflight == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return c.idle
}

// shutdown stops counting the connection as live, lets its in-flight
// envelopes commit and ack (each is bounded by Slack's deadline), then closes
// it. Envelopes still arriving meanwhile are handled too.
func (c *sockConn) shutdown() {
	c.setLive(false)
	t := time.NewTimer(slackDeadline) // every envelope is answered by answerBy
	defer t.Stop()
	select {
	case <-c.drained():
	case <-c.ended:
	case <-t.C:
	}
	c.close()
	<-c.ended
}

// writeFailed ends the connection after a write (an ack, a ping, a pong)
// failed. gorilla/websocket never writes on a connection again once a write
// failed or timed out (every later write returns that error), so acks of
// envelopes still arriving on it could never be sent while it looked live.
// Closing it ends its read loop, and its slot replaces it; the envelopes
// whose acks were lost are sent again by Slack and dedup on their receipts.
func (c *sockConn) writeFailed(err error) {
	c.mu.Lock()
	first := c.writeErr == nil
	if first {
		c.writeErr = err
	}
	c.mu.Unlock()
	if first {
		c.close()
	}
}

// failedWrite is the write error that ended the connection, or nil.
func (c *sockConn) failedWrite() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeErr
}

func (c *sockConn) close() {
	c.closed.Do(func() {
		c.setLive(false)
		_ = c.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = c.ws.Close()
	})
}

func (c *sockConn) readLoop() {
	defer close(c.ended)
	defer c.si.open.Add(-1)
	silence := c.si.cfg.Silence.Duration
	c.ws.SetPingHandler(func(data string) error {
		_ = c.ws.SetReadDeadline(time.Now().Add(silence))
		if err := c.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second)); err != nil {
			c.writeFailed(err) // the read loop ends when the close lands
		}
		return nil
	})
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(silence))
	})
	// ackd pings too, so that liveness does not rest on Slack's ping
	// cadence alone: a pong is something received.
	stopPing := make(chan struct{})
	defer close(stopPing)
	go func() {
		t := time.NewTicker(silence / 3)
		defer t.Stop()
		for {
			select {
			case <-stopPing:
				return
			case <-t.C:
				if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second)); err != nil {
					c.writeFailed(err)
					return
				}
			}
		}
	}()
	for {
		_ = c.ws.SetReadDeadline(time.Now().Add(silence))
		_, msg, err := c.ws.ReadMessage()
		if err != nil {
			c.endErr = err
			c.setLive(false)
			return
		}
		start := time.Now()
		var f socketFrame
		if err := json.Unmarshal(msg, &f); err != nil {
			c.si.log.Warn("socket mode: frame is not JSON; ignored", "conn", c.id, "err", err.Error())
			continue
		}
		switch f.Type {
		case "hello":
			c.si.envelopes.WithLabelValues("hello", "control").Inc()
			if n := f.NumConnections; n != nil {
				c.si.lastCount.Store(&helloCount{slack: int64(*n), held: c.si.open.Load()})
			}
			c.helloOnce.Do(func() {
				c.si.lastHello.Store(time.Now().UnixMilli())
				c.setLive(true)
				close(c.hello)
			})
		case "disconnect":
			c.si.envelopes.WithLabelValues("disconnect", "control").Inc()
			select {
			case c.disconnect <- f.Reason:
			default:
			}
		default:
			if f.EnvelopeID == "" {
				c.si.envelopes.WithLabelValues(f.Type, outcomeRejected).Inc()
				c.si.log.Warn("socket mode: frame without envelope_id; ignored", "conn", c.id, "type", f.Type)
				continue
			}
			c.begin()
			go func() {
				defer c.end()
				c.si.handle(c, f, start)
			}()
		}
	}
}

// httpEquivalent turns an envelope's payload into the request body Slack
// would have POSTed over HTTP, so that parsing, operation ids, routes and the
// stored request bytes are the same for both ingresses.
func httpEquivalent(f socketFrame) (endpoint string, body []byte, ctype string, err error) {
	switch f.Type {
	case "events_api":
		return "events", f.Payload, "application/json", nil
	case "slash_commands":
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(f.Payload, &fields); err != nil {
			return "", nil, "", malformed("slash_commands payload is not a JSON object: %v", err)
		}
		form := url.Values{}
		for k, raw := range fields {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw) // a number or bool: its JSON text, as a form would carry it
			}
			form.Set(k, s)
		}
		return "commands", []byte(form.Encode()), "application/x-www-form-urlencoded", nil
	case "interactive":
		if !json.Valid(f.Payload) || len(f.Payload) == 0 || f.Payload[0] != '{' {
			return "", nil, "", malformed("interactive payload is not a JSON object")
		}
		return "interactivity", []byte("payload=" + url.QueryEscape(string(f.Payload))), "application/x-www-form-urlencoded", nil
	default:
		return "", nil, "", nil
	}
}

// handle runs one envelope through the HTTP pipeline and acks it when the
// answer allows.
func (si *socketIngress) handle(c *sockConn, f socketFrame, start time.Time) {
	s := si.s
	endpoint, body, ctype, err := httpEquivalent(f)
	var a answer
	switch {
	case err != nil:
		// From Slack over an authenticated socket, but unreadable: a re-send
		// would carry the same bytes to the same answer, so it is acked.
		a = answer{outcome: outcomeRejected, reason: err.Error()}
	case endpoint == "":
		a = answer{outcome: outcomeIgnored, reason: "unhandled envelope type", typ: f.Type}
	default:
		ctx, cancel := context.WithDeadline(context.Background(), start.Add(s.cfg.Ack.Budget.Duration))
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/slack/"+endpoint, bytes.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		req := request{r: r, body: body, start: start}
		switch endpoint {
		case "events":
			a = s.handleEvents(ctx, req)
		case "commands":
			a = s.handleCommand(ctx, req)
		default:
			a = s.handleInteraction(ctx, req)
		}
		cancel()
	}
	acked, ackErr := false, error(nil)
	if a.outcome != outcomeFailed && a.outcome != outcomeUnknown {
		// Not acked when the intent did not commit, or may not have:
		// Slack sends it again, and the receipt dedups a re-send of an
		// intent that was recorded after all.
		var payload json.RawMessage
		if (endpoint == "commands" || endpoint == "interactivity") && len(a.body) > 0 && json.Valid(a.body) {
			payload = a.body
		}
		ackErr = c.ack(f.EnvelopeID, payload)
		acked = ackErr == nil
	}
	took := time.Since(start)
	if a.trigger {
		s.Trigger() // only after the ack, as over HTTP
	}
	si.envelopes.WithLabelValues(f.Type, a.outcome).Inc()
	s.metrics.AckLatency.WithLabelValues("socket", a.outcome).Observe(took.Seconds())
	si.logEnvelope(c, f, a, acked, ackErr, took)
}

// ack writes {"envelope_id", "payload"} on the connection the envelope came
// on. A payload that would make the ack 20 KB or more is dropped (Slack would
// drop the whole ack): the intent is committed, so the envelope is still acked.
func (c *sockConn) ack(envelopeID string, payload json.RawMessage) error {
	type ackMsg struct {
		EnvelopeID string          `json:"envelope_id"`
		Payload    json.RawMessage `json:"payload,omitempty"`
	}
	b, err := json.Marshal(ackMsg{EnvelopeID: envelopeID, Payload: payload})
	if err != nil {
		return err
	}
	if len(b) >= maxAckSize {
		c.si.log.Error("socket mode: ack payload is over Slack's 20 KB limit; acking without it (shorten the route's ack_text)",
			"envelope_id", envelopeID, "bytes", len(b))
		b, _ = json.Marshal(ackMsg{EnvelopeID: envelopeID})
	}
	c.wmu.Lock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(time.Second))
	err = c.ws.WriteMessage(websocket.TextMessage, b)
	c.wmu.Unlock()
	if err != nil {
		c.writeFailed(err)
	}
	return err
}

func (si *socketIngress) logEnvelope(c *sockConn, f socketFrame, a answer, acked bool, ackErr error, took time.Duration) {
	attrs := []slog.Attr{
		slog.String("endpoint", "socket"), slog.String("envelope_type", f.Type), slog.String("outcome", a.outcome),
		slog.Bool("acked", acked), slog.Int64("conn", c.id), slog.String("envelope_id", f.EnvelopeID),
		slog.Float64("latency_ms", float64(took.Microseconds())/1000),
	}
	attrs = a.logAttrs(attrs)
	// Slack's retry fields are logged for the operator; they never decide.
	if f.RetryAttempt > 0 {
		attrs = append(attrs, slog.Int("retry_attempt", f.RetryAttempt), slog.String("retry_reason", f.RetryReason))
	}
	if a.err != nil {
		attrs = append(attrs, slog.String("err", a.err.Error()))
	}
	level, msg := slog.LevelInfo, "ack"
	switch {
	case a.outcome == outcomeFailed:
		level, msg = slog.LevelError, "intent not recorded: envelope not acked, Slack will send it again"
	case a.outcome == outcomeUnknown:
		level, msg = slog.LevelError, "intent outcome unknown: envelope not acked, Slack will send it again (deduplicated if it was recorded)"
	case ackErr != nil:
		attrs = append(attrs, slog.String("ack_err", ackErr.Error()))
		level, msg = slog.LevelWarn, "ack not sent (connection closing): Slack will send it again and the receipt dedups it"
	case a.outcome == outcomeRejected:
		level, msg = slog.LevelWarn, "rejected"
	}
	si.log.LogAttrs(context.Background(), level, msg, attrs...)
}

// backoff grows from 500 ms to 30 s, with jitter.
type backoff struct{ n int }

func (b *backoff) next() time.Duration {
	d := min(500*time.Millisecond<<min(b.n, 6), 30*time.Second)
	b.n++
	return d/2 + rand.N(d/2+1)
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
