// Package catchup is ackd's third ingress: it recovers channel messages
// Slack never delivered (retries exhausted, an incident Slack did not
// replay, the app rate limited, the VM down) from conversations.history and
// conversations.replies, and records for each the intents the live message
// event (and, when it mentions the bot, the app_mention) would have
// recorded. The daemon passes in the translation it uses for live events
// (Translate), so the same route matching and filters apply and the rows
// carry the same fact keys ({channel}:{ts}:{route}): a recovered message and
// its live delivery act once, whichever comes first.
//
// A run reads each channel from its mark (store.Mark; or from a given time)
// back to max_age at most, newest page first with Slack's cursors (never
// stored: they expire), then the threads whose latest_reply is newer than
// where it starts. It records the messages oldest first, each in its own
// transaction together with the channel's mark and resume point, so a run
// cut short resumes where it stopped and nothing is recorded twice. Calls
// are paced by a shared slackrate.Budget; a 429 holds the method for its
// Retry-After and the refused page is fetched again.
//
// Limits: history keeps only what is there now. An edited message is
// recovered with its current text, a deleted one not at all; reactions,
// slash commands and interactions have no history. A recovered message is
// acted on as if it had been delivered late. A thread reply is found only
// through its parent, and only while the parent is within max_age.
package catchup

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
)

// Message is one message read from history.
type Message struct {
	Team, Channel string
	TS, ThreadTS  string
	User, BotID   string
	Subtype, Text string
	Raw           json.RawMessage // the message object as Slack sent it
}

// Translate turns a recovered message into the intents the live path would
// have recorded for it, or the reason it would have ignored it. botUser is
// the bot's user id (its own messages are ignored; <@botUser> in the text is
// a mention).
type Translate func(m Message, botUser string) (intents []store.Intent, ignored string, err error)

// Outcomes of a recovered message, as counted and in
// ackd_catchup_messages_total.
const (
	OutcomeRecorded  = "recorded"  // catch-up recorded rows the live path had not: it was missed
	OutcomeDuplicate = "duplicate" // every row was there already
	OutcomeFiltered  = "filtered"  // the live path would have ignored it too
)

// Observer receives what metrics need. Implementations must be safe for
// concurrent use.
type Observer interface {
	Messages(outcome string, n int)
	// Waited is a wait for the budget: reason "pace" or "retry_after".
	Waited(method, reason string, d time.Duration)
}

// Config configures a CatchUp.
type Config struct {
	Channels  []string
	MaxAge    time.Duration // never read further back than this
	Limit     int           // messages per page (default 200)
	Replies   bool          // read threads whose latest_reply is newer than the start
	Token     string        // bot token (channels:history, groups:history, …)
	APIURL    string        // Web API base; empty = Slack's
	BotUserID string        // empty: auth.test's user_id
	DryRun    bool          // record nothing; count what would be recorded
	Batch     int           // messages recorded per transaction (default 50)

	Budget     *slackrate.Budget // shared pace; nil: one of 20 calls a minute
	Translate  Translate
	Store      store.Store
	HTTPClient *http.Client
	Logger     *slog.Logger
	Observer   Observer       // may be nil
	Progress   func(Progress) // called after each page and when a channel ends; may be nil
	Now        func() time.Time
}

// Progress is one channel's progress so far.
type Progress struct {
	Channel     string
	Pages       int // history and replies pages read
	Messages    int // messages newer than the start, recovered from them
	Recorded    int
	Duplicates  int
	Filtered    int
	RateLimited int           // 429s honoured
	Waited      time.Duration // time spent waiting for the budget and Retry-After
	From, To    string        // the ts range read: after From, before To
	Done        bool
	Err         error // why the channel stopped early (Done is then true)
	Note        string
}

// Result is what one Run did.
type Result struct {
	Channels []Progress
}

// Finished reports whether every channel was read to the end.
func (r Result) Finished() bool {
	return !slices.ContainsFunc(r.Channels, func(p Progress) bool { return p.Err != nil })
}

// Totals sums the channels.
func (r Result) Totals() Progress {
	var t Progress
	for _, p := range r.Channels {
		t.Pages += p.Pages
		t.Messages += p.Messages
		t.Recorded += p.Recorded
		t.Duplicates += p.Duplicates
		t.Filtered += p.Filtered
		t.RateLimited += p.RateLimited
		t.Waited += p.Waited
	}
	return t
}

// String is the summary line.
func (r Result) String() string {
	t := r.Totals()
	failed := 0
	for _, p := range r.Channels {
		if p.Err != nil {
			failed++
		}
	}
	return fmt.Sprintf("channels=%d failed=%d pages=%d messages=%d recorded=%d duplicates=%d filtered=%d rate_limited=%d waited=%s",
		len(r.Channels), failed, t.Pages, t.Messages, t.Recorded, t.Duplicates, t.Filtered, t.RateLimited, t.Waited.Round(time.Millisecond))
}

// CatchUp recovers messages from channel history.
type CatchUp struct {
	cfg Config
	api *api
	log *slog.Logger
}

// New checks cfg and returns a CatchUp.
func New(cfg Config) (*CatchUp, error) {
	if cfg.Token == "" {
		return nil, errors.New("catch-up reads channel history with the bot token: set SLACK_BOT_TOKEN (or SLACK_BOT_TOKEN_FILE)")
	}
	if cfg.Translate == nil || cfg.Store == nil {
		return nil, errors.New("catch-up: no translation or store")
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	if cfg.Limit <= 0 {
		cfg.Limit = 200
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 50
	}
	if cfg.Budget == nil {
		cfg.Budget = slackrate.New(20)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	base := cmp.Or(cfg.APIURL, "https://slack.com/api/")
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return &CatchUp{cfg: cfg, api: &api{base: base, token: cfg.Token, hc: cfg.HTTPClient},
		log: cfg.Logger.With("component", "catchup")}, nil
}

// Run catches up every configured channel, one after another. With since
// zero each channel is read from its mark (or its resume point, when a
// catch-up was cut short); a channel without a mark gets one at now and is
// not read (ackd has recorded nothing there to catch up from). With since
// set, each is read from since. Either way never further back than max_age.
// The error is for what stops the whole run (auth.test failing, ctx); a
// channel that fails is reported in its Progress and the run goes on.
func (c *CatchUp) Run(ctx context.Context, since time.Time) (Result, error) {
	team, user, err := c.api.authTest(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("catch-up: auth.test: %w", err)
	}
	botUser := cmp.Or(c.cfg.BotUserID, user)
	var res Result
	for _, ch := range c.cfg.Channels {
		p := c.channel(ctx, team, botUser, ch, since)
		res.Channels = append(res.Channels, p)
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (c *CatchUp) channel(ctx context.Context, team, botUser, ch string, since time.Time) (p Progress) {
	p.Channel = ch
	now := c.cfg.Now()
	floor := store.TimeTS(now.Add(-c.cfg.MaxAge))
	// Everything before `end` is read; messages after it are the live
	// path's, and the next run's.
	end := store.TimeTS(now)
	p.To = end
	defer func() {
		p.Done = true
		if p.Err != nil {
			c.log.Warn("catch-up of a channel stopped", "channel", ch, "err", p.Err, "recorded", p.Recorded)
		} else if p.Recorded > 0 {
			c.log.Warn("catch-up recorded messages the live path had missed", "channel", ch, "recorded", p.Recorded,
				"duplicates", p.Duplicates, "filtered", p.Filtered, "from", p.From, "to", p.To)
		} else {
			c.log.Info("catch-up", "channel", ch, "messages", p.Messages, "duplicates", p.Duplicates, "filtered", p.Filtered, "from", p.From, "to", p.To)
		}
		c.progress(p)
	}()

	resume := false
	// A run from a given time moves the mark only if it read from the mark
	// or before: otherwise the messages between them are still unread.
	moveMark := true
	switch {
	case !since.IsZero():
		p.From = store.TimeTS(since)
		m, ok, err := c.mark(ctx, ch)
		if err != nil {
			p.Err = err
			return p
		}
		moveMark = !ok || p.From <= m.TS
	case c.cfg.DryRun:
		m, ok, err := c.mark(ctx, ch)
		if err != nil {
			p.Err = err
			return p
		}
		if !ok {
			p.Note = "no mark yet: nothing to catch up from"
			return p
		}
		p.From = cmp.Or(m.ResumeFrom, m.TS)
	default:
		m, ok, err := c.cfg.Store.BeginCatchUp(ctx, ch)
		if err != nil {
			p.Err = err
			return p
		}
		if !ok {
			// Nothing ever recorded here: the mark starts now, so that an
			// outage from now on is caught up.
			p.Note = "no mark yet: the mark starts now"
			if err := c.cfg.Store.AdvanceMarks(ctx, []store.Mark{{Channel: ch, TS: end}}); err != nil {
				p.Err = err
			}
			return p
		}
		p.From, resume = cmp.Or(m.ResumeFrom, m.TS), true
	}
	if p.From < floor {
		if since.IsZero() {
			c.log.Warn("the channel's mark is older than max_age: messages before max_age are not recovered (ackd backfill --since reaches no further either)",
				"channel", ch, "mark", p.From, "max_age", c.cfg.MaxAge.String())
		}
		p.From = floor
	}

	// Parents older than the start are read too when replies are on: a
	// new reply in an old thread is known only by its parent's latest_reply.
	oldest := p.From
	if c.cfg.Replies {
		oldest = floor
	}
	var items []Message
	seen := map[string]bool{}
	var threads []string
	err := c.pages(ctx, &p, MethodHistory, url.Values{"channel": {ch}, "oldest": {oldest}, "latest": {end}}, func(raw json.RawMessage) {
		m := decode(raw, team, ch)
		if !store.ValidTS(m.TS) {
			return
		}
		if m.TS > p.From && !seen[m.TS] {
			seen[m.TS] = true
			items = append(items, m)
			p.Messages++
		}
		var th struct {
			ReplyCount  int    `json:"reply_count"`
			LatestReply string `json:"latest_reply"`
		}
		_ = json.Unmarshal(raw, &th)
		if c.cfg.Replies && m.ThreadTS == m.TS && th.ReplyCount > 0 && th.LatestReply > p.From {
			threads = append(threads, m.TS)
		}
	})
	for _, parent := range threads {
		if err != nil {
			break
		}
		err = c.pages(ctx, &p, MethodReplies, url.Values{"channel": {ch}, "ts": {parent}, "oldest": {p.From}, "latest": {end}}, func(raw json.RawMessage) {
			m := decode(raw, team, ch)
			if store.ValidTS(m.TS) && m.TS != parent && m.TS > p.From && !seen[m.TS] {
				seen[m.TS] = true
				items = append(items, m)
				p.Messages++
			}
		})
	}
	if err != nil {
		p.Err = err
		return p
	}
	slices.SortFunc(items, func(a, b Message) int { return strings.Compare(a.TS, b.TS) })
	for start := 0; start < len(items); start += c.cfg.Batch {
		batch := items[start:min(start+c.cfg.Batch, len(items))]
		if err := c.record(ctx, &p, batch, botUser, resume, moveMark); err != nil {
			p.Err = err
			return p
		}
		c.progress(p)
	}
	if c.cfg.DryRun || !moveMark {
		return p
	}
	// Read to the end: everything before `end` is recorded.
	if err := c.cfg.Store.AdvanceMarks(ctx, []store.Mark{{Channel: ch, TS: prevTS(end)}}); err != nil {
		p.Err = err
		return p
	}
	if resume {
		if err := c.cfg.Store.EndCatchUp(ctx, ch); err != nil {
			p.Err = err
		}
	}
	return p
}

// mark reads a channel's mark without writing.
func (c *CatchUp) mark(ctx context.Context, ch string) (store.Mark, bool, error) {
	ms, err := c.cfg.Store.Marks(ctx)
	if err != nil {
		return store.Mark{}, false, err
	}
	for _, m := range ms {
		if m.Channel == ch {
			return m, true, nil
		}
	}
	return store.Mark{}, false, nil
}

// record records some messages in one transaction (or, in a dry run,
// finds out what recording them would do).
func (c *CatchUp) record(ctx context.Context, p *Progress, msgs []Message, botUser string, resume, moveMark bool) error {
	recs := make([]store.Recovered, len(msgs))
	for i, m := range msgs {
		intents, _, err := c.cfg.Translate(m, botUser)
		if err != nil {
			return fmt.Errorf("message %s: %w", m.TS, err)
		}
		recs[i] = store.Recovered{Intents: intents, Channel: m.Channel, TS: m.TS, Resume: resume, NoMark: !moveMark}
	}
	rows := make([]int, len(recs))
	if c.cfg.DryRun {
		for i, rec := range recs {
			for _, in := range rec.Intents {
				for _, r := range in.Rows {
					if _, err := c.cfg.Store.GetByKey(ctx, r.Key); errors.Is(err, store.ErrNotFound) {
						rows[i]++
					} else if err != nil {
						return err
					}
				}
			}
		}
	} else {
		var err error
		if rows, err = c.cfg.Store.RecordRecovered(ctx, recs); err != nil {
			return err
		}
	}
	counts := map[string]int{}
	for i, rec := range recs {
		switch {
		case rows[i] > 0:
			p.Recorded++
			counts[OutcomeRecorded]++
		case len(rec.Intents) > 0:
			p.Duplicates++
			counts[OutcomeDuplicate]++
		default:
			p.Filtered++
			counts[OutcomeFiltered]++
		}
	}
	if o := c.cfg.Observer; o != nil && !c.cfg.DryRun {
		for outcome, n := range counts {
			o.Messages(outcome, n)
		}
	}
	return nil
}

// maxTransient is how many network errors and 5xx answers in a row a page
// survives before its channel stops.
const maxTransient = 5

// pages reads every page of a history or replies call, each paced by the
// budget, and hands each message to fn. A 429 holds the method for its
// Retry-After and the same page is asked for again.
func (c *CatchUp) pages(ctx context.Context, p *Progress, method string, params url.Values, fn func(json.RawMessage)) error {
	params.Set("limit", strconv.Itoa(c.cfg.Limit))
	cursor := ""
	transient := 0
	reason := "pace"
	for {
		start := time.Now()
		if err := c.cfg.Budget.Wait(ctx, method); err != nil {
			return err
		}
		if d := time.Since(start); d > time.Millisecond {
			p.Waited += d
			if o := c.cfg.Observer; o != nil {
				o.Waited(method, reason, d)
			}
		}
		reason = "pace"
		if cursor != "" {
			params.Set("cursor", cursor)
		}
		var pg page
		err := c.api.call(ctx, method, params, &pg)
		var rl *rateLimited
		switch {
		case errors.As(err, &rl):
			c.cfg.Budget.Hold(method, rl.retryAfter)
			p.RateLimited++
			reason = "retry_after"
			c.log.Info("rate limited by Slack: the page is asked for again after Retry-After", "method", method,
				"channel", params.Get("channel"), "retry_after", rl.retryAfter.String())
			continue
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			if se, ok := isPermanent(err); ok {
				return channelError(params.Get("channel"), se)
			}
			transient++
			if transient >= maxTransient {
				return err
			}
			c.log.Warn("history call failed; trying the page again", "method", method, "err", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(transient) * time.Second):
			}
			continue
		}
		transient = 0
		p.Pages++
		for _, raw := range pg.Messages {
			fn(raw)
		}
		c.progress(*p)
		cursor = pg.Meta.NextCursor
		if cursor == "" {
			return nil
		}
	}
}

// channelError says what an ok:false answer means for the operator.
func channelError(ch string, se *slackError) error {
	switch se.code {
	case "missing_scope":
		scope := cmp.Or(se.needed, scopeFor(ch))
		return fmt.Errorf("missing_scope: the bot token lacks %s; add it to the app's bot token scopes and reinstall the app (%s)", scope, se.method)
	case "not_in_channel":
		return fmt.Errorf("not_in_channel: the bot is not a member of %s; invite it (/invite @bot) to read its history (%s)", ch, se.method)
	case "channel_not_found":
		return fmt.Errorf("channel_not_found: %s does not exist or the bot cannot see it (%s)", ch, se.method)
	default:
		return se
	}
}

func (c *CatchUp) progress(p Progress) {
	if c.cfg.Progress != nil {
		c.cfg.Progress(p)
	}
}

// decode reads the fields filters and routes use from a history message.
func decode(raw json.RawMessage, team, ch string) Message {
	var m struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
		User     string `json:"user"`
		BotID    string `json:"bot_id"`
		Subtype  string `json:"subtype"`
		Text     string `json:"text"`
	}
	_ = json.Unmarshal(raw, &m)
	return Message{Team: team, Channel: ch, TS: m.TS, ThreadTS: m.ThreadTS, User: m.User, BotID: m.BotID,
		Subtype: m.Subtype, Text: m.Text, Raw: raw}
}

// prevTS is the ts one microsecond before ts.
func prevTS(ts string) string {
	return store.TimeTS(store.TSTime(ts).Add(-time.Microsecond))
}
