package daemon_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
)

// TestSecretEchoedInErrorMasked: a step handler that answers an error
// naming the execution token it was given, and a forward handler that
// echoes SLACK_BOT_TOKEN in its 500 body, leave neither token in
// last_error, the attempts, the log, nor (SQLite) the database file or its
// WAL in any raw, hex or base64 form; the errors still say what happened.
func TestSecretEchoedInErrorMasked(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			const bot = "xoxb-bot-token"
			e := &stepEnv{api: fakeslack.New(t, bot), handler: fakeslack.NewHook(t)}
			audit := fakeslack.NewHook(t)
			extra := fmt.Sprintf(`
[[route]]
name   = "audit"
event  = "function_executed"
effect = "forward"
url    = %q
`, audit.URL())
			cfg := configFor(t, stepConfig(e.api.URL(), e.handler.URL(), "5m", extra))
			if engine == "postgres" {
				pgtest.Need(t)
				e.pg = pgtest.URL(t)
				cfg.DB = e.pg
			}
			e.testServer = startServer(t, cfg, daemon.Options{Secrets: config.Secrets{TokenKey: stepKey, BotToken: bot}})

			exec, token := e.newExecution()
			e.handler.Script(fakeslack.Response{Status: 500, Body: "invalid execution token " + token + " for this step"})
			audit.Script(fakeslack.Response{Status: 500, Body: "cannot use Authorization: Bearer " + bot})
			if r := e.postEvent(fnEvent("EvMASK1", exec, "approve_request", token)); r.Status != 200 {
				t.Fatal(r)
			}
			waitFor(t, "both failures recorded", 20*time.Second, func() bool {
				return e.count(`SELECT count(*) FROM outbox_attempts WHERE error IS NOT NULL AND error <> ''`) >= 2
			})

			for name, secret := range map[string]string{"execution token": token, "bot token": bot} {
				like := "%" + secret + "%"
				if n := e.count(`SELECT count(*) FROM outbox WHERE last_error LIKE ? OR result LIKE ? OR note LIKE ?`, like, like, like); n != 0 {
					t.Errorf("%d rows name the %s in last_error, result or note", n, name)
				}
				if n := e.count(`SELECT count(*) FROM outbox_attempts WHERE error LIKE ? OR status LIKE ? OR result LIKE ?`, like, like, like); n != 0 {
					t.Errorf("%d attempts name the %s", n, name)
				}
				if bytes.Contains([]byte(e.Logs.String()), []byte(secret)) {
					t.Errorf("the log names the %s", name)
				}
			}
			// The errors stay useful: what failed and the token's kind.
			if n := e.count(`SELECT count(*) FROM outbox WHERE last_error LIKE ?`, "%invalid execution token xwfp-…(masked) for this step%"); n != 1 {
				t.Errorf("the step's last error is not the masked answer (%d rows)", n)
			}
			if n := e.count(`SELECT count(*) FROM outbox WHERE last_error LIKE ?`, "%Bearer xoxb-…(masked)%"); n != 1 {
				t.Errorf("the forward's last error is not the masked answer (%d rows)", n)
			}
			if engine != "sqlite" {
				return
			}
			for _, f := range []string{e.DB, e.DB + "-wal"} {
				b, err := os.ReadFile(f)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				for form, s := range map[string]string{"raw": token, "hex": hex.EncodeToString([]byte(token)),
					"base64": base64.StdEncoding.EncodeToString([]byte(token)), "base64url": base64.RawURLEncoding.EncodeToString([]byte(token)),
					"the token's secret part": token[len(token)-20:], "the bot token": bot} {
					if bytes.Contains(b, []byte(s)) {
						t.Errorf("%s holds %s", filepath.Base(f), form)
					}
				}
			}
		})
	}
}

// TestSlackEchoedSecretsMasked: what Slack answers is masked too. A
// response_url (Slack's, here a hook) answers 500 with a body naming the
// bot token and the signing secret, and reactions.add answers an error
// that names the bot token: neither secret reaches last_error, the
// attempts or the log, on either engine, and the errors still read.
func TestSlackEchoedSecretsMasked(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			const bot = "xoxb-77-88-ECHOEDBOTSECRET"
			fs := fakeslack.New(t, bot)
			hook := fakeslack.NewHook(t)
			cfg := configFor(t, `
[sweep]
interval = "100ms"

[[route]]
name    = "deploy"
command = "/deploy"
effect  = "respond"
text    = "done"

[[route]]
name     = "eyes"
event    = "app_mention"
effect   = "react"
reaction = "eyes"
`)
			cfg.Slack.APIURL = fs.URL()
			if engine == "postgres" {
				pgtest.Need(t)
				cfg.DB = pgtest.URL(t)
			}
			hook.Script(fakeslack.Response{Status: 500, Body: "upstream said: bad token " + bot + " signed with " + testSecret})
			fs.Script("reactions.add", fakeslack.Err("token_revoked:"+bot))
			s := startServer(t, cfg, daemon.Options{Secrets: config.Secrets{BotToken: bot}})
			if engine == "postgres" {
				s.DB = cfg.DB
			}
			if r := s.postForm("/slack/commands", cmdForm("/deploy", "api", "9.9.echo", hook.URL())); r.Status != 200 {
				t.Fatal(r)
			}
			if r := s.postEvent(eventBody("EvECHO1", mention("C1", "1700000000.000200", "hi"))); r.Status != 200 {
				t.Fatal(r)
			}
			st := s.Store()
			ctx := context.Background()
			var rows []store.Row
			waitFor(t, "both rows failed once", 20*time.Second, func() bool {
				rows = rows[:0]
				for _, key := range []string{"cmd:9.9.echo:deploy", "EvECHO1:eyes"} {
					r, err := st.GetByKey(ctx, key)
					if err != nil || r.LastError == "" {
						return false
					}
					rows = append(rows, r)
				}
				return true
			})
			for _, r := range rows {
				texts := []string{r.LastError, r.Result, r.Note}
				attempts, err := st.Attempts(ctx, r.ID)
				if err != nil || len(attempts) == 0 {
					t.Fatalf("%s: %d attempts, %v", r.Key, len(attempts), err)
				}
				for _, a := range attempts {
					texts = append(texts, a.Error, a.Status, a.Result)
				}
				for _, text := range texts {
					if strings.Contains(text, "ECHOEDBOTSECRET") || strings.Contains(text, testSecret) {
						t.Errorf("%s keeps a secret: %q", r.Key, text)
					}
				}
			}
			if !strings.Contains(rows[0].LastError, "bad token xoxb-…(masked) signed with …(masked)") {
				t.Errorf("the respond row's error = %q, want the body with both secrets masked", rows[0].LastError)
			}
			if !strings.Contains(rows[1].LastError, "token_revoked:xoxb-…(masked)") {
				t.Errorf("the react row's error = %q, want Slack's code with the token masked", rows[1].LastError)
			}
			if logs := s.Logs.String(); strings.Contains(logs, "ECHOEDBOTSECRET") || strings.Contains(logs, testSecret) {
				t.Errorf("the log names a secret")
			}
		})
	}
}
