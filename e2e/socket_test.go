package e2e

import (
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/sqlitelock"
)

// Socket Mode end to end: the real binary against internal/fakeslack's
// Socket Mode side (apps.connections.open and a real WebSocket server on
// 127.0.0.1), no signing secret (Socket Mode alone), one SQLite file per test.

const appToken = "xapp-1-A0E2E-e2e-app-token"

type sockEnv struct {
	t    *testing.T
	r    *rig
	api  *fakeslack.Server
	sock *fakeslack.Socket
	db   string
	addr string
}

// newSockEnv writes a Socket Mode config (connections, silence, ack budget)
// with a react route for app_mention and log routes for /deploy and the
// "approve" action, and prepares (does not start) the daemon.
func newSockEnv(t *testing.T, conns int, silence, budget string) *sockEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	dir := t.TempDir()
	api := fakeslack.New(t, botToken)
	sock := api.SocketMode(t, appToken)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	addr := freeAddr(t, rng)
	db := filepath.Join(dir, "ackd.db")
	config := filepath.Join(dir, "ackd.toml")
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[ack]
budget = %q

[sweep]
interval = "200ms"
backoff  = "100ms"

[slack]
api_url = %q

[socket_mode]
enabled     = true
connections = %d
silence     = %q

[[route]]
name     = "eyes"
event    = "app_mention"
effect   = "react"
reaction = "eyes"

[[route]]
name     = "deploy"
command  = "/deploy"
ack_text = "On it."
effect   = "log"

[[route]]
name      = "approve"
action_id = "approve"
effect    = "log"
`, addr, db, budget, api.URL(), conns, silence)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// Registered before the rig's cleanup, so it runs after every process
	// was stopped: a race report, panic or fatal error in any log fails.
	t.Cleanup(func() {
		files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, bad := range []string{"WARNING: DATA RACE", "panic:", "fatal error:"} {
				if i := strings.Index(string(b), bad); i >= 0 {
					t.Errorf("%s: %s\n%s", filepath.Base(f), bad, string(b[i:min(len(b), i+3000)]))
				}
			}
		}
	})
	r := newRig(t, ackdBin, dir, config, addr, map[string]string{"SLACK_APP_TOKEN": appToken, "SLACK_BOT_TOKEN": botToken})
	return &sockEnv{t: t, r: r, api: api, sock: sock, db: db, addr: addr}
}

func (e *sockEnv) start() {
	e.t.Helper()
	if err := e.r.start(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *sockEnv) dbh() *sql.DB {
	e.t.Helper()
	h, err := sql.Open("sqlite", e.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { h.Close() })
	return h
}

func (e *sockEnv) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.dbh().QueryRow(q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *sockEnv) get(path string) (int, string) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + e.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *sockEnv) logs() string {
	var b strings.Builder
	for _, f := range e.r.logs() {
		data, _ := os.ReadFile(f)
		b.Write(data)
	}
	return b.String()
}

// delivery is one thing Slack sends, with the receipt and row it must leave.
type sockDelivery struct {
	key, typ string
	payload  any
	receipt  string
	row      string
}

func sockEvent(n int) sockDelivery {
	id := fmt.Sprintf("Ev%06d", n)
	ts := fmt.Sprintf("1700000000.%06d", n)
	return sockDelivery{key: id, typ: "events_api", receipt: id, row: id + ":eyes", payload: map[string]any{
		"token": "tok", "team_id": "T0E2E", "api_app_id": "A0E2E", "type": "event_callback", "event_id": id,
		"event_time": 1700000000, "event": map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBOT> hi",
			"ts": ts, "channel": "C0E2E", "event_ts": ts}}}
}

func sockDeliveryN(n int) sockDelivery {
	switch n % 10 {
	case 3:
		trig := fmt.Sprintf("T.cmd.%06d", n)
		return sockDelivery{key: trig, typ: "slash_commands", receipt: "cmd:" + trig, row: "cmd:" + trig + ":deploy",
			payload: map[string]any{"token": "tok", "team_id": "T0E2E", "channel_id": "C0E2E", "user_id": "U1",
				"command": "/deploy", "text": "prod", "response_url": "http://127.0.0.1:9/none", "trigger_id": trig}}
	case 7:
		trig := fmt.Sprintf("T.ix.%06d", n)
		return sockDelivery{key: trig, typ: "interactive", receipt: "ix:" + trig, row: "ix:" + trig + ":approve",
			payload: map[string]any{"type": "block_actions", "trigger_id": trig, "team": map[string]any{"id": "T0E2E"},
				"user": map[string]any{"id": "U1"}, "channel": map[string]any{"id": "C0E2E"},
				"response_url": "http://127.0.0.1:9/none",
				"actions":      []any{map[string]any{"action_id": "approve", "value": "yes", "action_ts": "1.1"}}}}
	default:
		return sockEvent(n)
	}
}

// traffic sends deliveries at rate per second until stop is closed and
// returns them.
func (e *sockEnv) traffic(rate int, first int, stop <-chan struct{}) []sockDelivery {
	var out []sockDelivery
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for n := first; ; n++ {
		select {
		case <-stop:
			return out
		case <-t.C:
		}
		d := sockDeliveryN(n)
		e.sock.Send(d.key, d.typ, d.payload)
		out = append(out, d)
	}
}

// checkRecorded asserts that every acked delivery has its receipt and row.
func (e *sockEnv) checkRecorded(ds []sockDelivery) (acked int) {
	e.t.Helper()
	db := e.dbh()
	for _, d := range ds {
		if !e.sock.Acked(d.key) {
			continue
		}
		acked++
		var receipts, rows int
		if err := db.QueryRow(`SELECT count(*) FROM slack_event_receipts WHERE event_id = ?`, d.receipt).Scan(&receipts); err != nil {
			e.t.Fatal(err)
		}
		if err := db.QueryRow(`SELECT count(*) FROM outbox WHERE idempotency_key = ?`, d.row).Scan(&rows); err != nil {
			e.t.Fatal(err)
		}
		if receipts != 1 || rows != 1 {
			e.t.Errorf("acked %s %s (LOST): receipts=%d rows=%d", d.typ, d.key, receipts, rows)
		}
	}
	return acked
}

// ackLatency is the p50 and p99 of send-to-ack time as the fake saw it, over
// acked envelopes: a figure, not an assertion.
func ackLatency(sock *fakeslack.Socket) (p50, p99 time.Duration) {
	sent := map[string]time.Time{}
	for _, s := range sock.Sent() {
		sent[s.EnvelopeID] = s.Sent
	}
	var ds []time.Duration
	for _, a := range sock.Acks() {
		if t, ok := sent[a.EnvelopeID]; ok {
			ds = append(ds, a.At.Sub(t))
		}
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

func retries(sent []fakeslack.Envelope) int {
	n := 0
	for _, s := range sent {
		if s.Attempt > 0 {
			n++
		}
	}
	return n
}

func TestSocketModeCrash(t *testing.T) {
	e := newSockEnv(t, 2, "5s", "2s")
	e.start()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 2))
	t.Logf("seed=%d", seed)

	stop := make(chan struct{})
	var ds []sockDelivery
	var wg sync.WaitGroup
	wg.Go(func() { ds = e.traffic(60, 0, stop) })
	kills := 3
	for i := range kills {
		time.Sleep(time.Duration(400+rng.IntN(1200)) * time.Millisecond) // a random moment under load
		if err := e.r.kill(fmt.Sprintf("kill-%d", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		if err := e.r.start(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	// Let Slack's re-sends run their course, then crash once more and read
	// the database as the kill left it.
	e.sock.Wait(15*time.Second, func() bool {
		for _, d := range ds {
			if !e.sock.Acked(d.key) {
				return false
			}
		}
		return true
	})
	if err := e.r.kill("final"); err != nil {
		t.Fatal(err)
	}
	acked := e.checkRecorded(ds)
	if acked < len(ds)/2 {
		t.Errorf("only %d of %d deliveries acked", acked, len(ds))
	}
	if n := e.count(`SELECT count(*) FROM slack_event_receipts`); n < acked {
		t.Errorf("%d receipts for %d acked deliveries", n, acked)
	}
	figure := fmt.Sprintf("socket crash: deliveries=%d acked=%d envelopes_sent=%d resends=%d kills=%d connections=%d",
		len(ds), acked, len(e.sock.Sent()), retries(e.sock.Sent()), kills+1, len(e.sock.Conns()))
	t.Log(figure)
	fmt.Println("e2e: " + figure)
}

func TestSocketModeLockHeld(t *testing.T) {
	e := newSockEnv(t, 2, "5s", "1s")
	e.start()
	lock := lockHold(t, e.db)
	d := sockEvent(1)
	e.sock.Send(d.key, d.typ, d.payload)
	// The first send is not acked within Slack's 3 s: the fake re-sends.
	if !e.sock.Wait(20*time.Second, func() bool {
		for _, s := range e.sock.Sent() {
			if s.Key == d.key && s.Attempt > 0 {
				return true
			}
		}
		return e.sock.Acked(d.key) // reported below
	}) {
		t.Fatal("the fake never re-sent the envelope")
	}
	for _, a := range e.sock.Acks() {
		if a.Key == d.key {
			t.Fatalf("acked while the write lock was held: %+v", a)
		}
	}
	lock.Release(t)
	if !e.sock.Wait(20*time.Second, func() bool { return e.sock.Acked(d.key) }) {
		t.Fatalf("the re-send was not acked after the lock was freed\n%s", lastLines(e.logs(), 20))
	}
	first := ""
	for _, s := range e.sock.Sent() {
		if s.Key == d.key && s.Attempt == 0 {
			first = s.EnvelopeID
		}
	}
	for _, a := range e.sock.Acks() {
		if a.EnvelopeID == first {
			t.Errorf("the first envelope %s, whose intent could not commit, was acked", first)
		}
	}
	if e.checkRecorded([]sockDelivery{d}) != 1 {
		t.Fatal("not acked")
	}
	if !strings.Contains(e.logs(), "intent not recorded: envelope not acked, Slack will send it again") {
		t.Errorf("no log line for the envelope that was not acked")
	}
	// The line of the acked re-send is written right after its ack.
	if !pollUntil(10*time.Second, func() bool { return strings.Contains(e.logs(), `"retry_attempt":1`) }) {
		t.Errorf("the re-send's retry_attempt was not logged")
	}
}

func TestSocketModeConnections(t *testing.T) {
	e := newSockEnv(t, 2, "1s", "2s")
	e.start()
	if !e.sock.Wait(10*time.Second, func() bool { return len(e.sock.Open()) == 2 }) {
		t.Fatalf("open connections %v, want 2", e.sock.Open())
	}

	t.Run("the same envelope on two connections acts once", func(t *testing.T) {
		var ds []sockDelivery
		for n := range 20 {
			d := sockEvent(1000 + n)
			e.sock.SendToTwo(d.key, d.typ, d.payload)
			ds = append(ds, d)
		}
		if !e.sock.Wait(20*time.Second, func() bool {
			acks := map[string]int{}
			for _, a := range e.sock.Acks() {
				acks[a.Key]++
			}
			for _, d := range ds {
				if acks[d.key] < 2 {
					return false
				}
			}
			return true
		}) {
			t.Fatal("not every copy was acked")
		}
		e.checkRecorded(ds)
		waitDone(t, e, len(ds))
		calls := map[string]int{}
		for _, c := range e.api.CallsTo("reactions.add") {
			calls[c.Params.Get("timestamp")]++
		}
		for _, d := range ds {
			ts := d.payload.(map[string]any)["event"].(map[string]any)["ts"].(string)
			if calls[ts] != 1 {
				t.Errorf("%s: reactions.add called %d times, want 1", d.key, calls[ts])
			}
		}
	})

	t.Run("a silent connection is replaced", func(t *testing.T) {
		victim := e.sock.Open()[0]
		before := len(e.sock.Conns())
		e.sock.Silence(victim)
		if !e.sock.Wait(20*time.Second, func() bool {
			c := e.sock.Conns()[victim-1]
			return !c.Closed.IsZero() && len(e.sock.Open()) == 2 && len(e.sock.Conns()) > before
		}) {
			t.Fatalf("silent connection not replaced: %+v", e.sock.Conns())
		}
		if c := e.sock.Conns()[victim-1]; !c.ClosedByClient {
			t.Errorf("the silent connection was not closed by ackd: %+v", c)
		}
		d := sockEvent(2000)
		e.sock.Send(d.key, d.typ, d.payload)
		if !e.sock.Wait(15*time.Second, func() bool { return e.sock.Acked(d.key) }) {
			t.Fatal("not acked after the replacement")
		}
		if _, body := e.get("/metrics"); !strings.Contains(body, `ackd_socket_reconnects_total{reason="silent"}`) {
			t.Error("no silent reconnect in /metrics")
		}
	})

	t.Run("invalid_auth makes /healthz fail with a clear log line", func(t *testing.T) {
		e.sock.Revoke()
		for _, id := range e.sock.Open() {
			e.sock.Drop(id)
		}
		ok := pollUntil(20*time.Second, func() bool {
			status, body := e.get("/healthz")
			return status == http.StatusServiceUnavailable && strings.Contains(body, "invalid_auth")
		})
		status, body := e.get("/healthz")
		if !ok || !strings.Contains(body, "invalid_auth") {
			t.Fatalf("/healthz %d %q, want 503 naming invalid_auth", status, body)
		}
		if !strings.Contains(e.logs(), "socket mode stopped: apps.connections.open refused the app-level token") {
			t.Errorf("no clear log line:\n%s", lastLines(e.logs(), 10))
		}
		if strings.Contains(e.logs(), appToken) {
			t.Error("the app-level token is in the log")
		}
		if _, err := e.r.current(); err != nil {
			t.Errorf("the daemon exited: %v", err)
		}
	})
}

func TestSocketModeRefreshUnderLoad(t *testing.T) {
	e := newSockEnv(t, 1, "5s", "2s")
	e.start()
	stop := make(chan struct{})
	var ds []sockDelivery
	var wg sync.WaitGroup
	wg.Go(func() { ds = e.traffic(50, 0, stop) })
	refreshes := 3
	for range refreshes {
		time.Sleep(time.Second)
		open := e.sock.Open()
		if len(open) == 0 {
			t.Fatal("no open connection")
		}
		before := len(e.sock.Conns())
		e.sock.Refresh(open[len(open)-1])
		if !e.sock.Wait(15*time.Second, func() bool { return len(e.sock.Conns()) > before }) {
			t.Fatal("no replacement opened after the refresh")
		}
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if !e.sock.Wait(20*time.Second, func() bool {
		for _, d := range ds {
			if !e.sock.Acked(d.key) {
				return false
			}
		}
		return true
	}) {
		n := 0
		for _, d := range ds {
			if !e.sock.Acked(d.key) {
				n++
			}
		}
		t.Errorf("%d of %d deliveries never acked", n, len(ds))
	}
	if acked := e.checkRecorded(ds); acked != len(ds) {
		t.Errorf("acked %d of %d", acked, len(ds))
	}
	if g := e.sock.Gaps(); g != 0 {
		t.Errorf("%d moments with no open connection: the replacement must open before the old one closes", g)
	}
	byClient := 0
	for _, c := range e.sock.Conns() {
		if c.Refreshed && c.ClosedByClient {
			byClient++
		}
	}
	if byClient != refreshes {
		t.Errorf("%d refreshed connections closed by ackd, want %d: %+v", byClient, refreshes, e.sock.Conns())
	}
	// SIGTERM: the daemon closes its connections itself and exits 0.
	if err := e.r.stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	e.sock.Wait(5*time.Second, func() bool { return len(e.sock.Open()) == 0 })
	for _, c := range e.sock.Conns() {
		if !c.Refreshed && !c.ClosedByClient {
			t.Errorf("connection %d was not closed by ackd at SIGTERM: %+v", c.ID, c)
		}
	}
	p50, p99 := ackLatency(e.sock)
	figure := fmt.Sprintf("socket refresh: deliveries=%d refreshes=%d envelopes_sent=%d resends=%d ack_p50=%s ack_p99=%s", len(ds), refreshes,
		len(e.sock.Sent()), retries(e.sock.Sent()), p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond))
	t.Log(figure)
	fmt.Println("e2e: " + figure)
}

// waitDone waits until n outbox rows are done.
func waitDone(t *testing.T, e *sockEnv, n int) {
	t.Helper()
	if !pollUntil(30*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE status = 'done'`) >= n
	}) {
		t.Fatalf("fewer than %d rows done", n)
	}
}

// pollUntil checks cond every 20 ms until it holds or timeout passes, for
// state outside the fake (the database, /healthz).
func pollUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// lockHold holds the database's write lock from a sqlite3 process.
func lockHold(t *testing.T, db string) *sqlitelock.Holder { return sqlitelock.Hold(t, db) }
