package daemon_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
)

func TestRouteConfigRules(t *testing.T) {
	cases := []struct {
		name, toml, want string
	}{
		{"a key the effect does not use", "[[route]]\nname = \"r\"\nevent = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\nurl = \"http://127.0.0.1:1/\"\n",
			"url is not used by effect react"},
		{"thread on a forward", "[[route]]\nname = \"r\"\nevent = \"message\"\neffect = \"forward\"\nurl = \"http://127.0.0.1:1/\"\nthread = true\n",
			"thread is not used by effect forward"},
		{"ack_text on an event route", "[[route]]\nname = \"r\"\nevent = \"message\"\neffect = \"log\"\nack_text = \"hi\"\n",
			"ack_text answers a slash command"},
		{"event and events together", "[[route]]\nname = \"r\"\nevent = \"message\"\nevents = [\"app_mention\"]\neffect = \"log\"\n",
			"set event or events, not both"},
		{"a wildcard in events", "[[route]]\nname = \"r\"\nevents = [\"*\"]\neffect = \"log\"\n",
			"events lists event types"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.toml))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line 1") {
				t.Fatalf("err = %v, want it to name line 1 and %q", err, tc.want)
			}
		})
	}

	t.Run("a file without routes keeps the built-in dry run and says so", func(t *testing.T) {
		cfg, err := config.Parse([]byte("listen = \"127.0.0.1:3001\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.Builtin || len(cfg.Routes) != 1 || cfg.Routes[0].Name != config.DefaultRouteName {
			t.Fatalf("routes %+v builtin %v", cfg.Routes, cfg.Builtin)
		}
		cfg.DB, cfg.Listen = t.TempDir()+"/ackd.db", "127.0.0.1:0"
		s := startServer(t, cfg, daemon.Options{})
		if s.Logs.Find("msg", "no routes configured: running the built-in dry run, which logs every event and performs nothing (give --config a file with [[route]] entries)") == nil {
			t.Fatal("the dry run was not announced")
		}
	})
}

func TestRouteMatching(t *testing.T) {
	s := startServer(t, configFor(t, `
[[route]]
name   = "msg"
events = ["message", "app_mention", "reaction_added"]
key    = "message"
effect = "log"

[[route]]
name    = "deploy-ops"
command = "/deploy"
channel = "COPS"
effect  = "log"
`), daemon.Options{})

	t.Run("a reaction does not take the row of the message it reacts to", func(t *testing.T) {
		msg := eventBody("EvM1", message("C1", "1.000100", "hi"))
		reaction := map[string]any{"type": "reaction_added", "user": "U2", "reaction": "eyes",
			"item": map[string]any{"type": "message", "channel": "C1", "ts": "1.000100"}, "event_ts": "2.0"}
		for _, b := range [][]byte{msg, eventBody("EvR1", reaction)} {
			if r := s.postEvent(b); r.Status != http.StatusOK {
				t.Fatalf("status %d", r.Status)
			}
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key IN ('C1:1.000100:msg', 'EvR1:msg')`); n != 2 {
			t.Fatalf("want the message keyed by its fact and the reaction by its event_id; got %d rows", n)
		}
	})

	t.Run("a channel on a command route limits it to that channel", func(t *testing.T) {
		other := s.postForm("/slack/commands", []byte("command=%2Fdeploy&text=x&trigger_id=9.1&channel_id=CDEV&user_id=U1"))
		ops := s.postForm("/slack/commands", []byte("command=%2Fdeploy&text=x&trigger_id=9.2&channel_id=COPS&user_id=U1"))
		if other.Status != 200 || ops.Status != 200 {
			t.Fatalf("statuses %d %d", other.Status, ops.Status)
		}
		if n := s.count(`SELECT count(*) FROM slack_event_receipts WHERE event_id = 'cmd:9.1'`); n != 0 {
			t.Fatal("a /deploy from another channel was recorded")
		}
		if n := s.count(`SELECT count(*) FROM outbox WHERE idempotency_key = 'cmd:9.2:deploy-ops'`); n != 1 {
			t.Fatal("the /deploy from the route's channel was not recorded")
		}
		if !strings.Contains(other.Body, "not handled") {
			t.Fatalf("the other channel's answer %q is not the unhandled text", other.Body)
		}
	})
}
