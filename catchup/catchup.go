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
// Bounds on Slack's data are on Slack's clock: a message's ts is Slack's,
// so where a run stops reading, the mark it leaves and how far back it
// reads are Slack's time when the run started, read from the Date header
// of Slack's answers (internal/slackclock), never this host's clock. A
// host whose clock is minutes ahead would otherwise set a mark past
// messages Slack has yet to stamp, and one minutes behind would stop
// reading before the newest messages. The header has whole seconds: a
// run reads up to the latest time Slack's clock can read, and its mark
// says read only what was stamped before the earliest.
//
// A run never reads further back than the period whose fact keys ackd
// still knows: a done row is pruned [retention] done after it completed,
// and a message whose rows are gone would be recorded and performed again.
// So the oldest message a run reads is KeepDone (less KeepMargin) before
// Slack's now, whatever max_age or a given start say; a given start before
// that is refused (ErrBeforeKept), a max_age past it is clamped with a log
// line.
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

	"github.com/ackd/ackd/internal/slackclock"
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
	Channels []string
	MaxAge   time.Duration // never read further back than this
	// KeepDone is how long done rows are kept ([retention] done): no
	// message older than KeepDone less KeepMargin is read, since its rows
	// may have been pruned. 0: no such bound.
	KeepDone  time.Duration
	Limit     int    // messages per page (default 200)
	Replies   bool   // read threads whose latest_reply is newer than the start
	Token     string // bot token (channels:history, groups:history, …)
	APIURL    string // Web API base; empty = Slack's
	BotUserID string // empty: auth.test's user_id
	DryRun    bool   // record nothing; count what would be recorded
	Batch     int    // messages recorded per transaction (default 50)

	Budget     *slackrate.Budget // shared pace; nil: one of 20 calls a minute
	Translate  Translate
	Store      store.Store
	HTTPClient *http.Client
	Logger     *slog.Logger
	Observer   Observer       // may be nil
	Progress   func(Progress) // called after each page and when a channel ends; may be nil
	// Now is the clock the store prunes by; Slack's is compared with it.
	Now func() time.Time
}

// KeepMargin is how much newer than [retention] done the oldest message a
// run reads is: room for the database's clock differing from this host's
// (PostgreSQL prunes on its own), and for the time between reading a
// message and recording it.
const KeepMargin = 10 * time.Minute

// ErrBeforeKept: a run was asked to read from before the oldest message
// whose rows ackd still keeps.
var ErrBeforeKept = errors.New("reaches past what ackd still knows")

// Reach is how far back a run may read: max_age, or KeepDone less
// KeepMargin when that is shorter (clamped reports which).
func (c Config) Reach() (reach time.Duration, clamped bool) {
	if c.KeepDone > 0 && c.MaxAge > c.KeepDone-KeepMargin {
		return max(c.KeepDone-KeepMargin, 0), true
	}
	return c.MaxAge, false
}

// Progress is one channel's progress so far.
type Progress struct {
	Channel    string
	Pages      int // history and replies pages read
	Messages   int // messages newer than the start, recovered from them
	Recorded   int
	Duplicates int
	Filtered   int
	// Forgotten counts messages not recorded because, by the time they
	// were, they had grown older than what ackd still knows (KeepDone).
	Forgotten   int
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
		t.Forgotten += p.Forgotten
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
	cfg   Config
	api   *api
	log   *slog.Logger
	clock *slackclock.Clock // Slack's, from its answers' Date headers
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
	clock := slackclock.New(cfg.Now)
	c := &CatchUp{cfg: cfg, api: &api{base: base, token: cfg.Token, hc: cfg.HTTPClient, clock: clock},
		log: cfg.Logger.With("component", "catchup"), clock: clock}
	if reach, clamped := cfg.Reach(); clamped {
		c.log.Warn("catch-up reads back at most [retention] done less 10m, not backfill.max_age: an older message's rows may have been pruned, and recording it again would perform its effects again; shorten backfill.max_age or lengthen retention.done",
			"reach", reach.String(), "max_age", cfg.MaxAge.String(), "retention_done", cfg.KeepDone.String())
	}
	return c, nil
}

// Run catches up every configured channel, one after another. With since
// zero each channel is read from its mark (or its resume point, when a
// catch-up was cut short); a channel without a mark gets one at Slack's
// now and is not read (ackd has recorded nothing there to catch up from).
// With since set (a time on Slack's clock, as a ts is), each is read from
// since. Either way never further back than Reach; a since before what
// ackd still knows (KeepDone) is refused with ErrBeforeKept, nothing read.
// The error is for what stops the whole run (auth.test failing, ctx, such
// a since); a channel that fails is reported in its Progress and the run
// goes on.
func (c *CatchUp) Run(ctx context.Context, since time.Time) (Result, error) {
	return c.run(ctx, func(time.Time) time.Time { return since })
}

// RunAgo is Run from ago before Slack's now (`ackd backfill --since 2h`).
func (c *CatchUp) RunAgo(ctx context.Context, ago time.Duration) (Result, error) {
	return c.run(ctx, func(slackNow time.Time) time.Time { return slackNow.Add(-ago) })
}

func (c *CatchUp) run(ctx context.Context, from func(slackNow time.Time) time.Time) (Result, error) {
	team, user, err := c.api.authTest(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("catch-up: auth.test: %w", err)
	}
	if _, _, known := c.clock.Offset(); !known {
		c.log.Warn("Slack's answers carry no Date header: catch-up takes Slack's clock to be this host's (a host clock ahead of Slack's would leave marks past messages not yet read)")
	}
	_, hi := c.clock.Now()
	since := from(hi)
	if _, clamped := c.cfg.Reach(); clamped && !since.IsZero() && since.Before(c.keptFloor(hi)) {
		reach, _ := c.cfg.Reach()
		return Result{}, fmt.Errorf("%w: done rows are pruned %s after they complete ([retention] done), so the rows of a message older than %s may be gone, and recording it again would perform its effects again; catch-up reads back at most %s (to %s, Slack's clock)",
			ErrBeforeKept, c.cfg.KeepDone, reach, reach, store.TimeTS(c.keptFloor(hi)))
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

// keptFloor is the oldest time (on Slack's clock) whose messages' rows are
// surely still kept, when Slack's clock reads at most slackNow; zero
// without KeepDone. A done row completes after its message was posted and
// is pruned KeepDone after that on the store's clock, whose offset from
// Slack's is measured (the margin covers the rest).
func (c *CatchUp) keptFloor(slackNow time.Time) time.Time {
	if c.cfg.KeepDone <= 0 {
		return time.Time{}
	}
	return slackNow.Add(-c.cfg.KeepDone + KeepMargin)
}

func (c *CatchUp) channel(ctx context.Context, team, botUser, ch string, since time.Time) (p Progress) {
	p.Channel = ch
	// Slack's clock, not this host's, known to within a second or so (the
	// Date header has whole seconds): the latest it can read now bounds
	// what is read, so that every message stamped before the run is read
	// (one stamped in the second after it is the live path's, ackd being
	// up); the earliest is what the mark may say is read, since every
	// message stamped before it was there to be read.
	lo, hi := c.clock.Now()
	floorAt := hi.Add(-c.cfg.MaxAge)
	if kept := c.keptFloor(hi); kept.After(floorAt) {
		floorAt = kept
	}
	floor := store.TimeTS(floorAt)
	// Everything before `end` is read; messages after it are the live
	// path's, and the next run's. The mark moves to `read` at most (and
	// to the newest message recorded).
	end, read := store.TimeTS(hi), store.TimeTS(lo)
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
			if err := c.cfg.Store.AdvanceMarks(ctx, []store.Mark{{Channel: ch, TS: read}}); err != nil {
				p.Err = err
			}
			return p
		}
		p.From, resume = cmp.Or(m.ResumeFrom, m.TS), true
	}
	if p.From < floor {
		if since.IsZero() {
			reach, _ := c.cfg.Reach()
			c.log.Warn("the channel's mark is older than catch-up reaches (backfill.max_age, or retention.done less 10m): older messages are not recovered (ackd backfill --since reaches no further either)",
				"channel", ch, "mark", p.From, "reach", reach.String(), "from", floor)
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
		// A long run: what was within what ackd keeps when it was read may
		// have grown older meanwhile.
		if _, hi := c.clock.Now(); c.cfg.KeepDone > 0 {
			kept := store.TimeTS(c.keptFloor(hi))
			i, _ := slices.BinarySearchFunc(batch, kept, func(m Message, ts string) int { return strings.Compare(m.TS, ts) })
			if i > 0 {
				c.log.Warn("messages grew older than what ackd keeps ([retention] done) while catch-up ran: not recorded, their rows may have been pruned",
					"channel", ch, "messages", i, "oldest_kept", kept)
				p.Forgotten += i
				batch = batch[i:]
			}
		}
		if len(batch) == 0 {
			continue
		}
		if err := c.record(ctx, &p, batch, botUser, resume, moveMark); err != nil {
			p.Err = err
			return p
		}
		c.progress(p)
	}
	if c.cfg.DryRun || !moveMark {
		return p
	}
	// Read to the end: every message stamped before `read` is recorded.
	if err := c.cfg.Store.AdvanceMarks(ctx, []store.Mark{{Channel: ch, TS: prevTS(read)}}); err != nil {
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
