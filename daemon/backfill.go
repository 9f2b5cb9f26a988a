package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Catch-up ([backfill]) is the third ingress: package catchup reads the
// messages Slack never delivered from channel history, and this file turns
// each into what the live path would have recorded (Recovery), keeps each
// channel's mark moving with live message events (markTracker), and runs a
// catch-up after serve starts.

// Bounds of [backfill] rate and limit.
const (
	maxBackfillRate  = 6000 // calls a minute; Slack's busiest tier allows 100+
	maxBackfillLimit = 999  // Slack's maximum page size
)

var channelID = regexp.MustCompile(`^[CGD][A-Z0-9]+$`)

// BackfillChannels is the channels catch-up reads: backfill.channels and
// nothing else. Catch-up is opt-in: with none listed it is off (no marks,
// no catch-up at start), whatever the routes' channel filters say.
func (c *Config) BackfillChannels() []string {
	return c.Backfill.Channels
}

// takesMessages reports whether an Events API route takes message or
// app_mention events, the ones catch-up recovers.
func (r *Route) takesMessages() bool {
	return r.Command == "" && r.CallbackID == "" && r.ActionID == "" &&
		(r.matchesEvent("message") || r.matchesEvent("app_mention"))
}

// catchUpFeeds reports whether catch-up of channels would hand r
// recovered messages.
func (r *Route) catchUpFeeds(channels []string) bool {
	return r.takesMessages() && (r.Channel == "" || slices.Contains(channels, r.Channel))
}

// recoverable reports whether catch-up hands r recovered messages at all: a
// route keyed by event_id is left out (see validateBackfill).
func (r *Route) recoverable() bool {
	return r.Key == "message" && r.takesMessages()
}

// validateBackfill refuses [backfill] values that cannot work (the section
// is newer than 0.1.0, so no config that started before has one) and warns
// about a route catch-up cannot serve: one on a caught-up channel that keys
// by event_id. A recovered message has no event_id, and its live delivery
// (or a Delayed Events redelivery with a new event_id) would be keyed apart
// from it, so both would act: catch-up leaves such a route out, and the
// warning says how to bring it in.
func (c *Config) validateBackfill(warn func(format string, a ...any)) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	b := c.Backfill
	if b.MaxAge.Duration <= 0 {
		bad("backfill.max_age: %s must be positive (how far back catch-up may read, e.g. \"24h\")", b.MaxAge.Duration)
	}
	if b.Rate < 1 || b.Rate > maxBackfillRate {
		bad("backfill.rate: %d must be between 1 and %d calls a minute (Slack: internal apps Tier 3, 50+ a minute; new installs of apps distributed outside the Marketplace 1 a minute)", b.Rate, maxBackfillRate)
	}
	if b.Limit < 1 || b.Limit > maxBackfillLimit {
		bad("backfill.limit: %d must be between 1 and %d messages a page", b.Limit, maxBackfillLimit)
	}
	for _, ch := range b.Channels {
		if !channelID.MatchString(ch) {
			bad("backfill.channels: %q is not a Slack channel ID (C…, G… or D…; channel details → About)", ch)
		}
	}
	channels := c.BackfillChannels()
	if len(channels) == 0 {
		return errs
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Key != "message" && r.catchUpFeeds(channels) {
			warn("%s: catch-up ([backfill] channels %s) does not hand this route recovered messages: it keys rows by event_id, which a recovered message lacks, so a recovered message and its live delivery would both act. Set key = \"message\" (one row per {channel}:{ts}) to have catch-up recover its messages",
				c.routeWhere(i), strings.Join(channels, ", "))
		}
	}
	return errs
}

// prepareRoutes decides once what each route's rows carry: whether a
// forward (or a stream's question to its agent) is signed (ACKD_FORWARD_SECRET is set) and whether the row is
// performed from the stored request.
func prepareRoutes(routes []Route, sec Secrets) []Route {
	routes = slices.Clone(routes)
	for i := range routes {
		r := &routes[i]
		r.signed = (r.Effect == "forward" || r.Effect == sweep.EffectStep || r.Effect == "stream") && sec.ForwardSecret != ""
		r.fromRequest = r.needsRequest()
	}
	return routes
}

// Recovery returns catch-up's translation for this configuration: the live
// path's envelope parsing, filters and routes applied to a recovered
// message, made into the event_callback Slack would have sent.
// Only routes that key by message take part (recoverable): a recovered
// message for a route keyed by event_id would be a second row beside its
// live delivery's.
func Recovery(cfg Config, sec Secrets) catchup.Translate {
	cfg.Routes = slices.DeleteFunc(prepareRoutes(cfg.Routes, sec), func(r Route) bool { return !r.recoverable() })
	return cfg.recoveredIntents
}

// recoveredIntents is the intent of the message event a recovered message
// would have arrived as, and, when it mentions the bot, the intent of its
// app_mention. Receipts are "msg:{team}:{channel}:{ts}" and
// "mention:{team}:{channel}:{ts}"; rows are keyed as the live event's.
func (c Config) recoveredIntents(m catchup.Message, botUser string) ([]store.Intent, string, error) {
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
		rows, why, err := c.eventRows(env)
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
// memory and writes them every markFlush: the ack path only takes a mutex,
// and a mark that lags by a second is safe (catch-up reads a little more,
// and finds those messages recorded).
type markTracker struct {
	watched map[string]bool
	mu      sync.Mutex
	newest  map[string]string
}

// markFlush is how often live marks are written.
const markFlush = time.Second

func newMarkTracker(channels []string) *markTracker {
	w := map[string]bool{}
	for _, ch := range channels {
		w[ch] = true
	}
	return &markTracker{watched: w, newest: map[string]string{}}
}

// hiddenSubtypes are message events that tell of a change to another
// message (their ts is the change's): they say nothing of what was posted.
var hiddenSubtypes = []string{"message_changed", "message_deleted", "message_replied"}

// saw notes a live message event that was recorded or deliberately ignored.
func (t *markTracker) saw(in InnerEvent) {
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
func (t *markTracker) flush(ctx context.Context, st store.Store) error {
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
func (c Config) CatchUpConfig(sec Secrets, st store.Store, budget *slackrate.Budget) catchup.Config {
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

// catchUpLoop runs the catch-up of serve: once after start (on_start).
func (s *Server) catchUpOnStart() {
	cfg := s.cfg.CatchUpConfig(s.opts.Secrets, s.store, s.budget)
	cfg.Logger, cfg.Observer, cfg.HTTPClient = s.opts.Logger, s.metrics, s.opts.HTTPClient
	cu, err := catchup.New(cfg)
	if err != nil {
		s.log.Warn("catch-up is off", "reason", err.Error())
		return
	}
	s.log.Info("catch-up from each channel's mark", "channels", strings.Join(cfg.Channels, ","), "max_age", s.cfg.Backfill.MaxAge.String(),
		"rate", s.cfg.Backfill.Rate)
	res, err := cu.Run(s.ctx, time.Time{})
	switch {
	case errors.Is(err, context.Canceled):
		s.log.Info("catch-up stopped by shutdown; the next start resumes it", "summary", res.String())
	case err != nil:
		s.log.Error("catch-up failed", "err", err)
	case !res.Finished():
		s.log.Warn("catch-up finished with channels not read to the end", "summary", res.String())
	default:
		s.log.Info("catch-up finished", "summary", res.String())
	}
	if res.Totals().Recorded > 0 {
		s.Trigger()
	}
}

// markLoop writes live marks every markFlush, and once more at shutdown.
func (s *Server) markLoop() {
	write := func(ctx context.Context) {
		if err := s.marks.flush(ctx, s.store); err != nil && s.ctx.Err() == nil {
			s.log.Warn("could not write catch-up marks; kept for the next try", "err", err)
		}
	}
	t := time.NewTicker(markFlush)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			write(ctx)
			cancel()
			return
		case <-t.C:
			write(s.ctx)
		}
	}
}
