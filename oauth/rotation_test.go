package oauth_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/oauth"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/store/sqlite"
)

// The writers of a sealed installation and a refresh whose answer is lost,
// on both engines, against the fake Slack's oauth.v2.access.

const (
	clientID     = "c.1"
	clientSecret = "c-secret"
)

var (
	keyOld = bytes.Repeat([]byte{1}, oauth.KeySize)
	keyNew = bytes.Repeat([]byte{2}, oauth.KeySize)
)

// engines runs fn on a fresh SQLite file and a fresh PostgreSQL schema.
func engines(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		schema, err := os.ReadFile("../schema.sql")
		if err != nil {
			t.Fatal(err)
		}
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "ackd.db"), store.Options{Schema: string(schema)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		st, err := postgres.Open(context.Background(), pgtest.URL(t), store.Options{Schema: postgres.Schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

func mustKeys(t *testing.T, cur, old []byte) *oauth.Keys {
	t.Helper()
	k, err := oauth.NewKeys(cur, old)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// logSink collects a Service's log lines.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logSink) has(s string) bool { return strings.Contains(l.String(), s) }

func service(t *testing.T, st store.Store, fake *fakeslack.Server, keys *oauth.Keys, logs *logSink) *oauth.Service {
	return oauth.New(oauth.Config{ClientID: clientID, ClientSecret: clientSecret, APIURL: fake.URL()}, st, keys,
		oauth.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
}

// installDue stores team T1 sealed with keys, with a pair the fake issued
// (token rotation on) and backdated so that it is due for a refresh.
func installDue(t *testing.T, st store.Store, fake *fakeslack.Server, keys *oauth.Keys) {
	t.Helper()
	fake.EnableOAuth(clientID, clientSecret)
	fake.SetTokenLife(time.Hour)
	fake.AddCode("code-1", "", fakeslack.Grant{TeamID: "T1", BotUserID: "UBOT", BotID: "BBOT", Scope: "chat:write"})
	resp, err := slack.GetOAuthV2ResponseContext(context.Background(), http.DefaultClient, clientID, clientSecret, "code-1", "",
		slack.OAuthOptionAPIURL(fake.URL()))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok := oauth.Tokens{Bot: resp.AccessToken, Refresh: resp.RefreshToken, Issued: now.Add(-50 * time.Minute), Expires: now.Add(10 * time.Minute)}
	if err := st.PutInstallation(context.Background(), store.Installation{Key: "T1", TeamID: "T1", BotUserID: "UBOT",
		Secret: keys.Seal("T1", tok)}); err != nil {
		t.Fatal(err)
	}
}

// stored opens T1's secret with keys.
func stored(t *testing.T, st store.Store, keys *oauth.Keys) (oauth.Tokens, store.Installation) {
	t.Helper()
	in, err := st.GetInstallation(context.Background(), "T1")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := keys.Open("T1", in.Secret)
	if err != nil {
		t.Fatalf("T1's secret does not open: %v", err)
	}
	return tok, in
}

// lastRefresh is the refresh token the fake issued last.
func lastRefresh(fake *fakeslack.Server) string {
	var rt string
	for _, s := range fake.IssuedSecrets() {
		if strings.HasPrefix(s, "xoxe-1-") {
			rt = s // issued in order after the access tokens
		}
	}
	return rt
}

func TestRekeyWaitsForARefreshInFlight(t *testing.T) {
	engines(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		fake := fakeslack.New(t, "xoxb-unused")
		installDue(t, st, fake, mustKeys(t, keyOld, nil))
		// After a key rotation: the daemon and `ackd installs rekey` both
		// run with the new key, the old one as ACKD_TOKEN_KEY_OLD.
		rotated := mustKeys(t, keyNew, keyOld)
		var daemonLog, rekeyLog logSink
		daemon := service(t, st, fake, rotated, &daemonLog)
		rekey := service(t, st, fake, rotated, &rekeyLog)

		// The refresh reaches Slack, which rotates, and its answer is held.
		hold := make(chan struct{})
		fake.Script("oauth.v2.access", fakeslack.Response{Store: true, Hold: hold})
		refreshed := make(chan oauth.RefreshResult, 1)
		go func() {
			res, err := daemon.RefreshDue(ctx)
			if err != nil {
				t.Error(err)
			}
			refreshed <- res
		}()
		waitFor(t, "the refresh to reach Slack", func() bool { return len(fake.Refreshes()) == 1 })

		type result struct {
			n   int
			err error
		}
		rekeyed := make(chan result, 1)
		go func() {
			n, err := rekey.Rekey(ctx)
			rekeyed <- result{n, err}
		}()
		// Rekey must wait for the refresh's lease; an old rekey finishes
		// under it instead.
		waitFor(t, "rekey to wait for the refresh (or to finish without waiting)", func() bool {
			return rekeyLog.has("waiting for a token refresh of this installation to end") || len(rekeyed) == 1
		})
		close(hold)
		res := <-refreshed
		r := <-rekeyed
		if r.err != nil || r.n != 1 {
			t.Fatalf("rekey: %d %v", r.n, r.err)
		}
		if res.Refreshed != 1 || daemonLog.has("token refreshed at Slack but not stored") {
			t.Fatalf("the refresh in flight was not stored (%+v): rekey changed the row under it\n%s", res, daemonLog.String())
		}
		// The row holds the refreshed pair, sealed with the new key only.
		tok, _ := stored(t, st, mustKeys(t, keyNew, nil))
		if tok.Refresh != lastRefresh(fake) {
			t.Fatal("the stored refresh token is not the one Slack issued last")
		}
		// And the next refresh works: the installation is not bricked.
		tok.Issued, tok.Expires = time.Now().Add(-50*time.Minute), time.Now().Add(10*time.Minute)
		_, in := stored(t, st, rotated)
		if _, ok, err := st.UpdateInstallationSecret(ctx, "T1", in.Version, rotated.Seal("T1", tok)); err != nil || !ok {
			t.Fatal(ok, err)
		}
		if res, err := daemon.RefreshDue(ctx); err != nil || res.Refreshed != 1 {
			t.Fatalf("the next refresh: %+v %v\n%s", res, err, daemonLog.String())
		}
		for _, r := range fake.Refreshes() {
			if !r.OK {
				t.Errorf("Slack refused a refresh token: %+v", r)
			}
		}
	})
}

func TestRefreshAnswerLost(t *testing.T) {
	engines(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		t.Run("tried again at once, within Slack's grace period", func(t *testing.T) {
			fake := fakeslack.New(t, "xoxb-unused")
			keys := mustKeys(t, keyOld, nil)
			installDue(t, st, fake, keys)
			const grace = 2 * time.Second
			fake.SetRefreshGrace(grace)
			// Slack rotates, and the connection drops before its answer.
			fake.Script("oauth.v2.access", fakeslack.Response{Store: true, Drop: true})
			var logs logSink
			svc := service(t, st, fake, keys, &logs)
			res, err := svc.RefreshDue(ctx)
			if err != nil || res.Refreshed != 1 {
				t.Fatalf("refresh pass: %+v %v\n%s", res, err, logs.String())
			}
			rs := fake.Refreshes()
			if len(rs) != 2 || !rs[0].OK || rs[0].Reused || !rs[1].OK || !rs[1].Reused || rs[0].RefreshToken != rs[1].RefreshToken {
				t.Fatalf("refreshes %+v: want the lost one, then the same refresh token again within the grace period", rs)
			}
			gap := rs[1].Time.Sub(rs[0].Time)
			t.Logf("the lost answer's refresh token was tried again %s after Slack rotated (grace %s)", gap.Round(time.Millisecond), grace)
			if gap >= grace {
				t.Fatalf("tried again %s later: past the grace period", gap)
			}
			tok, in := stored(t, st, keys)
			if tok.Refresh != lastRefresh(fake) || in.Error != "" {
				t.Fatalf("stored %+v (error %q): want the second answer's pair", tok, in.Error)
			}
		})
		t.Run("Slack unreachable for the tries at once: the next pass gets through within the grace period", func(t *testing.T) {
			fake := fakeslack.New(t, "xoxb-unused")
			keys := mustKeys(t, keyOld, nil)
			installDue(t, st, fake, keys)
			fake.SetRefreshGrace(10 * time.Second)
			fake.Script("oauth.v2.access", fakeslack.Response{Store: true, Drop: true}, fakeslack.Status(503), fakeslack.Status(503))
			var logs logSink
			svc := service(t, st, fake, keys, &logs)
			if res, err := svc.RefreshDue(ctx); err != nil || res.Failed != 1 {
				t.Fatalf("first pass: %+v %v", res, err)
			}
			if res, err := svc.RefreshDue(ctx); err != nil || res.Refreshed != 1 {
				t.Fatalf("next pass: %+v %v\n%s", res, err, logs.String())
			}
			if tok, _ := stored(t, st, keys); tok.Refresh != lastRefresh(fake) {
				t.Fatal("the stored pair is not the last one Slack issued")
			}
			if !logs.has(`"after_lost_answer_ms"`) {
				t.Fatalf("the refresh does not say how long after the lost answer it got through:\n%s", logs.String())
			}
		})
		t.Run("past the grace period: the installation is marked unusable, and the log says why", func(t *testing.T) {
			fake := fakeslack.New(t, "xoxb-unused")
			keys := mustKeys(t, keyOld, nil)
			installDue(t, st, fake, keys)
			// No grace at all: the spent token is refused at once.
			fake.Script("oauth.v2.access", fakeslack.Response{Store: true, Drop: true})
			var logs logSink
			svc := service(t, st, fake, keys, &logs)
			if res, err := svc.RefreshDue(ctx); err != nil || res.Failed != 1 {
				t.Fatalf("refresh pass: %+v %v", res, err)
			}
			if _, in := stored(t, st, keys); !strings.Contains(in.Error, "invalid_refresh_token") {
				t.Fatalf("installation error %q", in.Error)
			}
			if !logs.has("Slack's grace period for it had passed") {
				t.Fatalf("no line names the lost answer:\n%s", logs.String())
			}
		})
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A refresh that Slack refuses while the app was installed again (a
// reinstall takes no lease) is about the old installation: the new one
// keeps no error, and its team's rows are not parked.
func TestRefreshRefusedAfterAReinstall(t *testing.T) {
	engines(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		fake := fakeslack.New(t, "xoxb-unused")
		keys := mustKeys(t, keyOld, nil)
		installDue(t, st, fake, keys)
		var logs logSink
		svc := service(t, st, fake, keys, &logs)

		hold := make(chan struct{})
		fake.Script("oauth.v2.access", fakeslack.Response{Error: "invalid_refresh_token", Hold: hold})
		done := make(chan struct{})
		go func() {
			defer close(done)
			svc.RefreshDue(ctx)
		}()
		// installDue's code exchange was the first call.
		waitFor(t, "the refresh to reach Slack", func() bool { return len(fake.CallsTo("oauth.v2.access")) == 2 })
		// The reinstall, while Slack has not answered the refresh yet.
		time.Sleep(5 * time.Millisecond) // a later installed_at (milliseconds)
		tok := oauth.Tokens{Bot: "xoxb-reinstalled", Refresh: "xoxe-1-reinstalled", Issued: time.Now(), Expires: time.Now().Add(time.Hour)}
		if err := st.PutInstallation(ctx, store.Installation{Key: "T1", TeamID: "T1", BotUserID: "UBOT",
			Secret: keys.Seal("T1", tok)}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.RecordIntent(ctx, store.Intent{EventID: "EvAfter", EventType: "message", Rows: []store.NewRow{{Key: "EvAfter:r",
			Effect: "post", Payload: `{"route":"r","facts":{"install":"T1"}}`}}}); err != nil {
			t.Fatal(err)
		}
		close(hold)
		<-done

		got, in := stored(t, st, keys)
		if got.Bot != "xoxb-reinstalled" || in.Error != "" {
			t.Errorf("after the refused refresh the reinstall holds bot %q and error %q; want its own token and no error\n%s", got.Bot, in.Error, logs.String())
		}
		if row, err := st.GetByKey(ctx, "EvAfter:r"); err != nil || row.Status != store.StatusPending {
			t.Errorf("the reinstalled team's row: %+v %v; want pending\n%s", row, err, logs.String())
		}
	})
}
