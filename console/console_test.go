package console_test

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/console"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/internal/testreq"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/store/sqlite"
)

func TestMain(m *testing.M) { os.Exit(testreq.Main(m)) }

const password = "s3cret"

// engines runs fn on a SQLite file in t.TempDir() and on a PostgreSQL
// schema of its own (skipped locally without ACKD_TEST_POSTGRES_URL,
// failed in CI).
func engines(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		b, err := os.ReadFile("../schema.sql")
		if err != nil {
			t.Fatal(err)
		}
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ackd.db"), store.Options{Schema: string(b)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), pgtest.URL(t), store.Options{Schema: "-"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// logBuf is a concurrency-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// site is a console served on 127.0.0.1 over a real store.
type site struct {
	t    *testing.T
	st   store.Store
	url  string
	logs *logBuf
	csrf string
	c    *console.Console
}

func newSite(t *testing.T, st store.Store) *site {
	t.Helper()
	logs := &logBuf{}
	c, err := console.New(console.Options{Store: st, Password: password,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Routes: []console.Route{{Name: "greet", Match: "event app_mention", Effect: "log"}, {Name: "audit", Match: "event message", Effect: "forward"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	s := &site{t: t, st: st, url: srv.URL, logs: logs, c: c}
	_, body := s.get("/routes")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on /routes:\n%s", body)
	}
	s.csrf = m[1]
	return s
}

// noRedirect answers a 303 as it is.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (s *site) do(req *http.Request, auth bool) (*http.Response, string) {
	s.t.Helper()
	if auth {
		req.SetBasicAuth(console.User, password)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (s *site) get(path string) (int, string) {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+path, nil)
	resp, body := s.do(req, true)
	return resp.StatusCode, body
}

// post sends a form; csrf "" sends none. A form with the token and no
// nonce gets a fresh nonce for path (as a page just rendered would have).
func (s *site) post(path string, form url.Values) (*http.Response, string) {
	s.t.Helper()
	if form.Has("csrf") && !form.Has("nonce") {
		form = maps.Clone(form)
		form.Set("nonce", s.c.NonceFor(path))
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return s.do(req, true)
}

func (s *site) form(kv ...string) url.Values {
	v := url.Values{"csrf": {s.csrf}}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// record commits one event with a row per route; text is the message.
func record(t *testing.T, st store.Store, eventID, text string, routes ...string) {
	t.Helper()
	in := store.Intent{EventID: eventID, EventType: "app_mention"}
	for _, r := range routes {
		in.Rows = append(in.Rows, store.NewRow{Key: eventID + ":" + r, Effect: "log",
			Payload: fmt.Sprintf(`{"route":%q,"source":"event","params":{"response_url":"https://hooks.slack.com/actions/T1/123/SECRETPATH"},"facts":{"event_id":%q,"channel":"C1","ts":"1700000000.000100","text":%q},"raw":{"token":"VERIFTOKEN","event":{"text":%q}}}`, r, eventID, text, text)})
	}
	if _, err := st.RecordIntent(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

// park claims every due row and fails it for good.
func park(t *testing.T, st store.Store) {
	t.Helper()
	rows, err := st.Claim(context.Background(), "park", 100, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, err := st.Fail(context.Background(), r.ID, "park", store.Failure{Kind: store.FailPermanent, Msg: "handler said 404 <b>not found</b>", Attempt: store.AttemptNote{Status: "404"}}); err != nil {
			t.Fatal(err)
		}
	}
}

func rowByKey(t *testing.T, st store.Store, key string) store.Row {
	t.Helper()
	r, err := st.GetByKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestConsole(t *testing.T) {
	engines(t, func(t *testing.T, st store.Store) {
		s := newSite(t, st)
		record(t, st, "EvPARK", "<script>alert(1)</script>", "greet")
		park(t, st)
		record(t, st, "EvPEND", "hello", "greet", "audit")
		parked := rowByKey(t, st, "EvPARK:greet")
		pending := rowByKey(t, st, "EvPEND:greet")

		t.Run("no password, a wrong one, or another user: 401", func(t *testing.T) {
			for _, auth := range []func(*http.Request){
				func(*http.Request) {},
				func(r *http.Request) { r.SetBasicAuth(console.User, "wrong") },
				func(r *http.Request) { r.SetBasicAuth("admin", password) },
			} {
				req, _ := http.NewRequest(http.MethodGet, s.url+"/", nil)
				auth(req)
				resp, _ := s.do(req, false)
				if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Basic") {
					t.Fatalf("status %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
				}
			}
		})

		t.Run("the overview counts rows and has the search form", func(t *testing.T) {
			code, body := s.get("/")
			for _, want := range []string{`<form action="/search"`, `name="q"`, `data-count="parked">1<`, `data-count="pending">2<`, `data-route-counts="greet"`} {
				if !strings.Contains(body, want) {
					t.Errorf("overview lacks %q", want)
				}
			}
			if code != http.StatusOK {
				t.Fatalf("status %d:\n%s", code, body)
			}
		})

		t.Run("an empty search says what to type, not an error", func(t *testing.T) {
			for _, q := range []string{"/search", "/search?q=", "/search?q=+++"} {
				code, body := s.get(q)
				if code != http.StatusOK || !strings.Contains(body, "data-empty-query") {
					t.Fatalf("%s: %d\n%s", q, code, body)
				}
			}
		})

		t.Run("a search by event id lists its rows with their status and links", func(t *testing.T) {
			_, body := s.get("/search?q=EvPEND")
			for _, r := range []store.Row{pending, rowByKey(t, st, "EvPEND:audit")} {
				want := fmt.Sprintf(`data-row-id="%d" data-status="pending"`, r.ID)
				if !strings.Contains(body, want) || !strings.Contains(body, fmt.Sprintf(`href="/rows/%d"`, r.ID)) {
					t.Fatalf("search lacks %s and its link:\n%s", want, body)
				}
			}
			if strings.Contains(body, fmt.Sprintf(`data-row-id="%d"`, parked.ID)) {
				t.Fatal("search shows a row of another event")
			}
			_, body = s.get("/search?q=nothing-like-it")
			if !strings.Contains(body, "data-no-rows") {
				t.Fatalf("no-match search:\n%s", body)
			}
		})

		t.Run("Slack's text is escaped: a script renders as text", func(t *testing.T) {
			for _, path := range []string{"/search?q=EvPARK", fmt.Sprintf("/rows/%d", parked.ID)} {
				_, body := s.get(path)
				if strings.Contains(body, "<script>alert(1)</script>") || strings.Contains(body, "<b>not found</b>") {
					t.Fatalf("%s renders Slack's markup as markup:\n%s", path, body)
				}
				if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
					t.Fatalf("%s does not show the text escaped:\n%s", path, body)
				}
			}
		})

		t.Run("a row's page: the row, its receipt, its payload masked, its actions", func(t *testing.T) {
			code, body := s.get(fmt.Sprintf("/rows/%d", parked.ID))
			if code != http.StatusOK {
				t.Fatalf("status %d\n%s", code, body)
			}
			for _, want := range []string{`data-receipt="EvPARK"`, `data-action="retry"`, `data-action="discard"`, `data-action="replay"`, `data-attempt="1"`,
				"https://hooks.slack.com/(redacted)", `&#34;token&#34;: &#34;(redacted)&#34;`, "handler said 404"} {
				if !strings.Contains(body, want) {
					t.Errorf("row page lacks %q", want)
				}
			}
			for _, secret := range []string{"SECRETPATH", "VERIFTOKEN"} {
				if strings.Contains(body, secret) {
					t.Errorf("row page shows %s", secret)
				}
			}
			_, body = s.get(fmt.Sprintf("/rows/%d", pending.ID))
			if !strings.Contains(body, `data-action="discard"`) || strings.Contains(body, `data-action="retry"`) || strings.Contains(body, `data-action="replay"`) {
				t.Errorf("a pending row's actions are not discard alone:\n%s", body)
			}
		})

		t.Run("the attempt timeline: each attempt with its outcome, status and error", func(t *testing.T) {
			_, body := s.get(fmt.Sprintf("/rows/%d", parked.ID))
			m := regexp.MustCompile(`(?s)<li data-attempt="1">(.*?)</li>`).FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no attempt 1:\n%s", body)
			}
			for _, want := range []string{"parked", "status 404", "handler said 404 &lt;b&gt;not found&lt;/b&gt;"} {
				if !strings.Contains(m[1], want) {
					t.Errorf("attempt 1 lacks %q: %s", want, m[1])
				}
			}
			if strings.Contains(body, `data-attempt="2"`) {
				t.Error("a second attempt shown")
			}
		})

		t.Run("a bad or unknown row id: 404 page", func(t *testing.T) {
			for _, path := range []string{"/rows/abc", "/rows/0", "/rows/-3", "/rows/999999", "/nowhere"} {
				if code, body := s.get(path); code != http.StatusNotFound || !strings.Contains(body, "data-error") {
					t.Errorf("%s: %d\n%s", path, code, body)
				}
			}
		})

		t.Run("a POST without the token, or with a wrong one: 403, nothing changed", func(t *testing.T) {
			for _, form := range []url.Values{{}, {"csrf": {"0000"}}, {"csrf": {s.csrf + "0"}}} {
				resp, _ := s.post(fmt.Sprintf("/rows/%d/discard", parked.ID), form)
				if resp.StatusCode != http.StatusForbidden {
					t.Fatalf("status %d, want 403", resp.StatusCode)
				}
			}
			if r := rowByKey(t, st, "EvPARK:greet"); r.Status != store.StatusParked {
				t.Fatalf("row is %s after refused POSTs", r.Status)
			}
			form := url.Values{"verb": {"discard"}, "route": {"greet"}, "status": {"parked"}}
			if resp, _ := s.post("/bulk", form); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("bulk without a token: %d", resp.StatusCode)
			}
			if resp, _ := s.post("/routes/pause", url.Values{"route": {"greet"}}); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("pause without a token: %d", resp.StatusCode)
			}
			if r := rowByKey(t, st, "EvPARK:greet"); r.Status != store.StatusParked {
				t.Fatalf("row is %s after refused POSTs", r.Status)
			}
		})

		t.Run("discard, then retry: 303 back, the row moves, the log says who", func(t *testing.T) {
			resp, _ := s.post(fmt.Sprintf("/rows/%d/discard", parked.ID), s.form())
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != fmt.Sprintf("/rows/%d?done=discard", parked.ID) {
				t.Fatalf("discard: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if r := rowByKey(t, st, "EvPARK:greet"); r.Status != store.StatusDiscarded {
				t.Fatalf("after discard: %s", r.Status)
			}
			_, body := s.get(fmt.Sprintf("/rows/%d?done=discard", parked.ID))
			if !strings.Contains(body, "data-flash") || !strings.Contains(body, `data-status="discarded"`) {
				t.Fatalf("page after discard:\n%s", body)
			}
			resp, _ = s.post(fmt.Sprintf("/rows/%d/retry", parked.ID), s.form())
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("retry: %d", resp.StatusCode)
			}
			if r := rowByKey(t, st, "EvPARK:greet"); r.Status != store.StatusPending {
				t.Fatalf("after retry: %s", r.Status)
			}
			logs := s.logs.String()
			for _, want := range []string{`"msg":"console: row discarded"`, `"msg":"console: row retried"`, `"remote":"127.0.0.1:`, fmt.Sprintf(`"row":%d`, parked.ID)} {
				if !strings.Contains(logs, want) {
					t.Errorf("log lacks %s:\n%s", want, logs)
				}
			}
		})

		t.Run("an action that does not apply: 409, nothing changed", func(t *testing.T) {
			resp, body := s.post(fmt.Sprintf("/rows/%d/retry", pending.ID), s.form())
			if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "nothing was changed") {
				t.Fatalf("retry of a pending row: %d\n%s", resp.StatusCode, body)
			}
			resp, _ = s.post(fmt.Sprintf("/rows/%d/explode", pending.ID), s.form())
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("unknown action: %d", resp.StatusCode)
			}
			if r := rowByKey(t, st, "EvPEND:greet"); r.Status != store.StatusPending || r.Attempts != 0 {
				t.Fatalf("row changed: %+v", r)
			}
		})

		t.Run("routes: each with data-route, data-paused and its button", func(t *testing.T) {
			_, body := s.get("/routes")
			for _, want := range []string{`data-route="greet" data-paused="false"`, `data-route="audit" data-paused="false"`, `data-action="pause"`} {
				if !strings.Contains(body, want) {
					t.Errorf("routes lacks %q:\n%s", want, body)
				}
			}
			resp, body := s.post("/routes/pause", s.form("route", "nosuch"))
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "not a configured route") {
				t.Fatalf("pause of an unknown route: %d\n%s", resp.StatusCode, body)
			}
			resp, _ = s.post("/routes/pause", s.form("route", ""))
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("pause of an empty route: %d", resp.StatusCode)
			}
		})

		t.Run("pause and resume a route: 303 back, the state in the database, who paused it", func(t *testing.T) {
			resp, _ := s.post("/routes/pause", s.form("route", "greet"))
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/routes?done=pause" {
				t.Fatalf("pause: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			_, body := s.get("/routes")
			if !strings.Contains(body, `data-route="greet" data-paused="true"`) || !strings.Contains(body, `data-action="resume"`) ||
				!strings.Contains(body, `data-route="audit" data-paused="false"`) {
				t.Fatalf("routes after pause:\n%s", body)
			}
			paused, err := st.PausedRoutes(context.Background())
			if err != nil || len(paused) != 1 || paused[0].Route != "greet" || !strings.Contains(paused[0].By, "127.0.0.1") {
				t.Fatalf("PausedRoutes: %+v %v", paused, err)
			}
			if _, body := s.get("/"); !strings.Contains(body, `data-paused-route="greet"`) {
				t.Fatalf("the overview does not list the paused route:\n%s", body)
			}
			resp, _ = s.post("/routes/pause", s.form("route", "greet"))
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/routes?done=nochange" {
				t.Fatalf("pause again: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			resp, _ = s.post("/routes/resume", s.form("route", "greet"))
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/routes?done=resume" {
				t.Fatalf("resume: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if paused, err := st.PausedRoutes(context.Background()); err != nil || len(paused) != 0 {
				t.Fatalf("after resume: %+v %v", paused, err)
			}
			if logs := s.logs.String(); !strings.Contains(logs, `"msg":"console: route paused"`) || !strings.Contains(logs, `"msg":"console: route resumed"`) {
				t.Errorf("no log lines for pause and resume:\n%s", logs)
			}
		})

		t.Run("bulk: empty or unknown filters are refused; the count comes first, then the change", func(t *testing.T) {
			park(t, st) // EvPARK:greet (retried), EvPEND:greet and EvPEND:audit
			for _, q := range []string{"verb=discard&route=", "verb=discard&route=nosuch", "verb=explode&route=greet",
				"verb=discard&route=greet&status=done", "verb=replay&route=greet", "verb=retry&route=greet&since=yesterday",
				"verb=discard&route=greet&since=2h"} {
				code, body := s.get("/bulk?" + q)
				if code != http.StatusBadRequest || !strings.Contains(body, "data-refused") {
					t.Errorf("/bulk?%s: %d\n%s", q, code, body)
				}
			}
			_, body := s.get("/bulk?verb=discard&route=greet&status=parked")
			if !strings.Contains(body, `data-bulk-count="2"`) || !strings.Contains(body, `data-action="bulk-discard"`) {
				t.Fatalf("bulk preview:\n%s", body)
			}
			if n := countStatus(t, st, store.StatusParked); n != 3 {
				t.Fatalf("the preview changed rows: %d parked", n)
			}
			resp, _ := s.post("/bulk", s.form("verb", "discard", "route", "greet", "status", "parked", "expect", "2"))
			// The count of the preview is what the POST carries: the undo
			// below previews first too.
			if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "changed=2") {
				t.Fatalf("bulk discard: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if n := countStatus(t, st, store.StatusParked); n != 1 {
				t.Fatalf("after the bulk discard of greet: %d parked, want audit's 1", n)
			}
			resp, _ = s.post("/bulk", previewed(t, s, "verb=retry&route=greet&status=discarded&since=1h"))
			if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "changed=2") {
				t.Fatalf("bulk retry of the discarded: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if !strings.Contains(s.logs.String(), `"action":"bulk discard"`) {
				t.Errorf("no log line for the bulk discard:\n%s", s.logs)
			}
		})

		t.Run("replay a done row: a new pending row keyed #r1, the original as it was", func(t *testing.T) {
			record(t, st, "EvDONE", "done", "greet")
			r := rowByKey(t, st, "EvDONE:greet")
			claimed, err := st.Claim(context.Background(), "done", 100, time.Minute, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range claimed {
				if c.ID == r.ID {
					if held, err := st.Complete(context.Background(), c.ID, "done", "", nil); err != nil || !held {
						t.Fatal(held, err)
					}
				}
			}
			if _, body := s.get(fmt.Sprintf("/rows/%d", r.ID)); !strings.Contains(body, `data-action="replay"`) || strings.Contains(body, `data-action="retry"`) {
				t.Fatalf("a done row's actions:\n%s", body)
			}
			resp, _ := s.post(fmt.Sprintf("/rows/%d/replay", r.ID), s.form())
			replayed := rowByKey(t, st, "EvDONE:greet#r1")
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != fmt.Sprintf("/rows/%d?done=replay", replayed.ID) {
				t.Fatalf("replay: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if replayed.Status != store.StatusPending || replayed.Payload != r.Payload || replayed.Effect != r.Effect {
				t.Fatalf("the replayed row: %+v", replayed)
			}
			if orig := rowByKey(t, st, "EvDONE:greet"); orig.Status != store.StatusDone {
				t.Fatalf("the original is %s", orig.Status)
			}
			resp, _ = s.post(fmt.Sprintf("/rows/%d/replay", replayed.ID), s.form())
			if resp.StatusCode != http.StatusConflict {
				t.Fatalf("replay of a pending row: %d, want 409", resp.StatusCode)
			}
			if !strings.Contains(s.logs.String(), `"new_key":"EvDONE:greet#r1"`) {
				t.Errorf("no log line for the replay:\n%s", s.logs)
			}
			_, body := s.get("/bulk?verb=replay&route=greet&status=done&since=1h")
			if !strings.Contains(body, `data-bulk-count="1"`) {
				t.Fatalf("bulk replay preview:\n%s", body)
			}
			resp, _ = s.post("/bulk", previewed(t, s, "verb=replay&route=greet&status=done&since=1h"))
			if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "changed=1") {
				t.Fatalf("bulk replay: %d %q", resp.StatusCode, resp.Header.Get("Location"))
			}
			if r := rowByKey(t, st, "EvDONE:greet#r2"); r.Status != store.StatusPending {
				t.Fatalf("bulk replay made %+v", r)
			}
		})
	})
}

// previewed is the form a bulk preview (GET /bulk?query) renders for its
// button, as a browser would send it: the filter, the window and count the
// preview fixed, and the form's nonce.
func previewed(t *testing.T, s *site, query string) url.Values {
	t.Helper()
	_, body := s.get("/bulk?" + query)
	m := regexp.MustCompile(`(?s)<form method="post" action="/bulk">(.*?)</form>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no bulk button on /bulk?%s:\n%s", query, body)
	}
	v := url.Values{}
	for _, in := range regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`).FindAllStringSubmatch(m[1], -1) {
		v.Set(in[1], html.UnescapeString(in[2]))
	}
	return v
}

func countStatus(t *testing.T, st store.Store, status string) int {
	t.Helper()
	rows, err := st.List(context.Background(), status, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}
