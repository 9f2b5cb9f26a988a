package ingress

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Recovery returns catch-up's translation for this configuration: the live
// path's envelope parsing, filters and routes applied to a recovered
// message, made into the event_callback Slack would have sent.
// Only routes that key by message take part (recoverable): a recovered
// message for a route keyed by event_id would be a second row beside its
// live delivery's.
func Recovery(cfg config.Config, sec config.Secrets) catchup.Translate {
	cfg.Routes = slices.DeleteFunc(config.PrepareRoutes(cfg.Routes, sec), func(r config.Route) bool { return !r.Recoverable() })
	return func(m catchup.Message, botUser string) ([]store.Intent, string, error) {
		return recoveredIntents(cfg, m, botUser)
	}
}

// recoveredIntents is the intent of the message event a recovered message
// would have arrived as, and, when it mentions the bot, the intent of its
// app_mention. Receipts are "msg:{team}:{channel}:{ts}" and
// "mention:{team}:{channel}:{ts}"; rows are keyed as the live event's.
func recoveredIntents(c config.Config, m catchup.Message, botUser string) ([]store.Intent, string, error) {
	if c.Slack.BotUserID == "" {
		c.Slack.BotUserID = botUser // its own messages are ignored as the live path would
	}
	var out []store.Intent
	ignored := ""
	for _, typ := range []string{"message", "app_mention"} {
		id := store.RecoveredMessagePrefix
		if typ == "app_mention" {
			if !mentions(m.Text, c.Slack.BotUserID) {
				continue
			}
			id = store.RecoveredMentionPrefix
		}
		id += m.Team + ":" + m.Channel + ":" + m.TS
		body, err := recoveredBody(m, typ, id)
		if err != nil {
			return nil, "", err
		}
		env, err := ParseEnvelope(body)
		if err != nil {
			return nil, "", err
		}
		rows, why, err := eventRows(&c, env)
		if err != nil {
			return nil, "", err
		}
		if why != "" {
			if ignored == "" {
				ignored = why
			}
			continue
		}
		out = append(out, withRequest(store.Intent{EventID: id, EventType: typ + " (recovered)", Rows: rows}, sweep.ContentTypeJSON, body))
	}
	if len(out) > 0 {
		ignored = ""
	}
	return out, ignored, nil
}

// mentions reports whether text mentions user (<@U…> or <@U…|name>).
func mentions(text, user string) bool {
	return user != "" && (strings.Contains(text, "<@"+user+">") || strings.Contains(text, "<@"+user+"|"))
}

// recoveredBody is the event_callback Slack would have sent for m: the
// message as history holds it, with its channel, type and event_ts, in an
// envelope that says it was recovered ("ackd_recovered": true).
func recoveredBody(m catchup.Message, typ, eventID string) ([]byte, error) {
	var ev map[string]any
	if err := json.Unmarshal(m.Raw, &ev); err != nil || ev == nil {
		ev = map[string]any{"ts": m.TS, "text": m.Text}
		for k, v := range map[string]string{"user": m.User, "bot_id": m.BotID, "subtype": m.Subtype, "thread_ts": m.ThreadTS} {
			if v != "" {
				ev[k] = v
			}
		}
	}
	ev["type"], ev["channel"], ev["event_ts"] = typ, m.Channel, m.TS
	if typ == "app_mention" {
		delete(ev, "subtype")
	}
	return json.Marshal(map[string]any{
		"type": "event_callback", "team_id": m.Team, "event_id": eventID,
		"event_time": store.TSTime(m.TS).Unix(), "event": ev, "ackd_recovered": true,
	})
}

// markTracker keeps the newest live message ts per watched channel in
// memory and writes them every MarkFlush: the ack path only takes a mutex,
// and a mark that lags by a second is safe (catch-up reads a little more,
// and finds those messages recorded).
type MarkTracker struct {
	watched map[string]bool
	mu      sync.Mutex
	newest  map[string]string
}

// MarkFlush is how often live marks are written.
const MarkFlush = time.Second

func newMarkTracker(channels []string) *MarkTracker {
	w := map[string]bool{}
	for _, ch := range channels {
		w[ch] = true
	}
	return &MarkTracker{watched: w, newest: map[string]string{}}
}

// hiddenSubtypes are message events that tell of a change to another
// message (their ts is the change's): they say nothing of what was posted.
var hiddenSubtypes = []string{"message_changed", "message_deleted", "message_replied"}

// saw notes a live message event that was recorded or deliberately ignored.
func (t *MarkTracker) saw(in InnerEvent) {
	if t == nil || in.Type != "message" || !t.watched[in.Channel] || !store.ValidTS(in.TS) || slices.Contains(hiddenSubtypes, in.Subtype) {
		return
	}
	t.mu.Lock()
	if in.TS > t.newest[in.Channel] {
		t.newest[in.Channel] = in.TS
	}
	t.mu.Unlock()
}

// flush writes the marks seen since the last flush; on failure they are
// kept for the next one.
func (t *MarkTracker) Flush(ctx context.Context, st store.Store) error {
	t.mu.Lock()
	var marks []store.Mark
	for ch, ts := range t.newest {
		marks = append(marks, store.Mark{Channel: ch, TS: ts})
	}
	clear(t.newest)
	t.mu.Unlock()
	if len(marks) == 0 {
		return nil
	}
	err := st.AdvanceMarks(ctx, marks)
	if err != nil {
		t.mu.Lock()
		for _, m := range marks {
			if m.TS > t.newest[m.Channel] {
				t.newest[m.Channel] = m.TS
			}
		}
		t.mu.Unlock()
	}
	return err
}

// CatchUpConfig maps the configuration onto catch-up's, for serve and
// `ackd backfill`: the channels, bounds and translation, with budget the
// process's one pace of history calls.
func CatchUpConfig(c config.Config, sec config.Secrets, st store.Store, budget *slackrate.Budget) catchup.Config {
	cc := catchup.Config{
		Channels: c.BackfillChannels(), MaxAge: c.Backfill.MaxAge.Duration, Limit: c.Backfill.Limit,
		Replies: c.Backfill.Replies, Token: sec.BotToken, APIURL: c.Slack.APIURL, BotUserID: c.Slack.BotUserID,
		Budget: budget, Translate: Recovery(c, sec), Store: st,
		// Never further back than done rows are kept: a message whose rows
		// were pruned would be recorded and performed again.
		KeepDone: c.Retention.Done.Duration,
	}
	if st != nil {
		cc.Now = st.Now // the clock the store prunes by
	}
	return cc
}
