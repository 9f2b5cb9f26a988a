package daemon_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
)

// The [oauth] tests: the install flow over real HTTP against the fake
// Slack's authorize page and oauth.v2.access, a token per team at perform
// time, tokens sealed in the database file, uninstall, token rotation.

const (
	testClientID     = "111.222"
	testClientSecret = "client-secret-never-shown"
)

// testTokenKey is ACKD_TOKEN_KEY for the tests: 32 bytes, base64.
var testTokenKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))

type oauthEnv struct {
	*testServer
	fake *fakeslack.Server
	cfg  config.Config
}

// startOAuth runs ackd with [oauth] against a fake Slack whose authorize
// page and oauth.v2.access accept the test client. routes is appended to
// the config.
func startOAuth(t *testing.T, routes string, opts daemon.Options) *oauthEnv {
	t.Helper()
	fake := fakeslack.New(t, "xoxb-single-workspace-token")
	fake.EnableOAuth(testClientID, testClientSecret)
	api := strings.TrimSuffix(fake.URL(), "/")
	cfg := configFor(t, fmt.Sprintf(`
[sweep]
interval = "50ms"
[slack]
api_url = %q
[oauth]
client_id = %q
scopes = ["chat:write", "reactions:write"]
redirect_url = "https://ackd.example/slack/oauth_redirect"
authorize_url = "%s/oauth/v2/authorize"
`, fake.URL(), testClientID, api)+routes)
	opts.Secrets.ClientSecret = testClientSecret
	opts.Secrets.TokenKey = testTokenKey
	return &oauthEnv{testServer: startServer(t, cfg, opts), fake: fake, cfg: cfg}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func getNoFollow(t *testing.T, u string, cookies ...*http.Cookie) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// startInstall opens the install page: the redirect to the authorize page
// (checked) and the state cookie.
func (e *oauthEnv) startInstall(t *testing.T) (authorize *url.URL, cookie *http.Cookie) {
	t.Helper()
	resp := getNoFollow(t, e.URL+"/slack/install")
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("install page: %d, want 302", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	q := loc.Query()
	if !strings.HasSuffix(loc.Path, "/oauth/v2/authorize") || q.Get("redirect_uri") != "https://ackd.example/slack/oauth_redirect" ||
		q.Get("client_id") != testClientID || q.Get("scope") != "chat:write,reactions:write" || len(q.Get("state")) < 20 {
		t.Fatalf("authorize URL %s", loc)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "ackd_oauth_state" {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != q.Get("state") || !cookie.HttpOnly || !cookie.Secure {
		t.Fatalf("state cookie %+v for state %q", cookie, q.Get("state"))
	}
	return loc, cookie
}

// approve is the user approving on Slack's page: the fake answers with a
// redirect to redirect_uri carrying a code and the state; the query is what
// the browser brings back to ackd.
func (e *oauthEnv) approve(t *testing.T, authorize *url.URL, g fakeslack.Grant) url.Values {
	t.Helper()
	e.fake.NextInstall(g)
	resp := getNoFollow(t, authorize.String())
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("fake authorize: %d", resp.StatusCode)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return back.Query()
}

func (e *oauthEnv) redirect(t *testing.T, q url.Values, cookie *http.Cookie) *http.Response {
	t.Helper()
	if cookie == nil {
		return getNoFollow(t, e.URL+"/slack/oauth_redirect?"+q.Encode())
	}
	return getNoFollow(t, e.URL+"/slack/oauth_redirect?"+q.Encode(), cookie)
}

// install runs the whole flow for g and checks it finished.
func (e *oauthEnv) install(t *testing.T, g fakeslack.Grant) {
	t.Helper()
	loc, cookie := e.startInstall(t)
	if resp := e.redirect(t, e.approve(t, loc, g), cookie); resp.StatusCode != http.StatusOK {
		t.Fatalf("redirect: %d, want 200", resp.StatusCode)
	}
}

func team(id string) fakeslack.Grant {
	return fakeslack.Grant{TeamID: id, TeamName: "Team " + id, BotUserID: "U" + id + "BOT", BotID: "B" + id,
		Scope: "chat:write,reactions:write", InstallerUserID: "U" + id + "ADMIN"}
}

// teamEvent is an app_mention delivered to installation team (with Slack's
// authorizations entry for it).
func teamEvent(id, teamID, enterprise string, orgWide bool) []byte {
	env := map[string]any{
		"token": "tok", "team_id": teamID, "api_app_id": "A0FAKEAPP", "type": "event_callback",
		"event_id": id, "event_time": 1700000000, "context_team_id": teamID,
		"event": map[string]any{"type": "app_mention", "user": "U1", "text": "hi", "ts": "1700000000.000100",
			"channel": "C" + teamID, "event_ts": "1700000000.000100"},
		"authorizations": []map[string]any{{"enterprise_id": enterprise, "team_id": teamID, "user_id": "UBOT",
			"is_bot": true, "is_enterprise_install": orgWide}},
	}
	if enterprise != "" {
		env["enterprise_id"] = enterprise
		env["is_enterprise_install"] = orgWide
	}
	b, _ := json.Marshal(env)
	return b
}

const replyRoute = `
[[route]]
name   = "reply"
event  = "app_mention"
effect = "post"
text   = "hello {{.Team}}"
`

func TestOAuthInstallFlow(t *testing.T) {
	t.Parallel()
	e := startOAuth(t, replyRoute, daemon.Options{})

	e.install(t, team("T1"))
	calls := e.fake.CallsTo("oauth.v2.access")
	if len(calls) != 1 {
		t.Fatalf("oauth.v2.access called %d times, want 1", len(calls))
	}
	p := calls[0].Params
	if !strings.HasPrefix(p.Get("code"), "code-") || p.Get("client_id") != testClientID || p.Get("client_secret") != testClientSecret ||
		p.Get("redirect_uri") != "https://ackd.example/slack/oauth_redirect" {
		t.Fatalf("oauth.v2.access params %v", p)
	}
	e.install(t, team("T2"))
	e.install(t, fakeslack.Grant{EnterpriseID: "E1", EnterpriseName: "Org", EnterpriseInstall: true,
		BotUserID: "UE1BOT", BotID: "BE1", Scope: "chat:write", InstallerUserID: "UE1ADMIN"})
	if n := e.count(`SELECT count(*) FROM ackd_installations`); n != 3 {
		t.Fatalf("%d installations stored, want 3", n)
	}
	var botID string
	if err := e.db().QueryRow(`SELECT bot_id FROM ackd_installations WHERE install_key = 'T2'`).Scan(&botID); err != nil || botID != "BT2" {
		t.Fatalf("T2's bot id %q (auth.test with its token): %v", botID, err)
	}

	t.Run("each team's events are posted with that team's token", func(t *testing.T) {
		for i, tm := range []string{"T1", "T2", "T1"} {
			if r := e.postEvent(teamEvent(fmt.Sprintf("EvTeam%d", i), tm, "", false)); r.Status != 200 {
				t.Fatalf("event: %d %s", r.Status, r.Body)
			}
		}
		waitFor(t, "three posts", 10*time.Second, func() bool { return len(e.fake.CallsTo("chat.postMessage")) >= 3 })
		for _, c := range e.fake.CallsTo("chat.postMessage") {
			want := strings.TrimPrefix(c.Params.Get("channel"), "C")
			if got := e.fake.KeyOf(c.Token); got != want || c.Params.Get("text") != "hello "+want {
				t.Errorf("post to %s with the token of %q (text %q)", c.Params.Get("channel"), got, c.Params.Get("text"))
			}
		}
	})

	t.Run("an org-wide install serves events from two of its workspaces", func(t *testing.T) {
		before := len(e.fake.CallsTo("chat.postMessage"))
		for i, ws := range []string{"T31", "T32"} {
			if r := e.postEvent(teamEvent(fmt.Sprintf("EvOrg%d", i), ws, "E1", true)); r.Status != 200 {
				t.Fatalf("event: %d", r.Status)
			}
		}
		waitFor(t, "two org posts", 10*time.Second, func() bool { return len(e.fake.CallsTo("chat.postMessage")) >= before+2 })
		for _, c := range e.fake.CallsTo("chat.postMessage")[before:] {
			if got := e.fake.KeyOf(c.Token); got != "E1" {
				t.Errorf("post to %s with the token of %q, want the org's E1", c.Params.Get("channel"), got)
			}
		}
	})
}

func TestOAuthStateRejected(t *testing.T) {
	t.Parallel()
	clock := &testClock{t: time.Now()}
	e := startOAuth(t, "", daemon.Options{Now: clock.Now})
	exchanges := func() int { return len(e.fake.CallsTo("oauth.v2.access")) }
	refused := func(t *testing.T, resp *http.Response) {
		t.Helper()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
		if n := exchanges(); n != 0 {
			t.Fatalf("oauth.v2.access called %d times for a rejected state", n)
		}
		if n := e.count(`SELECT count(*) FROM ackd_installations`); n != 0 {
			t.Fatalf("%d installations stored", n)
		}
	}
	loc, cookie := e.startInstall(t)
	q := e.approve(t, loc, team("T1"))

	t.Run("a forged state (not issued) with a matching cookie", func(t *testing.T) {
		f := url.Values{"code": {q.Get("code")}, "state": {"FORGEDSTATEFORGEDSTATE"}}
		refused(t, e.redirect(t, f, &http.Cookie{Name: "ackd_oauth_state", Value: "FORGEDSTATEFORGEDSTATE"}))
	})
	t.Run("a real state without the browser's cookie", func(t *testing.T) {
		refused(t, e.redirect(t, q, nil))
	})
	t.Run("a real state with another browser's cookie", func(t *testing.T) {
		_, other := e.startInstall(t)
		refused(t, e.redirect(t, q, other))
	})
	t.Run("an expired state", func(t *testing.T) {
		clock.Advance(11 * time.Minute)
		refused(t, e.redirect(t, q, cookie))
		clock.Advance(-11 * time.Minute)
	})
	t.Run("a reused state", func(t *testing.T) {
		loc, cookie := e.startInstall(t)
		q := e.approve(t, loc, team("T2"))
		if resp := e.redirect(t, q, cookie); resp.StatusCode != http.StatusOK {
			t.Fatalf("first use: %d", resp.StatusCode)
		}
		e.fake.AddCode("code-again", "", team("T3")) // a fresh code, the spent state
		q.Set("code", "code-again")
		resp := e.redirect(t, q, cookie)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("reuse: %d, want 400", resp.StatusCode)
		}
		if n := exchanges(); n != 1 {
			t.Fatalf("oauth.v2.access called %d times, want 1 (the first use only)", n)
		}
		if n := e.count(`SELECT count(*) FROM ackd_installations WHERE install_key = 'T3'`); n != 0 {
			t.Fatal("the reused state installed T3")
		}
	})
}

// testClock is a settable clock.
type testClock struct {
	mu  sync.Mutex
	t   time.Time
	off time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// encodings of a secret that a dump could show.
func encodings(s string) [][]byte {
	b := []byte(s)
	return [][]byte{b, []byte(hex.EncodeToString(b)), []byte(strings.ToUpper(hex.EncodeToString(b))),
		[]byte(base64.StdEncoding.EncodeToString(b)), []byte(base64.RawStdEncoding.EncodeToString(b)),
		[]byte(base64.URLEncoding.EncodeToString(b)), []byte(base64.RawURLEncoding.EncodeToString(b))}
}

func TestOAuthTokensSealedAtRest(t *testing.T) {
	t.Parallel()
	e := startOAuth(t, replyRoute, daemon.Options{})
	e.fake.SetTokenLife(time.Hour) // refresh tokens too
	e.install(t, team("T1"))
	e.install(t, team("T2"))
	if r := e.postEvent(teamEvent("EvSealed", "T1", "", false)); r.Status != 200 {
		t.Fatal(r.Status)
	}
	waitFor(t, "the post", 10*time.Second, func() bool { return len(e.fake.CallsTo("chat.postMessage")) == 1 })
	secrets := e.fake.IssuedSecrets()
	if len(secrets) != 4 {
		t.Fatalf("the fake issued %d secrets, want 2 tokens and 2 refresh tokens", len(secrets))
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if _, err := e.db().Exec(`VACUUM INTO ?`, copyPath); err != nil {
		t.Fatal(err)
	}
	files := []string{e.DB, e.DB + "-wal", copyPath}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if f == copyPath && !bytes.Contains(b, []byte("UT2ADMIN")) {
			t.Fatalf("%s does not even hold the team ids: the search looks at the wrong bytes", f)
		}
		for _, s := range append(secrets, testClientSecret) {
			for _, enc := range encodings(s) {
				if bytes.Contains(b, enc) {
					t.Errorf("%s holds a token in clear (%.12s…)", filepath.Base(f), enc)
				}
			}
		}
	}
}

func TestOAuthUninstall(t *testing.T) {
	t.Parallel()
	e := startOAuth(t, replyRoute, daemon.Options{})
	e.install(t, team("T1"))
	e.install(t, team("T2"))
	tok := e.fake.TokensOf("T1")[0]
	// T1's posts fail for now (Slack is down for it), so its rows wait.
	e.fake.Script("chat.postMessage", fakeslack.Status(503), fakeslack.Status(503))
	for i := range 2 {
		e.postEvent(teamEvent(fmt.Sprintf("EvPending%d", i), "T1", "", false))
	}
	waitFor(t, "two failed attempts", 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 1`) == 2
	})

	body, _ := json.Marshal(map[string]any{"token": "tok", "team_id": "T1", "api_app_id": "A0FAKEAPP", "type": "event_callback",
		"event_id": "EvUninstall", "event_time": time.Now().Unix(), "event": map[string]any{"type": "app_uninstalled", "event_ts": "1700000001.000000"},
		"authorizations": []map[string]any{{"team_id": "T1", "is_enterprise_install": false}}})
	cut := time.Now()
	if r := e.postEvent(body); r.Status != 200 {
		t.Fatalf("app_uninstalled: %d %s", r.Status, r.Body)
	}
	if n := e.count(`SELECT count(*) FROM outbox WHERE status = 'parked' AND last_error LIKE '%uninstalled%'`); n != 2 {
		t.Fatalf("%d rows parked 'uninstalled' when the answer came, want 2", n)
	}
	if n := e.count(`SELECT count(*) FROM ackd_installations WHERE install_key = 'T1'`); n != 0 {
		t.Fatal("the installation is still there")
	}
	// T1 again (no installation now): 200, the row waits; T2 still works.
	if r := e.postEvent(teamEvent("EvAfter", "T1", "", false)); r.Status != 200 {
		t.Fatalf("event after uninstall: %d", r.Status)
	}
	if r := e.postEvent(teamEvent("EvT2", "T2", "", false)); r.Status != 200 {
		t.Fatal(r.Status)
	}
	waitFor(t, "T2's post", 10*time.Second, func() bool {
		for _, c := range e.fake.CallsTo("chat.postMessage") {
			if e.fake.KeyOf(c.Token) == "T2" {
				return true
			}
		}
		return false
	})
	waitFor(t, "the row of the unknown team to wait", 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE idempotency_key = 'EvAfter:reply' AND status = 'pending' AND last_error LIKE 'not_installed%'`) == 1
	})
	for _, c := range e.fake.Calls() {
		if c.Token == tok && c.Time.After(cut) {
			t.Errorf("%s called with the uninstalled team's token after app_uninstalled", c.Method)
		}
	}
	// Counted after the answer was written.
	waitFor(t, "the event from the team with no installation to be counted", 5*time.Second, func() bool {
		return strings.Contains(getBody(t, e.URL+"/metrics"), "\nackd_oauth_unknown_team_events_total 1\n")
	})
}

func getBody(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return b.String()
}

func TestOAuthTokenRotation(t *testing.T) {
	t.Parallel()
	e := startOAuth(t, replyRoute, daemon.Options{})
	e.fake.SetTokenLife(3 * time.Second)
	e.install(t, team("T1"))

	// Events keep coming while tokens expire every 3 seconds.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			e.postEvent(teamEvent(fmt.Sprintf("EvRot%d", i), "T1", "", false))
		}
	})
	defer func() {
		if t.Failed() {
			t.Log(e.Logs.String())
		}
	}()
	waitFor(t, "three refreshes", 20*time.Second, func() bool { return len(e.fake.Refreshes()) >= 3 })
	close(stop)
	wg.Wait()
	waitFor(t, "every row done", 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE status != 'done'`) == 0
	})
	for _, r := range e.fake.Refreshes() {
		if !r.OK {
			t.Errorf("refresh with a spent or unknown refresh token %.10s…", r.RefreshToken)
		}
		if r.Age < r.Life/5 {
			t.Errorf("refreshed with %s of %s left: more than 80%% of the token's life", r.Life-r.Age, r.Life)
		}
		if r.Age >= r.Life {
			t.Errorf("refreshed %s after the token expired", r.Age-r.Life)
		}
	}
	if n := e.count(`SELECT count(*) FROM outbox WHERE last_error IS NOT NULL`); n != 0 {
		t.Errorf("%d rows had a failed attempt (an expired token used?)", n)
	}
	if n := len(e.fake.CallsTo("chat.postMessage")); n == 0 {
		t.Fatal("no posts")
	}
}

func TestOAuthRefreshRefused(t *testing.T) {
	t.Parallel()
	e := startOAuth(t, replyRoute, daemon.Options{})
	e.fake.SetTokenLife(2 * time.Second)
	e.install(t, team("T1"))
	e.fake.Script("oauth.v2.access", fakeslack.Err("invalid_refresh_token"))
	waitFor(t, "the refused refresh", 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM ackd_installations WHERE error LIKE '%invalid_refresh_token%'`) == 1
	})
	if r := e.postEvent(teamEvent("EvRefused", "T1", "", false)); r.Status != 200 {
		t.Fatal(r.Status)
	}
	waitFor(t, "the row parked with the reason", 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM outbox WHERE status = 'parked' AND last_error LIKE '%invalid_refresh_token%'`) == 1
	})
	if n := len(e.fake.CallsTo("chat.postMessage")); n != 0 {
		t.Fatalf("%d posts with an unusable installation", n)
	}
	if !strings.Contains(getBody(t, e.URL+"/metrics"), `ackd_oauth_token_refreshes_total{outcome="failed"} 1`) {
		t.Error("the refused refresh is not in ackd_oauth_token_refreshes_total")
	}
}

func TestOAuthTokensRevoked(t *testing.T) {
	t.Parallel()
	e := startOAuth(t, replyRoute, daemon.Options{})
	e.install(t, team("T1"))
	revoked := func(id string, bots []string) []byte {
		b, _ := json.Marshal(map[string]any{"token": "tok", "team_id": "T1", "api_app_id": "A0FAKEAPP", "type": "event_callback",
			"event_id": id, "event_time": time.Now().Unix(), "authorizations": []map[string]any{{"team_id": "T1"}},
			"event": map[string]any{"type": "tokens_revoked", "tokens": map[string]any{"oauth": []string{"UHUMAN"}, "bot": bots}}})
		return b
	}
	// A user's token revoked: the bot's token stays.
	if r := e.postEvent(revoked("EvRevUser", nil)); r.Status != 200 {
		t.Fatal(r.Status)
	}
	if n := e.count(`SELECT count(*) FROM ackd_installations`); n != 1 {
		t.Fatal("a user token's revocation removed the installation")
	}
	if r := e.postEvent(revoked("EvRevBot", []string{"UT1BOT"})); r.Status != 200 {
		t.Fatal(r.Status)
	}
	if n := e.count(`SELECT count(*) FROM ackd_installations`); n != 0 {
		t.Fatal("the bot token's revocation left the installation")
	}
}

func TestOAuthCommandUsesItsTeamsToken(t *testing.T) {
	t.Parallel()
	e := startOAuth(t, `
[[route]]
name    = "say"
command = "/say"
effect  = "post"
text    = "said {{.Text}}"
`, daemon.Options{})
	e.install(t, team("T1"))
	e.install(t, fakeslack.Grant{EnterpriseID: "E9", EnterpriseInstall: true, BotUserID: "UE9", BotID: "BE9", Scope: "chat:write"})
	for i, form := range []string{
		"team_id=T1&channel_id=CT1&user_id=U1&command=%2Fsay&text=one&trigger_id=1.2.a&response_url=http%3A%2F%2F127.0.0.1%3A1%2Fr",
		"team_id=T77&enterprise_id=E9&is_enterprise_install=true&channel_id=CE9&user_id=U1&command=%2Fsay&text=two&trigger_id=1.2.b&response_url=http%3A%2F%2F127.0.0.1%3A1%2Fr",
	} {
		if r := e.postForm("/slack/commands", []byte(form)); r.Status != 200 {
			t.Fatalf("command %d: %d", i, r.Status)
		}
	}
	waitFor(t, "two posts", 10*time.Second, func() bool { return len(e.fake.CallsTo("chat.postMessage")) == 2 })
	for _, c := range e.fake.CallsTo("chat.postMessage") {
		if want := strings.TrimPrefix(c.Params.Get("channel"), "C"); e.fake.KeyOf(c.Token) != want {
			t.Errorf("post to %s with %s's token", c.Params.Get("channel"), e.fake.KeyOf(c.Token))
		}
	}
}

func TestRedeliverPassthrough(t *testing.T) {
	t.Parallel()
	type seen struct{ path, query, cookie, host string }
	got := make(chan seen, 4)
	app := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Cookie("app-state")
		v := ""
		if c != nil {
			v = c.Value
		}
		got <- seen{r.URL.Path, r.URL.RawQuery, v, r.Host}
		http.SetCookie(w, &http.Cookie{Name: "app-state", Value: "s1", Path: "/"})
		http.Redirect(w, r, "https://slack.com/oauth/v2/authorize?state=s1", http.StatusFound)
	}))
	cfg := configFor(t, fmt.Sprintf(`
[redeliver]
passthrough = ["/slack/install", "/slack/oauth_redirect"]

[[route]]
name   = "app"
event  = "*"
effect = "redeliver"
url    = "%s/slack/events"
`, app))
	ts := startServer(t, cfg, daemon.Options{})
	resp := getNoFollow(t, ts.URL+"/slack/oauth_redirect?code=c1&state=s1", &http.Cookie{Name: "app-state", Value: "s1"})
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://slack.com/oauth/v2/authorize?state=s1" {
		t.Fatalf("answer %d %q: the app's redirect must come back untouched", resp.StatusCode, resp.Header.Get("Location"))
	}
	if c := resp.Cookies(); len(c) != 1 || c[0].Value != "s1" {
		t.Fatalf("the app's cookie did not come back: %v", resp.Header)
	}
	s := <-got
	if s.path != "/slack/oauth_redirect" || s.query != "code=c1&state=s1" || s.cookie != "s1" || !strings.HasPrefix(s.host, "127.0.0.1:") {
		t.Fatalf("the app saw %+v", s)
	}
	if r := getNoFollow(t, ts.URL+"/slack/elsewhere"); r.StatusCode != http.StatusNotFound {
		t.Fatalf("an unlisted path: %d, want 404", r.StatusCode)
	}
	if len(got) != 0 {
		t.Fatal("an unlisted path reached the app")
	}
}

func httptestServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
