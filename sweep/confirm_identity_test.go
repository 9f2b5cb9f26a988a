package sweep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Issue 29.4 and 29.5: a post is confirmed by its key AND this app's bot,
// and the lookup's window is on Slack's clock.

// stagingBot is another app in the same workspace and channel (a staging
// app beside production) whose routes have the same names, so its posts
// carry the same keys.
var stagingBot = fakeslack.Bot{UserID: "U0STAGING", BotID: "B0STAGING", AppID: "A0STAGING", TeamID: "T0FAKE"}

const stagingToken = "xoxb-staging"

// installTokens is a TokenSource ([oauth]): installation key → token.
type installTokens map[string]string

func (m installTokens) BotToken(_ context.Context, key string) (string, error) {
	if tok, ok := m[key]; ok {
		return tok, nil
	}
	return "", fmt.Errorf("%w: %s", sweep.ErrNotInstalled, key)
}

// enqueue records one post row to C1 with the given facts.
func (r *confirmRig) enqueue(t *testing.T, key string, facts sweep.Facts) {
	t.Helper()
	facts.EventID, facts.Channel = key, "C1"
	p, _ := sweep.Payload{Route: "r", Source: sweep.SourceEvent,
		Params: sweep.Params{Channel: "C1", Text: "hello " + key, Literal: true}, Facts: facts}.Encode()
	if _, err := r.st.RecordIntent(context.Background(), store.Intent{EventID: key, EventType: "message",
		Rows: []store.NewRow{{Key: key, Effect: "post", Payload: p}}}); err != nil {
		t.Fatal(err)
	}
}

// postAs posts a message with key's metadata into C1 with token, as the
// app owning it would (the fake stamps its bot).
func postAs(t *testing.T, api *fakeslack.Server, token, key string) string {
	t.Helper()
	md, _ := json.Marshal(map[string]any{"event_type": sweep.MetadataEventType, "event_payload": map[string]any{"idempotency_key": key}})
	return api.AddMessage("C1", fakeslack.Message{User: stagingBot.UserID, BotID: stagingBot.BotID, AppID: stagingBot.AppID,
		Subtype: "bot_message", Text: "staging says hi", Metadata: jsonMap(t, md)})
}

func jsonMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// resultTS is the ts a done row's result names.
func resultTS(t *testing.T, row store.Row) string {
	t.Helper()
	var res map[string]string
	if err := json.Unmarshal([]byte(row.Result), &res); err != nil {
		t.Fatalf("result %q: %v", row.Result, err)
	}
	return res["ts"]
}

// byBot counts C1's messages carrying key, by bot_id.
func byBot(api *fakeslack.Server, key string) map[string][]fakeslack.Message {
	out := map[string][]fakeslack.Message{}
	for _, m := range api.MessagesWithKey("C1", key) {
		out[m.BotID] = append(out[m.BotID], m)
	}
	return out
}

func TestConfirmOurOwnPostsOnly(t *testing.T) {
	t.Run("another app's message with the same key is not ours: the row posts once itself", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.AddToken(stagingToken, stagingBot)
		// The first post answers 500 and stores nothing; staging posts its
		// own message with the same key meanwhile.
		r.api.Script("chat.postMessage", fakeslack.Status(500))
		r.enqueuePost(t, "C1:1700000000.000100:greet", "")
		r.sweepOnce(t)
		postAs(t, r.api, stagingToken, "C1:1700000000.000100:greet")
		row := r.doneRow(t, "C1:1700000000.000100:greet")
		got := byBot(r.api, row.Key)
		if len(got["B0FAKEBOT"]) != 1 || len(got["B0STAGING"]) != 1 {
			t.Fatalf("messages with the key by bot: %v; want one of ours (posted by the row) and staging's", got)
		}
		if ts := resultTS(t, row); ts != got["B0FAKEBOT"][0].TS {
			t.Fatalf("the row is done with ts %s, want our own message's %s (staging's is %s)", ts, got["B0FAKEBOT"][0].TS, got["B0STAGING"][0].TS)
		}
		if r.lookups(sweep.ConfirmNotFound) != 1 || !strings.Contains(row.Note, "no earlier post") {
			t.Fatalf("lookups %v, note %q", r.tally, row.Note)
		}
		if line := r.logs.find("posted by another bot"); !strings.Contains(line, "bot_id=B0STAGING") {
			t.Fatalf("passing over staging's message is not logged: %q", line)
		}
		if n := len(r.api.CallsTo("auth.test")); n != 1 {
			t.Fatalf("auth.test called %d times, want once", n)
		}
	})

	t.Run("our own message is found among another app's with the same key", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.AddToken(stagingToken, stagingBot)
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"})
		r.enqueuePost(t, "Ev1:post", "")
		postAs(t, r.api, stagingToken, "Ev1:post") // older than ours
		r.sweepOnce(t)
		postAs(t, r.api, stagingToken, "Ev1:post") // newer than ours: read first
		row := r.doneRow(t, "Ev1:post")
		got := byBot(r.api, row.Key)
		if len(got["B0FAKEBOT"]) != 1 || resultTS(t, row) != got["B0FAKEBOT"][0].TS {
			t.Fatalf("by bot %v, result %s", got, row.Result)
		}
		if n := len(r.api.CallsTo("chat.postMessage")); n != 1 || r.lookups(sweep.ConfirmFound) != 1 {
			t.Fatalf("%d posts, lookups %v", n, r.tally)
		}
	})

	t.Run("[oauth]: each installation's bot is learned with its own token, once per token", func(t *testing.T) {
		t.Parallel()
		tokens := installTokens{"T1": "xoxb-T1", "T2": "xoxb-T2"}
		r := newConfirmRig(t, func(ec *sweep.EffectConfig) { ec.BotToken, ec.Tokens = "", tokens })
		r.api.AddToken("xoxb-T1", fakeslack.Bot{UserID: "U0BOT1", BotID: "B0BOT1", AppID: "A0PROD", TeamID: "T1"})
		r.api.AddToken("xoxb-T2", fakeslack.Bot{UserID: "U0BOT2", BotID: "B0BOT2", AppID: "A0PROD", TeamID: "T2"})
		r.api.AddToken(stagingToken, stagingBot)
		bad := fakeslack.Response{Store: true, Error: "internal_error"}
		r.api.Script("chat.postMessage", bad, bad, bad)
		for _, k := range []string{"T1:a", "T1:b", "T2:a"} {
			r.enqueue(t, k, sweep.Facts{Install: strings.Split(k, ":")[0]})
		}
		r.sweepOnce(t) // three ambiguous posts, each stored as its installation's bot
		for _, k := range []string{"T1:a", "T1:b", "T2:a"} {
			postAs(t, r.api, stagingToken, k) // and staging's, newer, with the same keys
		}
		want := map[string]string{"T1:a": "B0BOT1", "T1:b": "B0BOT1", "T2:a": "B0BOT2"}
		for k, bot := range want {
			row := r.doneRow(t, k)
			got := byBot(r.api, k)
			if len(got[bot]) != 1 || resultTS(t, row) != got[bot][0].TS {
				t.Fatalf("%s: by bot %v, result %s, want %s's message", k, got, row.Result, bot)
			}
		}
		if n := len(r.api.CallsTo("chat.postMessage")); n != 3 {
			t.Fatalf("%d posts, want the 3 first attempts only", n)
		}
		perToken := map[string]int{}
		for _, c := range r.api.CallsTo("auth.test") {
			perToken[c.Token]++
		}
		if len(perToken) != 2 || perToken["xoxb-T1"] != 1 || perToken["xoxb-T2"] != 1 {
			t.Fatalf("auth.test calls by token %v, want one per installation's token", perToken)
		}

		// A rotated token is asked again: the bot is the token's.
		tokens["T1"] = "xoxb-T1-rotated"
		r.api.AddToken("xoxb-T1-rotated", fakeslack.Bot{UserID: "U0BOT1", BotID: "B0BOT1", AppID: "A0PROD", TeamID: "T1"})
		r.api.Script("chat.postMessage", bad)
		r.enqueue(t, "T1:c", sweep.Facts{Install: "T1"})
		row := r.doneRow(t, "T1:c")
		if got := byBot(r.api, "T1:c"); len(got["B0BOT1"]) != 1 || resultTS(t, row) != got["B0BOT1"][0].TS {
			t.Fatalf("after rotation: %v, %s", got, row.Result)
		}
		if n := len(r.api.CallsTo("auth.test")); n != 3 {
			t.Fatalf("auth.test called %d times in all, want 3 (the rotated token asked once)", n)
		}
	})

	t.Run("auth.test refuses the token: lookup impossible, posted (at-least-once), said on the row and logged once", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.Script("auth.test", fakeslack.Err("invalid_auth"), fakeslack.Err("invalid_auth"))
		bad := fakeslack.Response{Store: true, Error: "internal_error"}
		r.api.Script("chat.postMessage", bad, bad)
		r.enqueuePost(t, "Ev1:post", "")
		r.enqueuePost(t, "Ev2:post", "")
		for _, k := range []string{"Ev1:post", "Ev2:post"} {
			row := r.doneRow(t, k)
			if n := len(r.api.MessagesWithKey("C1", k)); n != 2 {
				t.Fatalf("%s: %d messages, want 2 (documented at-least-once)", k, n)
			}
			if !strings.Contains(row.Note, "confirmed: lookup impossible (auth.test: invalid_auth") {
				t.Fatalf("%s: note %q", k, row.Note)
			}
		}
		if n := len(r.api.CallsTo("conversations.history")); n != 0 {
			t.Fatalf("%d history reads without knowing the bot", n)
		}
		if n := strings.Count(strings.Join(r.logs.lines, ""), "cannot tell this app's own posts"); n != 1 {
			t.Fatalf("logged %d times, want once", n)
		}
		if r.lookups(sweep.ConfirmImpossible) != 2 {
			t.Fatalf("lookups %v", r.tally)
		}
	})

	t.Run("auth.test names no bot_id (not a bot token): lookup impossible, posted", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.SetBot("U0PERSON", "", "T0FAKE")
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"})
		r.enqueuePost(t, "Ev1:post", "")
		row := r.doneRow(t, "Ev1:post")
		if !strings.Contains(row.Note, "lookup impossible (auth.test: no_bot_id") || len(r.api.MessagesWithKey("C1", "Ev1:post")) != 2 {
			t.Fatalf("note %q, %d messages", row.Note, len(r.api.MessagesWithKey("C1", "Ev1:post")))
		}
	})

	t.Run("auth.test fails for now (a 500): nothing posted until it answers, then found", func(t *testing.T) {
		t.Parallel()
		r := newConfirmRig(t)
		r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"})
		r.api.Script("auth.test", fakeslack.Status(500))
		r.enqueuePost(t, "Ev1:post", "")
		r.sweepOnce(t) // the ambiguous post
		r.sweepOnce(t) // auth.test answers 500
		if row, _ := r.st.GetByKey(context.Background(), "Ev1:post"); row.Status != store.StatusPending || !strings.Contains(row.LastError, "learning which bot") {
			t.Fatalf("after auth.test's 500: %+v", row)
		}
		row := r.doneRow(t, "Ev1:post")
		r.mustOnePost(t, row)
		if n := len(r.api.CallsTo("chat.postMessage")); n != 1 {
			t.Fatalf("%d posts, want 1", n)
		}
	})
}

func TestConfirmWindowOnSlacksClock(t *testing.T) {
	// Slack's clock minus ackd's: negative = ackd's clock is ahead.
	for _, off := range []time.Duration{-10 * time.Minute, -3 * time.Minute, 3 * time.Minute, 10 * time.Minute} {
		for _, tc := range []struct {
			name  string
			facts func(api *fakeslack.Server) sweep.Facts
		}{
			{"a message event's row (bound: its ts)", func(api *fakeslack.Server) sweep.Facts {
				return sweep.Facts{TS: api.AddMessage("C1", fakeslack.Message{User: "U1", Text: "hi"})}
			}},
			{"an event without a message (bound: its event_ts)", func(api *fakeslack.Server) sweep.Facts {
				ts := store.TimeTS(api.Now())
				return sweep.Facts{Event: json.RawMessage(`{"type":"member_joined_channel","event_ts":"` + ts + `"}`)}
			}},
			{"a slash command's row (bound: its first claim, by the measured offset)", func(*fakeslack.Server) sweep.Facts {
				return sweep.Facts{Command: "/greet"}
			}},
		} {
			t.Run(fmt.Sprintf("Slack's clock %+v: %s: one message", off, tc.name), func(t *testing.T) {
				t.Parallel()
				r := newConfirmRig(t)
				r.api.SetClockOffset(off)
				r.api.Script("chat.postMessage", fakeslack.Response{Store: true, Error: "internal_error"})
				r.enqueue(t, "Ev1:post", tc.facts(r.api))
				r.sweepOnce(t)
				for i := range 20 { // chatter after the post
					r.api.AddMessage("C1", fakeslack.Message{User: "U1", Text: fmt.Sprint("chatter ", i)})
				}
				row := r.doneRow(t, "Ev1:post")
				r.mustOnePost(t, row)
				if n := len(r.api.CallsTo("chat.postMessage")); n != 1 || r.lookups(sweep.ConfirmFound) != 1 {
					t.Fatalf("%d posts, lookups %v; note %q", n, r.tally, row.Note)
				}
			})
		}
	}
}
