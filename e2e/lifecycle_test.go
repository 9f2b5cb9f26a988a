package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
)

// Issue 29.3 with the real binary, on both engines: install → uninstall →
// reinstall → Slack's retry of the uninstall (X-Slack-Retry-Num: 1) leaves
// the reinstall in place; so do the retry an hour later and a first
// delivery, an hour late, of an uninstall from before the reinstall.
func TestUninstallRetryKeepsTheReinstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ackd processes")
	}
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		runUninstallRetry(t, dir, filepath.Join(dir, "ackd.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		runUninstallRetry(t, t.TempDir(), pgtest.URL(t))
	})
}

func runUninstallRetry(t *testing.T, dir, db string) {
	fake := fakeslack.New(t, "xoxb-unused")
	fake.EnableOAuth(oauthClientID, oauthClientSecret)
	// Slack's clock: the Date of oauth.v2.access's answers and the
	// events' event_time. It moves an hour on below.
	var off atomic.Int64
	slackNow := func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	fake.SetOAuthClock(slackNow)
	secrets := map[string]string{"SLACK_SIGNING_SECRET": signingSecret,
		"SLACK_CLIENT_SECRET": oauthClientSecret, "ACKD_TOKEN_KEY": oauthTokenKey}
	addr := freeAddr(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 29)))
	config := filepath.Join(dir, "ackd.toml")
	writeOAuthConfig(t, config, addr, db, fake.URL())
	r := newRig(t, ackdBin, dir, config, addr, secrets)
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	installed := func() bool {
		cmd := exec.Command(ackdBin, "installs", "list", "--config", config)
		cmd.Env = r.env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("installs list: %v\n%s", err, out)
		}
		return strings.Contains(string(out), "\nT1 ")
	}
	nextSecond := func(after time.Time) {
		waitUntil(t, "Slack's clock to pass a second", 3*time.Second, func() bool { return slackNow().Unix() > after.Unix() })
	}

	installVia(t, base, fake, oauthGrant("T1"))
	nextSecond(slackNow())
	uninstalledAt := slackNow()
	body := uninstallBody("EvUninstall", "T1", uninstalledAt)
	st, firstOutcome := postEvent(t, base, body, nil)
	if st != 200 || installed() {
		t.Fatalf("app_uninstalled: %d; the installation is still there", st)
	}

	nextSecond(uninstalledAt)
	installVia(t, base, fake, oauthGrant("T1")) // the reinstall
	st, outcome := postEvent(t, base, body, map[string]string{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
	if !installed() {
		t.Fatal("Slack's retry of the uninstall removed the reinstall")
	}
	if firstOutcome != "first" || st != 200 || outcome != "duplicate" {
		t.Fatalf("the uninstall answered %s, its retry %d %s: want first, then 200 duplicate", firstOutcome, st, outcome)
	}

	// An hour later (Delayed Events): the retry again, and a first
	// delivery of an uninstall from before the reinstall that ackd never
	// answered.
	off.Add(int64(time.Hour))
	retry := map[string]string{"X-Slack-Retry-Num": "3", "X-Slack-Retry-Reason": "http_timeout"}
	if st, outcome := postEvent(t, base, body, retry); st != 200 || outcome != "duplicate" {
		t.Fatalf("the retry an hour later: %d %s", st, outcome)
	}
	if st, outcome := postEvent(t, base, uninstallBody("EvUninstallLate", "T1", uninstalledAt), retry); st != 200 || outcome != "first" {
		t.Fatalf("the late first delivery: %d %s", st, outcome)
	}
	if !installed() {
		t.Fatal("an uninstall older than the reinstall removed it")
	}
	said := false
	for _, l := range r.logs() {
		b, _ := os.ReadFile(l)
		said = said || bytes.Contains(b, []byte("Slack event older than the installation: nothing changed"))
	}
	if !said {
		t.Fatalf("no log line says why the late uninstall changed nothing:\n%s", tail(r.logs()[0], 20))
	}

	// The team's events are performed with the reinstall's token, at once
	// (no row waits not_installed).
	if st := signedPost(t, base+"/slack/events", teamMention("EvAfter", "T1")); st != 200 {
		t.Fatal(st)
	}
	toks := fake.TokensOf("T1")
	waitUntil(t, "the post with the reinstall's token", 20*time.Second, func() bool {
		for _, c := range fake.CallsTo("chat.postMessage") {
			if c.Token == toks[len(toks)-1] {
				return true
			}
		}
		return false
	})
	if err := r.stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// uninstallBody is app_uninstalled for team, sent by Slack at at.
func uninstallBody(id, team string, at time.Time) []byte {
	b, _ := json.Marshal(map[string]any{"token": "verif", "team_id": team, "api_app_id": "A0FAKEAPP", "type": "event_callback",
		"event_id": id, "event_time": at.Unix(),
		"event":          map[string]any{"type": "app_uninstalled", "event_ts": fmt.Sprintf("%d.000000", at.Unix())},
		"authorizations": []map[string]any{{"team_id": team, "is_enterprise_install": false}}})
	return b
}

// postEvent signs and posts body to base's /slack/events with extra
// headers, and returns the status and ackd's X-Ackd-Outcome.
func postEvent(t *testing.T, base string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/slack/events", bytes.NewReader(body))
	ts := time.Now().Unix()
	m := hmac.New(sha256.New, []byte(signingSecret))
	fmt.Fprintf(m, "v0:%d:", ts)
	m.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("X-Ackd-Outcome")
}
