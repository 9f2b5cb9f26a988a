package daemon_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
)

// Lifecycle events are events (DESIGN §11): app_uninstalled and
// tokens_revoked go through the receipt like every event, so Slack's retry
// of one is a duplicate, and one older than the installation (Slack's
// event_time against Slack's own time of the install, the Date of
// oauth.v2.access's answer) changes nothing.

// uninstallEvent is app_uninstalled for team, sent by Slack at at.
func uninstallEvent(id, team string, at time.Time) []byte {
	b, _ := json.Marshal(map[string]any{"token": "tok", "team_id": team, "api_app_id": "A0FAKEAPP", "type": "event_callback",
		"event_id": id, "event_time": at.Unix(), "event": map[string]any{"type": "app_uninstalled", "event_ts": fmt.Sprintf("%d.000000", at.Unix())},
		"authorizations": []map[string]any{{"team_id": team, "is_enterprise_install": false}}})
	return b
}

// retried is Slack's retry headers.
func retried(n int, reason string) http.Header {
	return http.Header{"X-Slack-Retry-Num": {fmt.Sprint(n)}, "X-Slack-Retry-Reason": {reason}}
}

// nextSecond waits until clock is in a later whole second than t: Slack's
// times (event_time, Date) have whole seconds.
func nextSecond(t *testing.T, clock func() time.Time, after time.Time) {
	t.Helper()
	waitFor(t, "Slack's clock to pass a second", 3*time.Second, func() bool { return clock().Unix() > after.Unix() })
}

func TestOAuthUninstallRetryKeepsTheReinstall(t *testing.T) {
	t.Parallel()
	// Slack's clock against ackd's: the same, and 10 minutes either way
	// (an ackd clock compared with Slack's event_time would remove the
	// reinstall when Slack is ahead, and ignore a real uninstall when it
	// is behind).
	for _, skew := range []time.Duration{0, 10 * time.Minute, -10 * time.Minute} {
		t.Run(fmt.Sprintf("slack clock %+v", skew), func(t *testing.T) {
			t.Parallel()
			e := startOAuth(t, replyRoute, daemon.Options{})
			var off atomicDuration
			off.Store(skew)
			slackNow := func() time.Time { return time.Now().Add(off.Load()) }
			e.fake.SetOAuthClock(slackNow)
			installs := func() int { return e.count(`SELECT count(*) FROM ackd_installations WHERE install_key = 'T1'`) }

			e.install(t, team("T1"))
			nextSecond(t, slackNow, slackNow())
			uninstalledAt := slackNow()
			body := uninstallEvent("EvUninstall", "T1", uninstalledAt)
			first := e.postEvent(body)
			if first.Status != 200 || installs() != 0 {
				t.Fatalf("app_uninstalled: %d %s; the installation is still there", first.Status, first.Body)
			}

			nextSecond(t, slackNow, uninstalledAt)
			e.install(t, team("T1")) // the reinstall
			if installs() != 1 {
				t.Fatal("the reinstall was not stored")
			}
			// Slack's retry of the uninstall (its answer was lost, say).
			r := e.post("/slack/events", "application/json", body, retried(1, "http_timeout"))
			if installs() != 1 {
				t.Fatal("Slack's retry of the uninstall removed the reinstall")
			}
			if first.Header.Get(ingress.HeaderOutcome) != "first" || r.Status != 200 || r.Header.Get(ingress.HeaderOutcome) != "duplicate" {
				t.Fatalf("the uninstall answered %s, its retry %d %s: want first, then 200 duplicate",
					first.Header.Get(ingress.HeaderOutcome), r.Status, r.Header.Get(ingress.HeaderOutcome))
			}

			// An hour later (Delayed Events): Slack retries again; and the
			// first delivery of another uninstall from before the reinstall
			// (the one ackd never answered) arrives late.
			off.Add(time.Hour)
			r = e.post("/slack/events", "application/json", body, retried(3, "http_timeout"))
			if r.Status != 200 || r.Header.Get(ingress.HeaderOutcome) != "duplicate" {
				t.Fatalf("the retry an hour later: %d %s", r.Status, r.Header.Get(ingress.HeaderOutcome))
			}
			r = e.post("/slack/events", "application/json", uninstallEvent("EvUninstallLate", "T1", uninstalledAt), retried(3, "http_timeout"))
			if installs() != 1 {
				t.Fatal("an uninstall older than the installation removed it")
			}
			if r.Status != 200 || r.Header.Get(ingress.HeaderOutcome) != "first" {
				t.Fatalf("a late first delivery: %d %s", r.Status, r.Header.Get(ingress.HeaderOutcome))
			}
			if e.Logs.Find("msg", "Slack event older than the installation: nothing changed (a retry, or a late delivery, of an uninstall that came before the app was installed again)",
				"team", "T1", "compared_on", "Slack's clock") == nil {
				t.Fatalf("no log line says why the late uninstall changed nothing:\n%s", e.Logs)
			}
			if n := e.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id IN ('EvUninstall', 'EvUninstallLate')`); n != 2 {
				t.Fatalf("%d receipts for the two uninstalls, want 2", n)
			}

			// The team's new rows are performed with the new token.
			if r := e.postEvent(teamEvent("EvAfter", "T1", "", false)); r.Status != 200 {
				t.Fatal(r.Status)
			}
			toks := e.fake.TokensOf("T1")
			waitFor(t, "the post with the reinstall's token", 10*time.Second, func() bool {
				for _, c := range e.fake.CallsTo("chat.postMessage") {
					if c.Token == toks[len(toks)-1] {
						return true
					}
				}
				return false
			})

			// A real uninstall, after the reinstall, still removes it.
			nextSecond(t, slackNow, slackNow())
			if r := e.postEvent(uninstallEvent("EvUninstall2", "T1", slackNow())); r.Status != 200 {
				t.Fatal(r.Status)
			}
			if installs() != 0 {
				t.Fatal("an uninstall after the reinstall did not remove it")
			}
		})
	}
}

func TestOAuthUninstallUnroutedStillDeduplicated(t *testing.T) {
	t.Parallel()
	// No route takes app_uninstalled: it is still recorded (a receipt),
	// and its retry, after a reinstall, changes nothing.
	e := startOAuth(t, replyRoute, daemon.Options{})
	e.install(t, team("T1"))
	nextSecond(t, time.Now, time.Now())
	body := uninstallEvent("EvU", "T1", time.Now())
	if r := e.postEvent(body); r.Status != 200 {
		t.Fatal(r.Status)
	}
	nextSecond(t, time.Now, time.Now())
	e.install(t, team("T1"))
	if r := e.post("/slack/events", "application/json", body, retried(1, "http_timeout")); r.Status != 200 || r.Header.Get(ingress.HeaderOutcome) != "duplicate" {
		t.Fatalf("retry: %d %s", r.Status, r.Header.Get(ingress.HeaderOutcome))
	}
	if n := e.count(`SELECT count(*) FROM ackd_installations`); n != 1 {
		t.Fatalf("%d installations after the retried uninstall, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM outbox`); n != 0 {
		t.Fatalf("%d rows for an unrouted event", n)
	}
}

func TestOAuthLifecycleRouted(t *testing.T) {
	t.Parallel()
	// A route on app_uninstalled gets its row in the same transaction as
	// the removal; a retry adds neither.
	hook := newHookServer(t)
	e := startOAuth(t, replyRoute+fmt.Sprintf(`
[[route]]
name   = "audit"
event  = "app_uninstalled"
effect = "forward"
url    = %q
`, hook), daemon.Options{})
	e.install(t, team("T1"))
	nextSecond(t, time.Now, time.Now())
	body := uninstallEvent("EvU", "T1", time.Now())
	if r := e.postEvent(body); r.Status != 200 || r.Header.Get(ingress.HeaderOutcome) != "first" {
		t.Fatal(r.Status, r.Header.Get(ingress.HeaderOutcome))
	}
	if n := e.count(`SELECT count(*) FROM ackd_installations`); n != 0 {
		t.Fatal("not removed")
	}
	nextSecond(t, time.Now, time.Now())
	e.install(t, team("T1"))
	if r := e.post("/slack/events", "application/json", body, retried(1, "http_timeout")); r.Status != 200 || r.Header.Get(ingress.HeaderOutcome) != "duplicate" {
		t.Fatal(r.Status)
	}
	if n := e.count(`SELECT count(*) FROM ackd_installations`); n != 1 {
		t.Fatal("the routed uninstall's retry removed the reinstall")
	}
	if n := e.count(`SELECT count(*) FROM outbox WHERE idempotency_key = 'EvU:audit'`); n != 1 {
		t.Fatalf("%d audit rows, want 1", n)
	}
}

func newHookServer(t *testing.T) string {
	return httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
}

// atomicDuration is a clock offset tests move while the daemon reads it.
type atomicDuration struct{ v atomic.Int64 }

func (d *atomicDuration) Load() time.Duration   { return time.Duration(d.v.Load()) }
func (d *atomicDuration) Store(x time.Duration) { d.v.Store(int64(x)) }
func (d *atomicDuration) Add(x time.Duration)   { d.v.Add(int64(x)) }

func TestOAuthUninstallResentOverSocketMode(t *testing.T) {
	t.Parallel()
	// Over Socket Mode the same pipeline: Slack re-sends an envelope whose
	// ack was lost, and the re-send after a reinstall changes nothing.
	fake := fakeslack.New(t, "xoxb-single-workspace-token")
	fake.EnableOAuth(testClientID, testClientSecret)
	sock := fake.SocketMode(t, sockAppToken)
	cfg := configFor(t, fmt.Sprintf(`
[slack]
api_url = %q
[socket_mode]
enabled = true
[oauth]
client_id = %q
scopes = ["chat:write", "reactions:write"]
redirect_url = "https://ackd.example/slack/oauth_redirect"
authorize_url = "%s/oauth/v2/authorize"
`, fake.URL(), testClientID, strings.TrimSuffix(fake.URL(), "/"))+replyRoute)
	opts := daemon.Options{Secrets: config.Secrets{AppToken: sockAppToken, ClientSecret: testClientSecret, TokenKey: testTokenKey}}
	e := &oauthEnv{testServer: startServerNoSecret(t, cfg, opts), fake: fake}
	if !sock.Wait(10*time.Second, func() bool { return len(sock.Open()) >= 1 }) {
		t.Fatalf("no Socket Mode connection; log:\n%s", e.Logs)
	}
	installs := func() int { return e.count(`SELECT count(*) FROM ackd_installations WHERE install_key = 'T1'`) }
	e.install(t, team("T1"))
	nextSecond(t, time.Now, time.Now())
	body := json.RawMessage(uninstallEvent("EvSockU", "T1", time.Now()))
	sock.Send("uninstall", "events_api", body)
	if !sock.Wait(10*time.Second, func() bool { return sock.Acked("uninstall") }) || installs() != 0 {
		t.Fatalf("the uninstall over Socket Mode: acked %v, installations %d", sock.Acked("uninstall"), installs())
	}
	nextSecond(t, time.Now, time.Now())
	e.install(t, team("T1"))
	sock.Send("resent", "events_api", body)
	if !sock.Wait(10*time.Second, func() bool { return sock.Acked("resent") }) {
		t.Fatal("the re-sent uninstall was not acked")
	}
	if installs() != 1 {
		t.Fatal("the re-sent uninstall removed the reinstall")
	}
}
