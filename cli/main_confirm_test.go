package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
)

const procBotToken = "xoxb-proc-confirm"

// procPostConfig is a daemon whose app_mention route posts in the event's
// channel, with short timings: a lease of 3s over a 2s effect timeout.
func procPostConfig(tb testing.TB, dir, slackURL string) string {
	tb.Helper()
	return procWriteConfig(tb, dir, "ackd.toml", fmt.Sprintf(`
[sweep]
interval    = "200ms"
lease       = "3s"
backoff     = "100ms"
max_backoff = "1s"

[slack]
api_url = %q

[[route]]
name    = "reply"
event   = "app_mention"
effect  = "post"
text    = "on it"
timeout = "2s"
`, slackURL))
}

// procRowByKey reads one outbox row's status, result and id from the file.
func procRowByKey(tb testing.TB, db, key string) (id int64, status, result string) {
	tb.Helper()
	h := procOpenDB(tb, db)
	var res *string
	if err := h.QueryRow(`SELECT id, status, result FROM outbox WHERE idempotency_key = ?`, key).Scan(&id, &status, &res); err != nil {
		tb.Fatalf("row %s: %v", key, err)
	}
	if res != nil {
		result = *res
	}
	return id, status, result
}

// Issue 23: ackd is SIGKILLed while Slack holds the answer to a post it
// already stored. The restarted daemon takes the row when the dead lease
// runs out, finds the message by its metadata and completes with its ts:
// exactly one message in the channel.
func TestPostConfirmedAfterSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	slack := fakeslack.New(t, procBotToken)
	slack.Script("chat.postMessage", fakeslack.Response{Store: true, Delay: time.Hour}) // stored, answer held
	cfg := procPostConfig(t, dir, slack.URL())
	env := procEnv("SLACK_BOT_TOKEN=" + procBotToken)
	const key = "EvKill1:reply"

	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	d.mustPostEvent(procMention("EvKill1", "<@UBOT> hi"))
	procWaitFor(t, "the post stored at Slack", 20*time.Second, func() bool {
		return len(slack.MessagesWithKey("C1", key)) == 1
	})
	d.kill() // mid-call: Slack has the message, ackd has nothing

	if _, status, _ := procRowByKey(t, db, key); status != "pending" {
		t.Fatalf("after SIGKILL the row is %s, want pending under the dead lease", status)
	}
	d2 := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	procWaitFor(t, "the row done after the dead lease ran out", 30*time.Second, func() bool {
		_, status, _ := procRowByKey(t, db, key)
		return status == "done"
	})
	metrics := procScrape(t, d2.URL)
	d2.stop()

	msgs := slack.MessagesWithKey("C1", key)
	if len(msgs) != 1 {
		t.Fatalf("C1 holds %d messages for %s, want exactly 1", len(msgs), key)
	}
	id, _, result := procRowByKey(t, db, key)
	var res map[string]string
	if err := json.Unmarshal([]byte(result), &res); err != nil || res["ts"] != msgs[0].TS || res["channel"] != "C1" || len(res) != 2 {
		t.Fatalf("result %q, want {channel C1, ts %s}", result, msgs[0].TS)
	}
	if n := len(slack.CallsTo("chat.postMessage")); n != 1 {
		t.Fatalf("chat.postMessage called %d times, want 1", n)
	}
	if !regexp.MustCompile(`(?m)^ackd_post_confirmations_total\{outcome="found"\} 1$`).MatchString(metrics) {
		t.Fatalf("metrics lack found=1:\n%s", procGrep(metrics, "ackd_post_confirmations_total"))
	}
	show := procMustRun(t, procEnv(), "outbox", "show", fmt.Sprint(id), "--db", db).Stdout
	for _, want := range []string{"outcome unknown", "yes: an earlier attempt may have taken effect", "confirmed: found the earlier post (ts " + msgs[0].TS} {
		if !strings.Contains(show, want) {
			t.Errorf("outbox show lacks %q:\n%s", want, show)
		}
	}
}

// Issue 23: when the lookup cannot read the channel (missing_scope), ackd
// posts again — at-least-once, as documented — and says so: the metric,
// one log line naming the scope, and the note in `ackd outbox show`.
func TestPostLookupImpossibleIsSaid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	slack := fakeslack.New(t, procBotToken)
	slack.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"})
	slack.Script("conversations.history", fakeslack.Response{
		Body: `{"ok":false,"error":"missing_scope","needed":"channels:history","provided":"chat:write"}`})
	cfg := procPostConfig(t, dir, slack.URL())
	const key = "EvScope1:reply"

	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv("SLACK_BOT_TOKEN=" + procBotToken)})
	d.mustPostEvent(procMention("EvScope1", "<@UBOT> hi"))
	procWaitFor(t, "the row done", 30*time.Second, func() bool {
		_, status, _ := procRowByKey(t, db, key)
		return status == "done"
	})
	metrics := procScrape(t, d.URL)
	d.stop()

	if n := len(slack.MessagesWithKey("C1", key)); n != 2 {
		t.Fatalf("C1 holds %d messages for %s, want 2 (the lookup was impossible: at-least-once)", n, key)
	}
	if !regexp.MustCompile(`(?m)^ackd_post_confirmations_total\{outcome="impossible"\} 1$`).MatchString(metrics) {
		t.Fatalf("metrics lack impossible=1:\n%s", procGrep(metrics, "ackd_post_confirmations_total"))
	}
	logs := d.Stderr.String()
	if n := strings.Count(logs, "cannot look for earlier posts"); n != 1 || !strings.Contains(procGrep(logs, "cannot look for earlier posts"), "channels:history") {
		t.Fatalf("want one warning naming channels:history, got %d:\n%s", n, procGrep(logs, "cannot look"))
	}
	id, _, _ := procRowByKey(t, db, key)
	show := procMustRun(t, procEnv(), "outbox", "show", fmt.Sprint(id), "--db", db).Stdout
	if !strings.Contains(show, "confirmed: lookup impossible (missing_scope channels:history)") {
		t.Fatalf("outbox show lacks the note:\n%s", show)
	}
}

// procScrape reads /metrics once.
func procScrape(tb testing.TB, base string) string {
	tb.Helper()
	resp, err := procClient.Get(base + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// procGrep keeps the lines of s that contain sub.
func procGrep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Issue 29.4 and 29.5 with the real binary: ackd is SIGKILLed while Slack
// holds the answer to a post it stored; Slack's clock is 10 minutes behind
// ackd's, and a staging app in the same channel posts a message carrying
// the same key. The restarted daemon finds its own post (not staging's,
// and not out of a window taken on its own clock) and completes with it.
func TestPostConfirmedOwnPostOnSkewedSlack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	slack := fakeslack.New(t, procBotToken)
	slack.SetClockOffset(-10 * time.Minute)
	slack.AddToken("xoxb-staging", fakeslack.Bot{UserID: "U0STAGING", BotID: "B0STAGING", AppID: "A0STAGING", TeamID: "T1"})
	slack.Script("chat.postMessage", fakeslack.Response{Store: true, Delay: time.Hour}) // stored, answer held
	cfg := procPostConfig(t, dir, slack.URL())
	env := procEnv("SLACK_BOT_TOKEN=" + procBotToken)
	const key = "EvSkew1:reply"

	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	ts := slack.AddMessage("C1", fakeslack.Message{User: "U1", Text: "<@UBOT> hi"})
	body, _ := json.Marshal(map[string]any{"token": "tok", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
		"event_id": "EvSkew1", "event_time": time.Now().Unix(),
		"event": map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBOT> hi", "ts": ts, "channel": "C1", "event_ts": ts}})
	d.mustPostEvent(body)
	procWaitFor(t, "the post stored at Slack", 20*time.Second, func() bool {
		return len(slack.MessagesWithKey("C1", key)) == 1
	})
	d.kill()
	// Staging's post with the same key, newer than ours: read first.
	slack.AddMessage("C1", fakeslack.Message{User: "U0STAGING", BotID: "B0STAGING", AppID: "A0STAGING", Subtype: "bot_message", Text: "staging",
		Metadata: map[string]any{"event_type": "ackd_effect", "event_payload": map[string]any{"idempotency_key": key}}})

	d2 := procServe(t, procServeOpts{Config: cfg, DB: db, Env: env})
	procWaitFor(t, "the row done after the dead lease ran out", 30*time.Second, func() bool {
		_, status, _ := procRowByKey(t, db, key)
		return status == "done"
	})
	d2.stop()

	var ours []fakeslack.Message
	for _, m := range slack.MessagesWithKey("C1", key) {
		if m.BotID == "B0FAKEBOT" {
			ours = append(ours, m)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("C1 holds %d of our messages for %s, want exactly 1", len(ours), key)
	}
	_, _, result := procRowByKey(t, db, key)
	var res map[string]string
	if err := json.Unmarshal([]byte(result), &res); err != nil || res["ts"] != ours[0].TS {
		t.Fatalf("result %q, want our own message's ts %s", result, ours[0].TS)
	}
	if n := len(slack.CallsTo("chat.postMessage")); n != 1 {
		t.Fatalf("chat.postMessage called %d times, want 1", n)
	}
	if !strings.Contains(d2.Stderr.String(), "posted by another bot") {
		t.Errorf("passing over staging's message is not logged:\n%s", procGrep(d2.Stderr.String(), "key"))
	}
}
