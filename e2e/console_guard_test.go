package e2e

import (
	"context"
	"fmt"
	"html"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
)

// A real `ackd serve` with its console (issue 38 §1 and §4): a client that
// keeps guessing the password is answered 429 before its password is
// checked, while the operator, from another address, gets in at once; the
// guesses are in the daemon's log with the address, rate-limited; and a
// form posted twice acts once.
//
// The two clients are two loopback source addresses (127.0.0.2 and
// 127.0.0.1) talking to the console on 127.0.0.1.

// clientFrom is an HTTP client whose connections come from the local
// address ip.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

type consoleClient struct {
	t    *testing.T
	http *http.Client
	base string
}

func (c consoleClient) do(method, path, pass string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, c.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.SetBasicAuth("ackd", pass)
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestConsoleResistsGuessingAndActsOnce(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 38))
	dir := t.TempDir()
	api := fakeslack.New(t, "xoxb-e2e-guard")
	h := newKeyHandler(t)
	h.failing.Store(false)
	addr, consoleAddr := freeAddr(t, rng), freeAddr(t, rng)
	cfgPath := filepath.Join(dir, "ackd.toml")
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval = "100ms"
lease    = "3s"
backoff  = "100ms"

[slack]
api_url = %q

[console]
listen = %q

[[route]]
name    = "greet"
event   = "app_mention"
effect  = "forward"
timeout = "2s"
url     = %q
`, addr, filepath.Join(dir, "ackd.db"), api.URL(), consoleAddr, h.srv.URL+"/greet")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, ackdBin, dir, cfgPath, addr, map[string]string{"SLACK_SIGNING_SECRET": boltSecret, "ACKD_CONSOLE_PASSWORD": consolePassword})
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + consoleAddr
	guesser := consoleClient{t, clientFrom("127.0.0.2"), base}
	operator := consoleClient{t, clientFrom("127.0.0.1"), base}
	// The source address must work on this machine's loopback (Linux
	// routes all of 127/8 there).
	if resp, _ := guesser.do(http.MethodGet, "/", consolePassword, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("the right password from 127.0.0.2: %d", resp.StatusCode)
	}

	t.Run("guesses from one address get 429 before the password is checked; another address gets in", func(t *testing.T) {
		guesser.t, operator.t = t, t
		for i := range 5 {
			if resp, _ := guesser.do(http.MethodGet, "/", fmt.Sprintf("guess-%d", i), nil); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("guess %d: %d, want 401", i, resp.StatusCode)
			}
		}
		// Even the right password waits now: it is not looked at.
		resp, body := guesser.do(http.MethodGet, "/", consolePassword, nil)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "too many failed logins") {
			t.Fatalf("after 5 guesses: %d Retry-After %q\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if resp, _ := operator.do(http.MethodGet, "/", consolePassword, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("the operator from another address: %d, want 200 at once", resp.StatusCode)
		}
		var logs strings.Builder
		for _, f := range r.logs() {
			b, _ := os.ReadFile(f)
			logs.Write(b)
		}
		l := logs.String()
		if !strings.Contains(l, "console: failed login") || !strings.Contains(l, "127.0.0.2:") {
			t.Fatalf("the daemon's log has no failed login with its address:\n%s", lastLines(l, 40))
		}
		if n := strings.Count(l, "console: failed login"); n > 2 {
			t.Fatalf("%d log lines for 5 guesses: not rate-limited\n%s", n, lastLines(l, 40))
		}
		if strings.Contains(l, "guess-") || strings.Contains(l, consolePassword) {
			t.Fatal("a password is in the log")
		}
	})

	t.Run("the same replay form posted twice replays once", func(t *testing.T) {
		operator.t = t
		if code, body, _ := slackSend(t, "http://"+addr+"/slack/events", "application/json", mentionBody("EvTWICE", "hi"), time.Now().Unix(), nil); code != http.StatusOK {
			t.Fatalf("ack: %d %s", code, body)
		}
		waitUntil(t, "EvTWICE delivered", 20*time.Second, func() bool { return h.seen("EvTWICE:greet") == 1 })
		_, body := operator.do(http.MethodGet, "/search?q=EvTWICE:greet", consolePassword, nil)
		m := regexp.MustCompile(`data-row-id="(\d+)" data-status="done"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no done row for EvTWICE:greet:\n%s", body)
		}
		action := "/rows/" + m[1] + "/replay"
		_, page := operator.do(http.MethodGet, "/rows/"+m[1], consolePassword, nil)
		fm := regexp.MustCompile(`(?s)<form method="post" action="` + regexp.QuoteMeta(action) + `">(.*?)</form>`).FindStringSubmatch(page)
		if fm == nil {
			t.Fatalf("no replay form:\n%s", page)
		}
		form := url.Values{}
		for _, in := range regexp.MustCompile(`name="([a-z]+)" value="([^"]*)"`).FindAllStringSubmatch(fm[1], -1) {
			form.Set(in[1], html.UnescapeString(in[2]))
		}
		// A double click: both POSTs at once.
		codes := make(chan int, 2)
		for range 2 {
			go func() {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+action, strings.NewReader(form.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.SetBasicAuth("ackd", consolePassword)
				resp, err := operator.http.Do(req)
				if err != nil {
					codes <- 0
					return
				}
				resp.Body.Close()
				codes <- resp.StatusCode
			}()
		}
		a, b := <-codes, <-codes
		if min(a, b) != http.StatusSeeOther || max(a, b) != http.StatusConflict {
			t.Fatalf("two POSTs of one form: %d and %d, want one 303 and one 409", a, b)
		}
		waitUntil(t, "the replay delivered", 20*time.Second, func() bool { return h.seen("EvTWICE:greet#r1") == 1 })
		if _, body := operator.do(http.MethodGet, "/search?q="+url.QueryEscape("EvTWICE:greet#r2"), consolePassword, nil); strings.Contains(body, "data-row-id") {
			t.Fatal("the second POST made a second replay")
		}
	})
}
