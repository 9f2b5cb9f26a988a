package daemon_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	_ "modernc.org/sqlite"
)

// The shared harness for daemon tests: a real Server on 127.0.0.1:0 with a
// real SQLite file in t.TempDir(), signed requests over real HTTP, and a
// captured JSON log.

const testSecret = "8f742231b10e8888abcd99yyyzzz85a5"

func readSchema(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile("../schema.sql")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// logBuffer is a concurrency-safe log sink with search helpers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Lines returns the decoded JSON log records.
func (l *logBuffer) Lines() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// Find returns the first record whose fields include every key=value in kv
// (values compared with fmt.Sprint), or nil.
func (l *logBuffer) Find(kv ...any) map[string]any {
	for _, m := range l.Lines() {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if fmt.Sprint(m[kv[i].(string)]) != fmt.Sprint(kv[i+1]) {
				ok = false
				break
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testServer is a running daemon.Server plus what tests need around it.
type testServer struct {
	*daemon.Server
	URL  string // http://127.0.0.1:port
	DB   string // database path
	Logs *logBuffer
	t    testing.TB
}

// configFor parses a TOML config (over the defaults) and points it at a
// fresh database and a free loopback port.
func configFor(tb testing.TB, toml string) config.Config {
	tb.Helper()
	cfg := config.Default()
	if toml != "" {
		var err error
		cfg, err = config.Parse([]byte(toml))
		if err != nil {
			tb.Fatalf("config: %v", err)
		}
	}
	cfg.DB = filepath.Join(tb.TempDir(), "ackd.db")
	cfg.Listen = "127.0.0.1:0"
	return cfg
}

// startServer opens a Server with cfg; it is closed at cleanup.
func startServer(tb testing.TB, cfg config.Config, opts daemon.Options) *testServer {
	tb.Helper()
	logs := &logBuffer{}
	if opts.Schema == "" {
		opts.Schema = readSchema(tb)
	}
	if opts.Secrets.SigningSecret == "" {
		opts.Secrets.SigningSecret = testSecret
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := daemon.New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Open(context.Background()); err != nil {
		tb.Fatal(err)
	}
	ts := &testServer{Server: srv, URL: "http://" + srv.Addr(), DB: cfg.DB, Logs: logs, t: tb}
	tb.Cleanup(func() {
		if err := srv.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return ts
}

// sign returns Slack's v0 signature of body at ts.
func sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", ts)
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// response is a finished HTTP exchange.
type response struct {
	Status int
	Body   string
	Header http.Header
}

// post sends body to path signed now with the test secret. ctype is the
// Content-Type; extra headers may be added with hdr (nil ok).
func (s *testServer) post(path, ctype string, body []byte, hdr http.Header) response {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	return s.do(req)
}

func (s *testServer) do(req *http.Request) response {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Body: string(b), Header: resp.Header}
}

// postEvent sends an Events API body to /slack/events.
func (s *testServer) postEvent(body []byte) response {
	s.t.Helper()
	return s.post("/slack/events", "application/json", body, nil)
}

// postForm sends a form body to /slack/commands or /slack/interactivity.
func (s *testServer) postForm(path string, body []byte) response {
	s.t.Helper()
	return s.post(path, "application/x-www-form-urlencoded", body, nil)
}

// db opens an independent handle on the server's database for assertions.
func (s *testServer) db() *sql.DB {
	s.t.Helper()
	db, err := sql.Open("sqlite", s.DB+"?_pragma=busy_timeout(5000)")
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { db.Close() })
	return db
}

// count runs a count query on the server's database.
func (s *testServer) count(q string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.db().QueryRow(q, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// rows counts (receipts, outbox rows).
func (s *testServer) rows() (receipts, outbox int) {
	s.t.Helper()
	return s.count(`SELECT count(*) FROM slack_event_receipts`), s.count(`SELECT count(*) FROM outbox`)
}

// eventBody builds an event_callback envelope around an inner event.
func eventBody(eventID string, inner map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{
		"token": "tok", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
		"event_id": eventID, "event_time": 1700000000, "event": inner,
	})
	return b
}

// mention is a typical app_mention inner event.
func mention(channel, ts, text string) map[string]any {
	return map[string]any{"type": "app_mention", "user": "U1", "text": text, "ts": ts,
		"channel": channel, "event_ts": ts}
}

// message is a typical plain message inner event.
func message(channel, ts, text string) map[string]any {
	return map[string]any{"type": "message", "user": "U1", "text": text, "ts": ts,
		"channel": channel, "event_ts": ts, "channel_type": "channel"}
}

// waitFor polls cond until it holds or the deadline passes. Tests wait on
// observable state, never on a fixed sleep.
func waitFor(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// verifyFlipByte returns s with the byte at i replaced by a different one of the
// same kind (a digit stays a digit, a hex letter a hex letter).
func verifyFlipByte(s string, i int) string {
	b := []byte(s)
	switch c := b[i]; {
	case c == '9':
		b[i] = '8'
	case c >= '0' && c < '9':
		b[i] = c + 1
	case c == 'f':
		b[i] = 'e'
	default:
		b[i] = c + 1
	}
	return string(b)
}
