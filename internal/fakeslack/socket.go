package fakeslack

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// socketPath is where the fake's Socket Mode WebSocket server listens, on the
// Web API server's own address.
const socketPath = "/link/"

// Socket is the Socket Mode side of a fake Slack: apps.connections.open (on
// the Web API server, so a client configured with Server.URL finds it) hands
// out ws:// URLs to a real WebSocket server on 127.0.0.1. Each connection gets
// hello and then pings every PingEvery. Send delivers an envelope to one live
// connection (round robin); an envelope not acked within AckTimeout is sent
// again, with retry_attempt and retry_reason and a new envelope_id, to a live
// connection, up to MaxRetries times; while no connection is open, envelopes
// wait. Client pings are answered with pongs. Refresh sends a `disconnect`
// (refresh_requested) and closes the connection RefreshGrace later unless the
// client closed it first; Silence makes a connection send nothing at all (no
// ping, no pong, no envelope); Stall makes the fake stop reading from a
// connection (as a Slack whose side hangs: the client's acks pile up in the
// kernel's buffers until its writes block and time out); Revoke makes
// apps.connections.open answer invalid_auth. A connection whose ping cannot
// be written any more (the client closed it) counts as closed. Every envelope sent, every ack and every connection is
// recorded.
//
// Limits: one app, one fake team; acks of 20 KB or more are recorded as
// Oversized and count as no ack, as Slack drops them; envelopes go only to
// connections that are open, not disconnected and (as far as the fake knows)
// alive — a Silenced connection still counts as alive, as it would at Slack.
type Socket struct {
	srv      *Server
	appToken string
	upgrader websocket.Upgrader

	// Settings; change them before the first connection.
	AckTimeout      time.Duration // default 3s, Slack's
	MaxRetries      int           // default 3
	PingEvery       time.Duration // default 200ms
	RefreshGrace    time.Duration // default 10s
	ReuseEnvelopeID bool          // re-sends keep the envelope_id (seen at Slack: bolt-js #2487)

	mu        sync.Mutex
	revoked   bool
	ghosts    int // registrations Slack counts that no client holds (Ghosts)
	opens     int
	conns     []*sconn
	rr        int
	sent      []Envelope
	acks      []Ack
	oversized []Ack
	byEnv     map[string]*delivery // envelope_id -> its delivery
	byKey     map[string]*delivery
	queue     []*delivery // waiting for a connection
	everLive  bool
	gaps      int // times the last open connection closed
	seq       int
	changed   chan struct{} // closed and replaced at every change, for Wait
}

// Envelope is one envelope as sent on a connection.
type Envelope struct {
	Key        string // the caller's name for the delivery (Send's return)
	EnvelopeID string
	Type       string
	Attempt    int // retry_attempt: 0 for the first send
	Conn       int
	Sent       time.Time
}

// Ack is one ack received.
type Ack struct {
	Key        string // "" when the envelope_id is unknown
	EnvelopeID string
	Conn       int
	At         time.Time
	Payload    json.RawMessage
	Size       int
}

// ConnInfo describes one connection.
type ConnInfo struct {
	ID                  int
	Opened, Closed      time.Time // Closed zero while open
	ClosedByClient      bool
	Refreshed, Silenced bool
	Stalled             bool
}

type delivery struct {
	key     string
	typ     string
	payload json.RawMessage
	attempt int
	envIDs  []string
	acked   bool
	timer   *time.Timer
}

type sconn struct {
	id        int
	ws        *websocket.Conn
	wmu       sync.Mutex
	opened    time.Time
	closed    time.Time
	byClient  bool
	refreshed bool
	silenced  bool
	stalled   chan struct{} // not nil while Stall holds the reader; closed by Unstall
	hello     bool          // hello sent: envelopes may follow
	stop      chan struct{}
}

func (c *sconn) open() bool { return c.closed.IsZero() }

// routable: said hello, open, not asked to go away.
func (c *sconn) routable() bool { return c.hello && c.open() && !c.refreshed }

// SocketMode enables the Socket Mode side on s, accepting appToken in
// apps.connections.open.
func (s *Server) SocketMode(tb testing.TB, appToken string) *Socket {
	tb.Helper()
	k := &Socket{srv: s, appToken: appToken, AckTimeout: 3 * time.Second, MaxRetries: 3,
		PingEvery: 200 * time.Millisecond, RefreshGrace: 10 * time.Second,
		byEnv: map[string]*delivery{}, byKey: map[string]*delivery{}, changed: make(chan struct{})}
	s.mu.Lock()
	s.sock = k
	s.mu.Unlock()
	tb.Cleanup(k.closeAll)
	return k
}

// change wakes Wait; k.mu is held.
func (k *Socket) change() {
	close(k.changed)
	k.changed = make(chan struct{})
}

// Wait polls cond (under no lock) after every change until it is true or
// timeout passes; it reports whether cond became true.
func (k *Socket) Wait(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		k.mu.Lock()
		ch := k.changed
		k.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return cond()
		}
	}
}

// Revoke makes apps.connections.open answer invalid_auth from now on.
// Open connections stay open.
func (k *Socket) Revoke() {
	k.mu.Lock()
	k.revoked = true
	k.mu.Unlock()
}

// Ghosts makes Slack count n more connections than are open from now on: the
// registrations a reconnect over a half-open path leaves behind
// (python-slack-sdk #1940). Later hellos' num_connections include them;
// envelopes still go only to open connections.
func (k *Socket) Ghosts(n int) {
	k.mu.Lock()
	k.ghosts = n
	k.mu.Unlock()
}

// Opens is how many times apps.connections.open succeeded.
func (k *Socket) Opens() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.opens
}

func (k *Socket) serveOpen(w http.ResponseWriter, token string) {
	k.mu.Lock()
	var resp Response
	switch {
	case token == "":
		resp = Err("not_authed")
	case strings.HasPrefix(token, "xoxb-") || strings.HasPrefix(token, "xoxp-"):
		resp = Err("not_allowed_token_type") // Slack's answer to a bot or user token
	case token != k.appToken || k.revoked:
		resp = Err("invalid_auth")
	default:
		k.opens++
		k.seq++
		ticket := k.seq
		k.mu.Unlock()
		url := "ws" + k.srv.srv.URL[len("http"):] + socketPath + "?ticket=" + strconv.Itoa(ticket)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "url": url})
		return
	}
	k.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": resp.Error})
}

func (k *Socket) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := k.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	// Registered before its hello: from the client's side the connection
	// is open now, and a client may close its old one as soon as it reads
	// the hello.
	k.mu.Lock()
	c := &sconn{id: len(k.conns) + 1, ws: ws, opened: time.Now(), stop: make(chan struct{})}
	k.conns = append(k.conns, c)
	live := k.openCount() + k.ghosts
	k.mu.Unlock()
	hello, _ := json.Marshal(map[string]any{"type": "hello", "num_connections": live,
		"connection_info": map[string]string{"app_id": "A0FAKEAPP"},
		"debug_info":      map[string]any{"host": "fakeslack", "approximate_connection_time": 3600}})
	if c.write(hello) != nil {
		k.closed(c, false)
		return
	}
	k.mu.Lock()
	c.hello = true // routable from now on
	k.everLive = true
	queued := k.queue
	k.queue = nil
	k.change()
	k.mu.Unlock()
	for _, d := range queued {
		k.deliver(d)
	}
	ws.SetPingHandler(func(data string) error {
		k.mu.Lock()
		silent := c.silenced
		k.mu.Unlock()
		if silent {
			return nil // a silent connection answers nothing, not even pings
		}
		_ = ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
		return nil
	})
	go k.pinger(c)
	k.reader(c)
}

func (c *sconn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(2 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (k *Socket) pinger(c *sconn) {
	t := time.NewTicker(k.PingEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			k.mu.Lock()
			silent := c.silenced
			k.mu.Unlock()
			if !silent {
				err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
				var ne net.Error
				if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
					k.closed(c, true) // the client is gone
					return
				}
			}
		}
	}
}

func (k *Socket) reader(c *sconn) {
	for {
		k.mu.Lock()
		stalled := c.stalled
		k.mu.Unlock()
		if stalled != nil {
			select {
			case <-stalled:
			case <-c.stop:
				return
			}
		}
		_, msg, err := c.ws.ReadMessage()
		if err != nil {
			k.closed(c, true)
			return
		}
		var a struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(msg, &a) != nil {
			continue
		}
		k.mu.Lock()
		ack := Ack{EnvelopeID: a.EnvelopeID, Conn: c.id, At: time.Now(), Payload: a.Payload, Size: len(msg)}
		d := k.byEnv[a.EnvelopeID]
		if d != nil {
			ack.Key = d.key
		}
		if len(msg) >= 20*1024 {
			k.oversized = append(k.oversized, ack)
		} else {
			k.acks = append(k.acks, ack)
			if d != nil && !d.acked {
				d.acked = true
				if d.timer != nil {
					d.timer.Stop()
				}
			}
		}
		k.change()
		k.mu.Unlock()
	}
}

// closed records the end of a connection.
func (k *Socket) closed(c *sconn, byClient bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !c.open() {
		return
	}
	c.closed, c.byClient = time.Now(), byClient
	close(c.stop)
	_ = c.ws.Close()
	if k.everLive && k.openCount() == 0 {
		k.gaps++
	}
	k.change()
}

func (k *Socket) openCount() int {
	n := 0
	for _, c := range k.conns {
		if c.open() {
			n++
		}
	}
	return n
}

// Send delivers an envelope of typ ("events_api", "slash_commands",
// "interactive") with payload (marshalled to JSON) to one live connection,
// and again until acked (see Socket). key names the delivery; it must be
// unique.
func (k *Socket) Send(key, typ string, payload any) {
	k.send(key, typ, payload, 1)
}

// SendToTwo sends the same payload at once to two different connections
// (one, if only one is open), each copy with its own envelope_id: Slack may
// deliver a payload on any of an app's connections. Both copies share key.
func (k *Socket) SendToTwo(key, typ string, payload any) {
	k.send(key, typ, payload, 2)
}

func (k *Socket) send(key, typ string, payload any, copies int) {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	d := &delivery{key: key, typ: typ, payload: b}
	k.mu.Lock()
	k.byKey[key] = d
	k.mu.Unlock()
	k.deliverN(d, copies)
}

func (k *Socket) deliver(d *delivery) { k.deliverN(d, 1) }

// deliverN sends the delivery's current attempt to n connections.
func (k *Socket) deliverN(d *delivery, n int) {
	k.mu.Lock()
	if d.acked {
		k.mu.Unlock()
		return
	}
	var targets []*sconn
	var pool []*sconn
	for _, c := range k.conns {
		if c.routable() {
			pool = append(pool, c)
		}
	}
	if len(pool) == 0 {
		for _, c := range k.conns {
			if c.hello && c.open() {
				pool = append(pool, c) // asked to refresh but not yet closed
			}
		}
	}
	if len(pool) == 0 {
		k.queue = append(k.queue, d)
		k.mu.Unlock()
		return
	}
	for i := range min(n, len(pool)) {
		targets = append(targets, pool[(k.rr+i)%len(pool)])
	}
	k.rr++
	type out struct {
		c *sconn
		b []byte
	}
	var outs []out
	for _, c := range targets {
		envID := ""
		if k.ReuseEnvelopeID && len(d.envIDs) > 0 {
			envID = d.envIDs[0]
		} else {
			k.seq++
			envID = fmt.Sprintf("env-%06d", k.seq)
			d.envIDs = append(d.envIDs, envID)
		}
		k.byEnv[envID] = d
		msg := map[string]any{"type": d.typ, "envelope_id": envID, "payload": d.payload,
			"accepts_response_payload": d.typ != "events_api", "retry_attempt": d.attempt}
		if d.attempt > 0 {
			msg["retry_reason"] = "timeout"
		}
		b, _ := json.Marshal(msg)
		k.sent = append(k.sent, Envelope{Key: d.key, EnvelopeID: envID, Type: d.typ, Attempt: d.attempt, Conn: c.id, Sent: time.Now()})
		outs = append(outs, out{c, b})
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(k.AckTimeout, func() { k.retry(d) })
	} else {
		d.timer.Reset(k.AckTimeout)
	}
	k.change()
	k.mu.Unlock()
	for _, o := range outs {
		k.mu.Lock()
		silent := o.c.silenced
		k.mu.Unlock()
		if !silent {
			_ = o.c.write(o.b) // a failed write is a lost envelope: the retry covers it
		}
	}
}

func (k *Socket) retry(d *delivery) {
	k.mu.Lock()
	if d.acked || d.attempt >= k.MaxRetries {
		k.mu.Unlock()
		return
	}
	d.attempt++
	k.mu.Unlock()
	k.deliver(d)
}

// Refresh sends connection id a disconnect (refresh_requested), stops
// routing envelopes to it, and closes it RefreshGrace later if the client
// has not.
func (k *Socket) Refresh(id int) {
	k.mu.Lock()
	c := k.conn(id)
	if c == nil || !c.open() {
		k.mu.Unlock()
		return
	}
	c.refreshed = true
	k.change()
	k.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": "refresh_requested",
		"debug_info": map[string]any{"host": "fakeslack"}})
	_ = c.write(b)
	time.AfterFunc(k.RefreshGrace, func() { k.closed(c, false) })
}

// Silence makes connection id send nothing more: no pings, no envelopes
// (envelopes routed to it are lost, and re-sent after AckTimeout).
func (k *Socket) Silence(id int) {
	k.mu.Lock()
	if c := k.conn(id); c != nil {
		c.silenced = true
	}
	k.change()
	k.mu.Unlock()
}

// Stall makes the fake stop reading from connection id (after the message
// it may be reading now): acks sent on it are not received, and once the
// kernel's buffers are full the client's writes block. The fake still
// writes on it (pings, envelopes), as a half-hung peer would.
func (k *Socket) Stall(id int) {
	k.mu.Lock()
	if c := k.conn(id); c != nil && c.stalled == nil {
		c.stalled = make(chan struct{})
	}
	k.change()
	k.mu.Unlock()
}

// Unstall makes the fake read from connection id again.
func (k *Socket) Unstall(id int) {
	k.mu.Lock()
	if c := k.conn(id); c != nil && c.stalled != nil {
		close(c.stalled)
		c.stalled = nil
	}
	k.change()
	k.mu.Unlock()
}

// Drop closes connection id from the server side, as a network failure would.
func (k *Socket) Drop(id int) {
	k.mu.Lock()
	c := k.conn(id)
	k.mu.Unlock()
	if c != nil {
		k.closed(c, false)
	}
}

func (k *Socket) conn(id int) *sconn {
	if id < 1 || id > len(k.conns) {
		return nil
	}
	return k.conns[id-1]
}

// Conns describes every connection so far, oldest first.
func (k *Socket) Conns() []ConnInfo {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]ConnInfo, len(k.conns))
	for i, c := range k.conns {
		out[i] = ConnInfo{ID: c.id, Opened: c.opened, Closed: c.closed, ClosedByClient: c.byClient,
			Refreshed: c.refreshed, Silenced: c.silenced, Stalled: c.stalled != nil}
	}
	return out
}

// Open returns the ids of the open connections.
func (k *Socket) Open() []int {
	var ids []int
	for _, c := range k.Conns() {
		if c.Closed.IsZero() {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// Gaps counts the moments, after the first connection, when the last open
// connection closed: a client that opens a replacement before closing the
// old one has none at a refresh.
func (k *Socket) Gaps() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gaps
}

// Acked reports whether any envelope of delivery key was acked.
func (k *Socket) Acked(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.byKey[key]
	return d != nil && d.acked
}

// Sent returns every envelope sent, oldest first.
func (k *Socket) Sent() []Envelope {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Envelope(nil), k.sent...)
}

// Acks returns every ack under 20 KB, oldest first.
func (k *Socket) Acks() []Ack {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Ack(nil), k.acks...)
}

// Oversized returns the acks of 20 KB or more, which Slack drops.
func (k *Socket) Oversized() []Ack {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Ack(nil), k.oversized...)
}

func (k *Socket) closeAll() {
	k.mu.Lock()
	conns := append([]*sconn(nil), k.conns...)
	for _, d := range k.byKey {
		if d.timer != nil {
			d.timer.Stop()
		}
	}
	k.mu.Unlock()
	for _, c := range conns {
		k.closed(c, false)
	}
}
