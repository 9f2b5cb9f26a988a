package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/testreq"
)

// The operator console in a real browser (Debian's chromium, driven over
// the DevTools protocol by chromedp) against a real `ackd serve` and a
// hand-run `ackd sweep --once`: search, a row's attempts, discard, retry,
// pause and resume, replay, and a POST without the page's token.
//
// ACKD_TEST_CHROMIUM names the browser (.ci/with-chromium.sh sets it);
// without it, chromium on PATH; without either the test skips locally and
// fails in CI. ACKD_CONSOLE_SCREENSHOTS=DIR also writes the screenshots
// there (docs/img for the how-to page).

const consolePassword = "e2e-console-password"

// chromiumPath is the browser the test drives, or "".
func chromiumPath() string {
	if p := os.Getenv("ACKD_TEST_CHROMIUM"); p != "" {
		return p
	}
	p, _ := exec.LookPath("chromium")
	return p
}

// keyHandler is the team's forward handler: it records each request's
// Idempotency-Key, and answers 400 (a permanent failure) to keys that
// start with EvFAIL while failing is set.
type keyHandler struct {
	srv     *httptest.Server
	failing atomic.Bool
	mu      sync.Mutex
	keys    []string
}

func newKeyHandler(t *testing.T) *keyHandler {
	h := &keyHandler{}
	h.failing.Store(true)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		h.mu.Lock()
		h.keys = append(h.keys, key)
		h.mu.Unlock()
		if h.failing.Load() && strings.HasPrefix(key, "EvFAIL") {
			http.Error(w, "no such customer", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *keyHandler) seen(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, k := range h.keys {
		if k == key {
			n++
		}
	}
	return n
}

// consoleRig is a daemon with a console, a handler, and a browser tab.
type consoleRig struct {
	t        *testing.T
	r        *rig
	h        *keyHandler
	slackURL string
	console  string // http://127.0.0.1:port
	env      []string
	config   string
	shots    []string // where each screenshot goes
	tab      context.Context
	console_ struct {
		mu   sync.Mutex
		msgs []string
	}
}

func TestConsoleInChromium(t *testing.T) {
	chromium := chromiumPath()
	testreq.Need(t, chromium != "", "no Chromium: install chromium (.ci/with-chromium.sh) or set ACKD_TEST_CHROMIUM")
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 31))
	dir := t.TempDir()
	api := fakeslack.New(t, "xoxb-e2e-console")
	h := newKeyHandler(t)
	addr, consoleAddr := freeAddr(t, rng), freeAddr(t, rng)
	cfgPath := filepath.Join(dir, "ackd.toml")
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval    = "100ms"
lease       = "3s"
backoff     = "100ms"

[slack]
api_url = %q

[console]
listen = %q

[[route]]
name   = "greet"
event  = "app_mention"
effect = "forward"
timeout = "2s"
url    = %q

[[route]]
name   = "audit"
event  = "app_mention"
effect = "forward"
timeout = "2s"
url    = %q
`, addr, filepath.Join(dir, "ackd.db"), api.URL(), consoleAddr, h.srv.URL+"/greet", h.srv.URL+"/audit")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"SLACK_SIGNING_SECRET": boltSecret, "ACKD_CONSOLE_PASSWORD": consolePassword}
	r := newRig(t, ackdBin, dir, cfgPath, addr, secrets)
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	c := &consoleRig{t: t, r: r, h: h, slackURL: "http://" + addr + "/slack/events", console: "http://" + consoleAddr, env: r.env, config: cfgPath}
	c.shots = []string{t.TempDir()}
	if d := os.Getenv("ACKD_CONSOLE_SCREENSHOTS"); d != "" {
		c.shots = append(c.shots, d)
	}

	// One browser, one tab, for every step.
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))...)
	defer cancel()
	tab, cancel := chromedp.NewContext(alloc)
	defer cancel()
	tab, cancel = context.WithTimeout(tab, 3*time.Minute)
	defer cancel()
	c.tab = tab
	auth := base64.StdEncoding.EncodeToString([]byte("ackd:" + consolePassword))
	if _, err := chromedp.Call(tab, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Basic " + auth}}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	messages := chromedp.Console(tab)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			c.console_.mu.Lock()
			c.console_.msgs = append(c.console_.msgs, m.String()+" ("+m.URL+")")
			c.console_.mu.Unlock()
		}
	}()

	// A failing event parks both its rows; another is delivered.
	c.send("EvFAIL1", "help <script>alert(1)</script>")
	c.send("EvOK1", "hello")
	waitUntil(t, "EvOK1 delivered on both routes", 20*time.Second, func() bool { return h.seen("EvOK1:greet") == 1 && h.seen("EvOK1:audit") == 1 })
	waitUntil(t, "EvFAIL1's rows parked", 20*time.Second, func() bool {
		_, body := c.get("/search?q=EvFAIL1")
		return strings.Count(body, `data-status="parked"`) == 2
	})

	c.sub("search for a parked event's id, open its row, read its attempts", func(t *testing.T) {
		c.do(chromedp.Navigate(c.console+"/"), chromedp.WaitVisible(chromedp.CSS(`form.bigsearch input[name="q"]`)))
		c.shot("console-overview.png")
		c.do(chromedp.SendKeys(chromedp.CSS(`form.bigsearch input[name="q"]`), "EvFAIL1"), chromedp.Submit(chromedp.CSS(`form.bigsearch input[name="q"]`)),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-status="parked"]`)))
		rows := run(c, chromedp.AttributesAll(chromedp.CSSAll(`tr[data-row-id]`)))
		if len(rows) != 2 {
			t.Fatalf("search EvFAIL1: %d rows, want 2", len(rows))
		}
		text := run(c, chromedp.Text(chromedp.CSS(`table.rows`)))
		if !strings.Contains(text, "<script>alert(1)</script>") {
			t.Errorf("the message text is not shown as text: %q", text)
		}
		c.shot("console-search.png")
		id := rows[0]["data-row-id"]
		c.do(chromedp.Click(chromedp.CSS(`tr[data-row-id="`+id+`"] a`)), chromedp.WaitVisible(chromedp.CSS(`[data-attempt="1"]`)))
		attempt := run(c, chromedp.Text(chromedp.CSS(`[data-attempt="1"]`)))
		if !strings.Contains(attempt, "parked") || !strings.Contains(attempt, "400") {
			t.Errorf("attempt 1 reads %q, want its outcome (parked) and its error (400)", attempt)
		}
		if n := len(run(c, chromedp.Nodes(chromedp.CSS(`[data-attempt]`), chromedp.AtLeast(0)))); n != 1 {
			t.Errorf("%d attempts shown, want 1", n)
		}
		c.shot("console-row.png")
	})

	greet, audit := c.rowID("EvFAIL1:greet"), c.rowID("EvFAIL1:audit")

	c.sub("discard one row, retry another", func(t *testing.T) {
		c.do(chromedp.Navigate(c.console+"/rows/"+greet), chromedp.Click(chromedp.CSS(`button[data-action="discard"]`)),
			chromedp.WaitVisible(chromedp.CSS(`h1 [data-status="discarded"]`)))
		h.failing.Store(false) // the handler is fixed: the retry goes through
		c.do(chromedp.Navigate(c.console+"/rows/"+audit), chromedp.Click(chromedp.CSS(`button[data-action="retry"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-flash]`)))
		waitUntil(t, "the retried row delivered", 20*time.Second, func() bool { return h.seen("EvFAIL1:audit") == 2 })
		waitUntil(t, "the retried row done", 20*time.Second, func() bool { return c.status(audit) == "done" })
		if c.status(greet) != "discarded" || h.seen("EvFAIL1:greet") != 1 {
			t.Fatalf("the discarded row: %s, delivered %d times", c.status(greet), h.seen("EvFAIL1:greet"))
		}
		c.do(chromedp.Navigate(c.console+"/rows/"+audit), chromedp.WaitVisible(chromedp.CSS(`[data-attempt="2"]`)))
		if a := run(c, chromedp.Text(chromedp.CSS(`[data-attempt="2"]`))); !strings.Contains(a, "done") {
			t.Errorf("attempt 2 reads %q, want done", a)
		}
	})

	c.sub("pause a route: acked, not delivered, not by a hand sweep either; then resume it", func(t *testing.T) {
		c.do(chromedp.Navigate(c.console+"/routes"), chromedp.Click(chromedp.CSS(`[data-route="greet"] button[data-action="pause"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-route="greet"][data-paused="true"]`)))
		if p := run(c, chromedp.AttributeValue(chromedp.CSS(`[data-route="audit"]`), "data-paused")); p.Value != "false" {
			t.Fatalf("audit data-paused=%q", p.Value)
		}
		c.shot("console-routes.png")
		c.send("EvPAUSE1", "while paused")
		waitUntil(t, "the other route delivered", 20*time.Second, func() bool { return h.seen("EvPAUSE1:audit") == 1 })
		// A hand-run sweep, with every credential it needs, leaves it too.
		cmd := exec.Command(ackdBin, "sweep", "--once", "--config", c.config)
		cmd.Env = c.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sweep --once: %v\n%s", err, out)
		}
		paused := c.rowID("EvPAUSE1:greet")
		if s := c.status(paused); s != "pending" || h.seen("EvPAUSE1:greet") != 0 {
			t.Fatalf("paused route's row: %s, delivered %d times", s, h.seen("EvPAUSE1:greet"))
		}
		c.do(chromedp.Navigate(c.console+"/routes"), chromedp.Click(chromedp.CSS(`[data-route="greet"] button[data-action="resume"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-route="greet"][data-paused="false"]`)))
		waitUntil(t, "the resumed route delivered", 20*time.Second, func() bool { return h.seen("EvPAUSE1:greet") == 1 })
	})

	c.sub("replay a done row: the handler sees a new Idempotency-Key", func(t *testing.T) {
		done := c.rowID("EvOK1:greet")
		c.do(chromedp.Navigate(c.console+"/rows/"+done), chromedp.Click(chromedp.CSS(`button[data-action="replay"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-flash]`)))
		loc := run(c, chromedp.Location())
		if !regexp.MustCompile(`/rows/\d+\?done=replay$`).MatchString(loc) || strings.Contains(loc, "/rows/"+done+"?") {
			t.Fatalf("after replay the browser is at %s, want the new row", loc)
		}
		waitUntil(t, "the replay delivered", 20*time.Second, func() bool { return h.seen("EvOK1:greet#r1") == 1 })
		if n := h.seen("EvOK1:greet"); n != 1 {
			t.Fatalf("the original key was delivered %d times", n)
		}
		if s := c.status(done); s != "done" {
			t.Fatalf("the original row is %s", s)
		}
	})

	c.sub("a POST without the page's token: 403, nothing changed", func(t *testing.T) {
		row := c.rowID("EvOK1:audit")
		for _, form := range []url.Values{{}, {"csrf": {"forged"}}} {
			req, _ := http.NewRequest(http.MethodPost, c.console+"/rows/"+row+"/replay", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.SetBasicAuth("ackd", consolePassword)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("POST with %v: %d, want 403", form, resp.StatusCode)
			}
		}
		req, _ := http.NewRequest(http.MethodPost, c.console+"/routes/pause", strings.NewReader("route=audit"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth("ackd", consolePassword)
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("pause without a token: %v %v", resp, err)
		}
		if _, body := c.get("/search?q=EvOK1:audit%23r1"); strings.Contains(body, "data-row-id") {
			t.Fatal("a replay was made by a POST without the token")
		}
		if _, body := c.get("/routes"); !strings.Contains(body, `data-route="audit" data-paused="false"`) {
			t.Fatal("audit was paused by a POST without the token")
		}
	})

	c.console_.mu.Lock()
	defer c.console_.mu.Unlock()
	if len(c.console_.msgs) > 0 {
		t.Errorf("the pages wrote to the browser console:\n%s", strings.Join(c.console_.msgs, "\n"))
	}
}

// send delivers an app_mention, signed, and wants it acked.
func (c *consoleRig) send(eventID, text string) {
	c.t.Helper()
	if code, body, _ := slackSend(c.t, c.slackURL, "application/json", mentionBody(eventID, text), time.Now().Unix(), nil); code != http.StatusOK {
		c.t.Fatalf("ack of %s: %d %s", eventID, code, body)
	}
}

// get reads a console page with Go's client.
func (c *consoleRig) get(path string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.console+path, nil)
	req.SetBasicAuth("ackd", consolePassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var rowAttrs = regexp.MustCompile(`data-row-id="(\d+)" data-status="(\w+)"`)

// rowID finds the row of an idempotency key through the console's search.
func (c *consoleRig) rowID(key string) string {
	c.t.Helper()
	_, body := c.get("/search?q=" + url.QueryEscape(key))
	m := rowAttrs.FindAllStringSubmatch(body, -1)
	if len(m) != 1 {
		c.t.Fatalf("search %s: %d rows\n%s", key, len(m), body)
	}
	return m[0][1]
}

// status reads a row's status from its page.
func (c *consoleRig) status(id string) string {
	c.t.Helper()
	_, body := c.get("/rows/" + id)
	m := rowAttrs.FindStringSubmatch(body)
	if m == nil {
		c.t.Fatalf("row %s: no status\n%s", id, body)
	}
	return m[2]
}

// stepTimeout bounds one browser step: a page that never shows what a
// step waits for fails that step, not the whole run.
const stepTimeout = 30 * time.Second

func (c *consoleRig) do(steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.tab, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(c.tab, chromedp.Location())
		c.t.Fatalf("browser (at %s): %v", loc, err)
	}
}

func run[T any](c *consoleRig, a chromedp.Action[T]) T {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.tab, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		c.t.Fatalf("browser: %v", err)
	}
	return v
}

// sub runs a step of the scenario as a subtest, its failures its own.
func (c *consoleRig) sub(name string, fn func(t *testing.T)) bool {
	parent := c.t
	defer func() { c.t = parent }()
	return parent.Run(name, func(t *testing.T) {
		c.t = t
		fn(t)
	})
}

// shot saves the page as name in each screenshot directory.
func (c *consoleRig) shot(name string) {
	c.t.Helper()
	png := run(c, chromedp.FullScreenshot(100))
	for _, d := range c.shots {
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
}
