package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
)

func TestBackfillConfigRejectsWithTheKeyNamed(t *testing.T) {
	t.Parallel()
	const msgRoute = "[[route]]\nname = \"eyes\"\nevent = \"message\"\nchannel = \"C1\"\nkey = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n"
	for _, tc := range []struct {
		name string
		toml string
		want []string
	}{
		{"max_age of zero", "[backfill]\nmax_age = \"0s\"\n" + msgRoute, []string{"backfill.max_age", "must be positive"}},
		{"max_age not a duration", "[backfill]\nmax_age = \"a day\"\n" + msgRoute, []string{`"backfill.max_age"`, "line 2"}},
		{"rate of zero", "[backfill]\nrate = 0\n" + msgRoute, []string{"backfill.rate: 0", "calls a minute"}},
		{"rate too high", "[backfill]\nrate = 100000\n" + msgRoute, []string{"backfill.rate: 100000"}},
		{"limit above Slack's", "[backfill]\nlimit = 1000\n" + msgRoute, []string{"backfill.limit: 1000", "999"}},
		{"a channel that is no channel id", "[backfill]\nchannels = [\"#general\"]\n" + msgRoute, []string{`backfill.channels: "#general"`}},
		{"unknown key", "[backfill]\nchanels = [\"C1\"]\n" + msgRoute, []string{`unknown key "backfill.chanels"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.toml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	t.Run("an event-keyed route in a channel catch-up does not read is fine", func(t *testing.T) {
		c, err := config.Parse([]byte(msgRoute + "[[route]]\nname = \"ops\"\nevent = \"app_mention\"\nchannel = \"C2\"\neffect = \"log\"\n[backfill]\nchannels = [\"C1\"]\n"))
		if err != nil || len(c.Warnings) != 0 {
			t.Fatalf("err %v, warnings %q", err, c.Warnings)
		}
	})
}

// Issue 29.1: catch-up is opt-in. A route's channel filter never turns it
// on, and a route catch-up cannot serve (it keys by event_id) is a warning
// that names the route and the fix, never a refusal: 0.1.0 started such
// configs, and an upgrade must too.
func TestCatchUpIsOptIn(t *testing.T) {
	t.Parallel()
	t.Run("a message route on a channel, default key: catch-up stays off, no warning", func(t *testing.T) {
		c, err := config.Parse([]byte("[[route]]\nname = \"greet\"\nevent = \"message\"\nchannel = \"C1\"\neffect = \"post\"\ntext = \"hi\"\n" +
			"[[route]]\nname = \"m\"\nevent = \"app_mention\"\nchannel = \"C7\"\nkey = \"message\"\neffect = \"log\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.BackfillChannels(); len(got) != 0 {
			t.Errorf("catch-up channels %q, want none: [backfill] channels is unset", got)
		}
		if len(c.Warnings) != 0 {
			t.Errorf("warnings %q, want none", c.Warnings)
		}
	})
	t.Run("an empty list is off too", func(t *testing.T) {
		c, err := config.Parse([]byte("[backfill]\nchannels = []\n[[route]]\nname = \"eyes\"\nevent = \"message\"\nchannel = \"C1\"\nkey = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.BackfillChannels(); len(got) != 0 {
			t.Errorf("catch-up channels %q, want none", got)
		}
	})
	for _, tc := range []struct {
		name, toml, route string
	}{
		{"a mention route keyed by event_id on a caught-up channel",
			"[backfill]\nchannels = [\"C1\"]\n[[route]]\nname = \"fwd\"\nevent = \"app_mention\"\nchannel = \"C1\"\neffect = \"log\"\n", `line 3: route "fwd"`},
		{"a route on every event, keyed by event_id, with catch-up on",
			"[backfill]\nchannels = [\"C9\"]\n[[route]]\nname = \"all\"\nevent = \"*\"\neffect = \"log\"\n", `line 3: route "all"`},
	} {
		t.Run(tc.name+" is a warning", func(t *testing.T) {
			c, err := config.Parse([]byte(tc.toml))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if len(c.Warnings) != 1 {
				t.Fatalf("warnings %q, want one", c.Warnings)
			}
			for _, w := range []string{tc.route, "catch-up", "does not hand this route recovered messages", `key = "message"`} {
				if !strings.Contains(c.Warnings[0], w) {
					t.Errorf("warning %q does not say %q", c.Warnings[0], w)
				}
			}
		})
	}
}

const backfillToken = "xoxb-daemon-backfill"

// backfillServer is a daemon whose catch-up reads the fake Slack.
func backfillServer(t *testing.T, extra string) (*testServer, *fakeslack.Server) {
	t.Helper()
	fs := fakeslack.New(t, backfillToken)
	cfg := configFor(t, `
[sweep]
immediate = false
interval  = "1h"

[backfill]
channels = ["C1"]
on_start = false
rate     = 6000
`+extra+`
[[route]]
name     = "eyes"
events   = ["message", "app_mention"]
key      = "message"
effect   = "react"
reaction = "eyes"
`)
	cfg.Slack.APIURL = fs.URL()
	return startServer(t, cfg, daemon.Options{Secrets: config.Secrets{BotToken: backfillToken}}), fs
}

func catchUpNow(t *testing.T, s *testServer, cfg config.Config, fs *fakeslack.Server) catchup.Result {
	t.Helper()
	cc := ingress.CatchUpConfig(cfg, config.Secrets{BotToken: backfillToken}, s.Store(), slackrate.New(6000))
	cc.APIURL, cc.Logger = fs.URL(), slog.New(slog.DiscardHandler)
	cu, err := catchup.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cu.Run(context.Background(), time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLiveAndRecoveredDeliveriesActOnce(t *testing.T) {
	t.Parallel()
	s, fs := backfillServer(t, "")
	cfg := configFor(t, "[backfill]\nchannels = [\"C1\"]\n[[route]]\nname = \"eyes\"\nevents = [\"message\", \"app_mention\"]\nkey = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n")

	t.Run("live first, then catch-up: nothing added", func(t *testing.T) {
		ts := fs.AddMessage("C1", fakeslack.Message{User: "U1", Text: "hi <@U0FAKEBOT>"})
		for i, b := range [][]byte{eventBody("EvLive1", message("C1", ts, "hi <@U0FAKEBOT>")), eventBody("EvLive1m", mention("C1", ts, "hi <@U0FAKEBOT>"))} {
			if r := s.postEvent(b); r.Status != http.StatusOK || r.Header.Get(ingress.HeaderOutcome) != "first" {
				t.Fatalf("live delivery %d: %d %s", i, r.Status, r.Header.Get(ingress.HeaderOutcome))
			}
		}
		res := catchUpNow(t, s, cfg, fs)
		if tot := res.Totals(); tot.Recorded != 0 || tot.Duplicates != 1 {
			t.Fatalf("catch-up after live: %s", res)
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = ?`, "C1:"+ts+":eyes"); n != 1 {
			t.Fatalf("%d rows for the message", n)
		}
		if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id LIKE 'msg:%' OR event_id LIKE 'mention:%'`); n != 0 {
			t.Fatalf("%d recovered receipts for a message the live path had", n)
		}
	})

	t.Run("catch-up first, then late live deliveries with new event_ids: no second row", func(t *testing.T) {
		ts := fs.AddMessage("C1", fakeslack.Message{User: "U1", Text: "late <@U0FAKEBOT>"})
		res := catchUpNow(t, s, cfg, fs)
		if tot := res.Totals(); tot.Recorded != 1 {
			t.Fatalf("catch-up: %s", res)
		}
		// Slack's Delayed Events deliver the same message with event_ids
		// of their own, as message and as app_mention.
		for i, b := range [][]byte{eventBody("EvDelayed1", message("C1", ts, "late <@U0FAKEBOT>")), eventBody("EvDelayed1m", mention("C1", ts, "late <@U0FAKEBOT>"))} {
			if r := s.postEvent(b); r.Status != http.StatusOK {
				t.Fatalf("late delivery %d: %d", i, r.Status)
			}
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key LIKE ?`, "%"+ts+"%"); n != 1 {
			t.Fatalf("%d rows for one message delivered by catch-up and twice live", n)
		}
		if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id = ?`, "msg:T0FAKE:C1:"+ts); n != 1 {
			t.Fatalf("no receipt of its own kind for the recovered message")
		}
	})
}

// Issue 29.1: a route keyed by event_id on a caught-up channel is warned
// about, not refused, and catch-up leaves it out: its one row comes from
// the live delivery, while the route keyed by message acts once whichever
// delivery comes first.
func TestCatchUpLeavesOutRoutesKeyedByEvent(t *testing.T) {
	t.Parallel()
	const greet = "[[route]]\nname = \"greet\"\nevent = \"message\"\nchannel = \"C1\"\neffect = \"log\"\n"
	s, fs := backfillServer(t, greet)
	cfg := configFor(t, "[backfill]\nchannels = [\"C1\"]\n"+greet+"[[route]]\nname = \"eyes\"\nevents = [\"message\", \"app_mention\"]\nkey = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n")
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], `route "greet"`) {
		t.Fatalf("warnings %q, want one about route greet", cfg.Warnings)
	}
	ts := fs.AddMessage("C1", fakeslack.Message{User: "U1", Text: "sent while ackd was down"})
	if tot := catchUpNow(t, s, cfg, fs).Totals(); tot.Recorded != 1 {
		t.Fatalf("catch-up recorded %d messages, want 1", tot.Recorded)
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key LIKE '%greet'`); n != 0 {
		t.Fatalf("catch-up recorded %d rows for the route keyed by event_id", n)
	}
	// The live delivery arrives after all (a Delayed Events retry).
	if r := s.postEvent(eventBody("EvLate1", message("C1", ts, "sent while ackd was down"))); r.Status != http.StatusOK {
		t.Fatalf("live delivery: %d", r.Status)
	}
	for key, want := range map[string]int{"EvLate1:greet": 1, "C1:" + ts + ":eyes": 1} {
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = ?`, key); n != want {
			t.Errorf("%s: %d rows, want %d", key, n, want)
		}
	}
	if n := s.count(`SELECT count(*) FROM outbox`); n != 2 {
		t.Errorf("%d rows in all, want 2 (one per route)", n)
	}
}

func TestRecoveryIsTheLiveEventCallback(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
[slack]
bot_user_id = "UBOT"
[[route]]
name   = "fwd"
event  = "app_mention"
channel = "C1"
key    = "message"
effect = "forward"
url    = "http://127.0.0.1:1/app"
[[route]]
name   = "log"
event  = "message"
key    = "message"
effect = "log"
`))
	if err != nil {
		t.Fatal(err)
	}
	tr := ingress.Recovery(cfg, config.Secrets{})
	raw := []byte(`{"type":"message","user":"U1","text":"hi <@UBOT>","ts":"1700000000.000100","client_msg_id":"x","blocks":[]}`)
	intents, ignored, err := tr(catchup.Message{Team: "T1", Channel: "C1", TS: "1700000000.000100", User: "U1", Text: "hi <@UBOT>", Raw: raw}, "UOTHER")
	if err != nil || ignored != "" || len(intents) != 2 {
		t.Fatalf("intents %d, ignored %q, err %v", len(intents), ignored, err)
	}
	msg, men := intents[0], intents[1]
	if msg.EventID != "msg:T1:C1:1700000000.000100" || len(msg.Rows) != 1 || msg.Rows[0].Key != "C1:1700000000.000100:log" || msg.Request != nil {
		t.Errorf("message intent %+v", msg)
	}
	if men.EventID != "mention:T1:C1:1700000000.000100" || len(men.Rows) != 1 || men.Rows[0].Key != "C1:1700000000.000100:fwd" || men.Request == nil {
		t.Fatalf("mention intent %+v", men)
	}
	// forward sends the envelope Slack would have: an app_mention with the
	// message's own fields, flagged as recovered.
	body := string(men.Request.Body)
	for _, w := range []string{`"ackd_recovered":true`, `"channel":"C1"`, `"type":"app_mention"`, `"event_id":"mention:T1:C1:1700000000.000100"`, `"client_msg_id":"x"`, `"team_id":"T1"`} {
		if !strings.Contains(body, w) {
			t.Errorf("stored request %s lacks %s", body, w)
		}
	}
	t.Run("the filters are the live path's", func(t *testing.T) {
		for _, m := range []catchup.Message{
			{Team: "T1", Channel: "C1", TS: "1700000000.000200", User: "UBOT", Text: "my own <@UBOT>"},
			{Team: "T1", Channel: "C1", TS: "1700000000.000300", BotID: "B1", Subtype: "bot_message", Text: "<@UBOT>"},
			{Team: "T1", Channel: "C1", TS: "1700000000.000400", User: "U2", Subtype: "channel_join", Text: "<@U2> has joined"},
		} {
			in, why, err := tr(m, "UOTHER")
			if err != nil || len(in) != 0 || why == "" {
				t.Errorf("%+v: %d intents, ignored %q, err %v", m, len(in), why, err)
			}
		}
	})
}

func TestLiveMessagesMoveTheMark(t *testing.T) {
	t.Parallel()
	s, _ := backfillServer(t, "")
	ts := store.TimeTS(time.Now())
	for i, b := range [][]byte{
		eventBody("EvMark1", message("C1", ts, "hi")),
		// Ignored, yet delivered: it moves the mark too.
		eventBody("EvMark2", map[string]any{"type": "message", "subtype": "channel_join", "user": "U3", "text": "joined", "ts": store.TimeTS(time.Now().Add(time.Millisecond)), "channel": "C1"}),
		// A channel catch-up does not read has no mark.
		eventBody("EvMark3", message("C5", ts, "elsewhere")),
	} {
		if r := s.postEvent(b); r.Status != http.StatusOK {
			t.Fatalf("event %d: %d", i, r.Status)
		}
	}
	waitFor(t, "the live mark", 10*time.Second, func() bool {
		ms, err := s.Store().Marks(context.Background())
		return err == nil && len(ms) == 1 && ms[0].Channel == "C1" && ms[0].TS > ts
	})
}

func TestCatchUpRunsAfterServeStarts(t *testing.T) {
	t.Parallel()
	fs := fakeslack.New(t, backfillToken)
	cfg := configFor(t, "[sweep]\nimmediate = false\ninterval = \"1h\"\n[backfill]\nchannels = [\"C1\"]\nrate = 6000\n"+
		"[[route]]\nname = \"eyes\"\nevent = \"message\"\nkey = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n")
	cfg.Slack.APIURL = fs.URL()
	// A mark from before the outage, and messages that arrived during it.
	schemaStore := openStore(t, cfg.DB)
	mark := store.TimeTS(time.Now())
	if err := schemaStore.AdvanceMarks(context.Background(), []store.Mark{{Channel: "C1", TS: mark}}); err != nil {
		t.Fatal(err)
	}
	for store.TimeTS(time.Now()) <= mark {
		time.Sleep(10 * time.Microsecond) // the fake's next ts is after the mark
	}
	schemaStore.Close()
	var want []string
	for i := range 5 {
		want = append(want, "C1:"+fs.AddMessage("C1", fakeslack.Message{User: "U1", Text: fmt.Sprint("during the outage ", i)})+":eyes")
	}
	s := startServer(t, cfg, daemon.Options{Secrets: config.Secrets{BotToken: backfillToken}})
	waitFor(t, "catch-up's rows", 10*time.Second, func() bool {
		return s.count(`SELECT count(*) FROM outbox`) == len(want)
	})
	for _, k := range want {
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = ?`, k); n != 1 {
			t.Errorf("%s: %d rows", k, n)
		}
	}
	// Logged when the channel's catch-up ends, just after its last commit.
	waitFor(t, "the warning that catch-up found missed messages", 10*time.Second, func() bool {
		return s.Logs.Find("msg", "catch-up recorded messages the live path had missed", "recorded", float64(len(want))) != nil
	})
}

func openStore(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := daemon.OpenStore(context.Background(), path, store.Options{Schema: readSchema(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
