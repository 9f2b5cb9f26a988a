package console_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/console"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func guarded(t *testing.T) (*console.Console, *clock, *logBuf) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ackd.db"), store.Options{Schema: schema(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	logs := &logBuf{}
	c, err := console.New(console.Options{Store: st, Password: password, Now: clk.Now, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk, logs
}

// login is GET / from addr with password pass ("" sends no credentials).
func login(c *console.Console, addr, pass string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = addr
	if pass != "" {
		r.SetBasicAuth(console.User, pass)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

func TestConsoleLoginGuard(t *testing.T) {
	t.Run("five wrong passwords, then 429 with Retry-After even for the right one; another address gets in at once", func(t *testing.T) {
		c, clk, logs := guarded(t)
		const guesser = "192.0.2.7:40000"
		for i := range 5 {
			if w := login(c, guesser, fmt.Sprintf("guess%d", i)); w.Code != http.StatusUnauthorized {
				t.Fatalf("guess %d: %d, want 401", i, w.Code)
			}
		}
		w := login(c, guesser, password)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("after 5 failures, the right password: %d Retry-After %q, want 429 and 1", w.Code, w.Header().Get("Retry-After"))
		}
		if w := login(c, "192.0.2.8:40001", password); w.Code != http.StatusOK {
			t.Fatalf("the right password from another address: %d, want 200", w.Code)
		}
		clk.Advance(time.Second)
		if w := login(c, guesser, "guess5"); w.Code != http.StatusUnauthorized {
			t.Fatalf("a guess after the wait: %d, want 401 (its password checked)", w.Code)
		}
		if w := login(c, guesser, password); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
			t.Fatalf("after a sixth failure: %d Retry-After %q, want 429 and 2 (the wait doubles)", w.Code, w.Header().Get("Retry-After"))
		}
		clk.Advance(2 * time.Second)
		if w := login(c, guesser, password); w.Code != http.StatusOK {
			t.Fatalf("the right password after the wait: %d", w.Code)
		}
		if w := login(c, guesser, "guess6"); w.Code != http.StatusUnauthorized {
			t.Fatalf("a success clears the address's failures: %d", w.Code)
		}
		l := logs.String()
		if !strings.Contains(l, `"msg":"console: failed login"`) || !strings.Contains(l, `"remote":"192.0.2.7:40000"`) {
			t.Fatalf("the log lacks the failed logins with their address:\n%s", l)
		}
		if strings.Contains(l, password) {
			t.Fatal("the log has the password")
		}
	})

	t.Run("a flood of guesses grows the log by a summary, not a line each", func(t *testing.T) {
		c, clk, logs := guarded(t)
		for i := range 200 {
			login(c, "192.0.2.9:1", fmt.Sprintf("g%d", i))
			clk.Advance(10 * time.Millisecond)
		}
		if n := strings.Count(logs.String(), "\n"); n > 3 {
			t.Fatalf("%d log lines for 200 guesses in 2 s:\n%s", n, logs)
		}
		clk.Advance(time.Minute)
		login(c, "192.0.2.9:1", "again")
		if !strings.Contains(logs.String(), `"suppressed":`) {
			t.Fatalf("the next line does not count the lines left out:\n%s", logs)
		}
	})

	t.Run("a browser's first request without a password is not a guess", func(t *testing.T) {
		c, _, _ := guarded(t)
		for range 10 {
			if w := login(c, "192.0.2.10:1", ""); w.Code != http.StatusUnauthorized {
				t.Fatalf("no credentials: %d", w.Code)
			}
		}
		if w := login(c, "192.0.2.10:1", password); w.Code != http.StatusOK {
			t.Fatalf("then the password: %d", w.Code)
		}
	})

	t.Run("behind a proxy on loopback, each client is counted by its X-Forwarded-For", func(t *testing.T) {
		c, _, _ := guarded(t)
		for i := range 5 {
			login(c, "127.0.0.1:5000", fmt.Sprintf("g%d", i), "X-Forwarded-For", "198.51.100.1")
		}
		if w := login(c, "127.0.0.1:5000", password, "X-Forwarded-For", "198.51.100.1"); w.Code != http.StatusTooManyRequests {
			t.Fatalf("the guessing client behind the proxy: %d, want 429", w.Code)
		}
		if w := login(c, "127.0.0.1:5001", password, "X-Forwarded-For", "198.51.100.2"); w.Code != http.StatusOK {
			t.Fatalf("another client behind the proxy: %d, want 200", w.Code)
		}
		// A direct client does not choose its key by sending the header.
		for i := range 5 {
			login(c, "192.0.2.11:1", fmt.Sprintf("g%d", i), "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
		}
		if w := login(c, "192.0.2.11:1", password, "X-Forwarded-For", "203.0.113.99"); w.Code != http.StatusTooManyRequests {
			t.Fatalf("a direct client varying X-Forwarded-For: %d, want 429", w.Code)
		}
	})

	t.Run("an IPv6 client is one /64", func(t *testing.T) {
		c, _, _ := guarded(t)
		for i := range 5 {
			login(c, fmt.Sprintf("[2001:db8::%x]:1", i+1), "wrong")
		}
		if w := login(c, "[2001:db8::ff]:1", password); w.Code != http.StatusTooManyRequests {
			t.Fatalf("another address of the same /64: %d, want 429", w.Code)
		}
		if w := login(c, "[2001:db8:1::1]:1", password); w.Code != http.StatusOK {
			t.Fatalf("another /64: %d, want 200", w.Code)
		}
	})
}

func schema(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConsoleFormExpires(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "ackd.db"), store.Options{Schema: schema(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	c, err := console.New(console.Options{Store: st, Password: password, Now: clk.Now, Logger: slog.New(slog.DiscardHandler),
		Routes: []console.Route{{Name: "greet", Match: "event app_mention", Effect: "log"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	s := &site{t: t, st: st, url: srv.URL, logs: &logBuf{}, c: c}
	form := formOn(t, s, "/routes", "/routes/pause")
	form.Set("route", "greet")
	clk.Advance(10*time.Minute + time.Second)
	resp, body := s.post("/routes/pause", form)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "older than 10m0s") {
		t.Fatalf("a form older than its lifetime: %d\n%s", resp.StatusCode, body)
	}
	if paused, err := st.RoutePaused(t.Context(), "greet"); err != nil || paused {
		t.Fatalf("the expired form paused the route: %v %v", paused, err)
	}
	form = formOn(t, s, "/routes", "/routes/pause")
	form.Set("route", "greet")
	if resp, _ := s.post("/routes/pause", form); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a fresh form: %d", resp.StatusCode)
	}
}
