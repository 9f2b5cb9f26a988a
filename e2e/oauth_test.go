package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
)

// Many workspaces with the real binary: installs through the install flow
// against the fake Slack, tokens that expire in seconds refreshed exactly
// once per expiry by whichever process holds the installation's lease — a
// daemon and a hand-run `ackd sweep --once` loop on SQLite, three replicas
// and the sweep loop on PostgreSQL, all busy — and `ackd installs list` on a
// copy of the database.

const (
	oauthClientID     = "e2e.client"
	oauthClientSecret = "e2e-client-secret"
)

var oauthTokenKey = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32))

func writeOAuthConfig(t *testing.T, path, addr, db, slackURL string) {
	t.Helper()
	api := strings.TrimSuffix(slackURL, "/")
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval     = "200ms"
lease        = "10s"
max_attempts = 20
backoff      = "100ms"
max_backoff  = "500ms"

[slack]
api_url = %q

[oauth]
client_id     = %q
scopes        = ["chat:write"]
redirect_url  = "https://ackd.example/slack/oauth_redirect"
authorize_url = "%s/oauth/v2/authorize"

[[route]]
name    = "reply"
event   = "app_mention"
effect  = "post"
text    = "hello {{.Team}}"
timeout = "2s"
`, addr, db, slackURL, oauthClientID, api)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

var noFollow = &http.Client{Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func getWith(t *testing.T, u string, cookies []*http.Cookie) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// installVia runs ackd's install flow at base for g: install page →
// Slack's (the fake's) authorize page → redirect with the code.
func installVia(t *testing.T, base string, fake *fakeslack.Server, g fakeslack.Grant) {
	t.Helper()
	resp := getWith(t, base+"/slack/install", nil)
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("install page: %d", resp.StatusCode)
	}
	fake.NextInstall(g)
	auth := getWith(t, resp.Header.Get("Location"), nil)
	back, err := url.Parse(auth.Header.Get("Location"))
	if err != nil || auth.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %d %v", auth.StatusCode, err)
	}
	if done := getWith(t, base+"/slack/oauth_redirect?"+back.RawQuery, resp.Cookies()); done.StatusCode != http.StatusOK {
		t.Fatalf("redirect: %d", done.StatusCode)
	}
}

func signedPost(t *testing.T, u string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	ts := time.Now().Unix()
	m := hmac.New(sha256.New, []byte(signingSecret))
	fmt.Fprintf(m, "v0:%d:", ts)
	m.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", u, err)
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func teamMention(eventID, team string) []byte {
	b, _ := json.Marshal(map[string]any{
		"token": "verif", "team_id": team, "api_app_id": "A0FAKEAPP", "type": "event_callback",
		"event_id": eventID, "event_time": time.Now().Unix(),
		"authorizations": []map[string]any{{"team_id": team, "user_id": "UBOT", "is_bot": true, "is_enterprise_install": false}},
		"event": map[string]any{"type": "app_mention", "user": "U0HUMAN", "text": "hi",
			"ts": "1700000000.000100", "channel": "C" + team, "event_ts": "1700000000.000100"},
	})
	return b
}

func oauthGrant(team string) fakeslack.Grant {
	return fakeslack.Grant{TeamID: team, TeamName: team, BotUserID: "U" + team + "BOT", BotID: "B" + team,
		Scope: "chat:write", InstallerUserID: "U" + team + "ADMIN"}
}

func TestOAuthRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ackd processes")
	}
	t.Run("sqlite daemon and hand-run sweeps", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		runRotation(t, dir, filepath.Join(dir, "ackd.db"), 1)
	})
	t.Run("postgres three replicas and hand-run sweeps", func(t *testing.T) {
		t.Parallel()
		db := pgtest.URL(t)
		runRotation(t, t.TempDir(), db, 3)
	})
}

func runRotation(t *testing.T, dir, db string, n int) {
	fake := fakeslack.New(t, "xoxb-unused")
	fake.EnableOAuth(oauthClientID, oauthClientSecret)
	const life = 4 * time.Second
	fake.SetTokenLife(life)
	secrets := map[string]string{"SLACK_SIGNING_SECRET": signingSecret,
		"SLACK_CLIENT_SECRET": oauthClientSecret, "ACKD_TOKEN_KEY": oauthTokenKey}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 24))
	var rigs []*rig
	for i := range n {
		addr := freeAddr(t, rng)
		config := filepath.Join(dir, fmt.Sprintf("ackd-%d.toml", i))
		writeOAuthConfig(t, config, addr, db, fake.URL())
		r := newRig(t, ackdBin, dir, config, addr, secrets)
		r.prefix = fmt.Sprintf("r%d-", i)
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
		rigs = append(rigs, r)
	}
	teams := []string{"T1", "T2"}
	for i, tm := range teams {
		installVia(t, "http://"+rigs[i%n].addr, fake, oauthGrant(tm))
	}
	stopSweeping := rigs[0].sweepInBackground(7)

	// Busy: events for both teams to every replica until each token has
	// been refreshed a few times.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent int
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(30 * time.Millisecond):
			}
			r := rigs[i%n]
			if st := signedPost(t, "http://"+r.addr+"/slack/events", teamMention(fmt.Sprintf("EvRot%d", i), teams[i%2])); st != 200 {
				t.Errorf("event %d: status %d", i, st)
			}
			sent = i + 1
		}
	})
	perTeam := func() map[string]int {
		m := map[string]int{}
		for _, r := range fake.Refreshes() {
			m[r.Key]++
		}
		return m
	}
	waitUntil(t, "three refreshes of each team's token", 40*time.Second, func() bool {
		m := perTeam()
		return m["T1"] >= 3 && m["T2"] >= 3
	})
	close(stop)
	wg.Wait()
	res := stopSweeping()
	for _, f := range res.failures {
		t.Errorf("hand-run sweep failed (it must exit 0 when another process holds a refresh lease): %s", f.Msg)
	}
	if res.runs == 0 {
		t.Error("no hand-run sweep ran")
	}

	for _, r := range fake.Refreshes() {
		if !r.OK {
			t.Errorf("a refresh with a spent refresh token (%.12s…): two refreshers for one expiry", r.RefreshToken)
			continue
		}
		if r.Age < r.Life/5 {
			t.Errorf("%s refreshed with %s of %s left (more than 80%% of its life)", r.Key, r.Life-r.Age, r.Life)
		}
		if r.Age >= r.Life {
			t.Errorf("%s refreshed %s after its token expired", r.Key, r.Age-r.Life)
		}
	}
	// Every post carried a token of its own team, valid when used.
	waitUntil(t, "every event posted", 30*time.Second, func() bool { return len(fake.CallsTo("chat.postMessage")) >= sent })
	for _, c := range fake.CallsTo("chat.postMessage") {
		if want := strings.TrimPrefix(c.Params.Get("channel"), "C"); fake.KeyOf(c.Token) != want {
			t.Errorf("post to %s with %s's token", c.Params.Get("channel"), fake.KeyOf(c.Token))
		}
	}
	if failed := len(fake.CallsTo("chat.postMessage")) - sent; failed > 0 {
		t.Logf("%d posts repeated", failed)
	}
	var nothingFailed bool = true
	for _, p := range rigs {
		for _, l := range p.logs() {
			b, _ := os.ReadFile(l)
			if bytes.Contains(b, []byte("token_expired")) || bytes.Contains(b, []byte("invalid_refresh_token")) {
				nothingFailed = false
				t.Errorf("%s: a token was used expired or a refresh refused:\n%s", filepath.Base(l), lastLines(grepLines(string(b), "token_"), 5))
			}
		}
	}
	t.Logf("events=%d refreshes=%v sweeps=%d clean=%v", sent, perTeam(), res.runs, nothingFailed)

	if !strings.HasPrefix(db, "postgres") {
		// `ackd installs list` on a copy: team ids, never a token.
		copyPath := filepath.Join(dir, "copy.db")
		sdb, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sdb.Exec(`VACUUM INTO ?`, copyPath); err != nil {
			t.Fatal(err)
		}
		sdb.Close()
		cmd := exec.Command(ackdBin, "installs", "list", "--config", rigs[0].config, "--db", copyPath)
		cmd.Env = rigs[0].env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("installs list: %v\n%s", err, out)
		}
		for _, tm := range teams {
			if !strings.Contains(string(out), tm) {
				t.Errorf("installs list does not name %s:\n%s", tm, out)
			}
		}
		for _, s := range fake.IssuedSecrets() {
			if strings.Contains(string(out), s) {
				t.Errorf("installs list prints a token")
			}
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
