package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/store"
)

// A post is confirmed before it is repeated. chat.postMessage has no
// idempotency key, so an attempt whose outcome is unknown (a timeout after
// the request was written, a reset connection, a 5xx, internal_error, or a
// process that died mid-call: store.Row.OutcomeUnknown) may have posted.
// Every post carries its row's key in its metadata (MetadataEventType,
// event_payload.idempotency_key), so before posting again the performer
// looks for it: conversations.history of the channel, or
// conversations.replies of the thread, with include_all_metadata, a
// bounded number of pages, newest first. A message is the earlier post
// only when it carries the key AND was posted by this app's bot (its
// bot_id is the one auth.test names for the row's token: identity.go);
// another app's message with the same key is not ours. Found: the row is
// done with that message's channel and ts and nothing is posted. Not
// found: it posts. When the lookup cannot be made (a history scope is
// missing, the bot is not in the channel, the channel is given by name,
// the token's bot cannot be learned), it posts anyway (at-least-once, as
// without the lookup), logs it once per channel and notes it on the row.
//
// The window's lower end (oldest) is on Slack's clock, since a message's
// ts is Slack's: the row's own Slack timestamp when it has one (the
// event's message ts or event_ts: Slack stamped it before anything was
// posted for it), else the row's first claim turned into Slack's clock by
// the offset measured from the Date header of Slack's answers
// (internal/slackclock; auth.test has just been asked, or answered
// earlier). Either way less confirmSkew, for what the measure cannot see.
//
// Limits: a message whose metadata an admin policy strips, or one deeper
// than the lookup's pages, is not found, and the post is repeated. A row
// without a Slack timestamp (a slash command's) first claimed by another
// host, or on PostgreSQL (whose clock stamps the claim), relies on that
// clock being within confirmSkew of this host's.

// Outcomes of a lookup (the metric's label values).
const (
	ConfirmFound       = "found"
	ConfirmNotFound    = "not_found"
	ConfirmImpossible  = "impossible"
	ConfirmRateLimited = "rate_limited"
)

// ConfirmOutcomes lists every lookup outcome.
var ConfirmOutcomes = []string{ConfirmFound, ConfirmNotFound, ConfirmImpossible, ConfirmRateLimited}

// DefaultHistoryRate is the pace of history reads (calls a minute) when the
// configuration names none: Slack's Tier 3 allows 50 and more for an
// internal app; catch-up, when on, shares the same budget.
const DefaultHistoryRate = 20

const (
	// confirmSkew is how far before its lower bound on Slack's clock the
	// lookup starts: for what the measured offset cannot see (the clock
	// of another host or of the database that stamped the first claim).
	confirmSkew = 2 * time.Minute
	// confirmPages and confirmPageSize bound one lookup: newest first,
	// at most this many pages of this many messages (Slack recommends no
	// more than 200 a page; unlisted apps get 15).
	confirmPages    = 5
	confirmPageSize = 200
)

// postRef is a message a lookup found.
type postRef struct{ channel, ts string }

// lookupProgress is how far a lookup cut short by the history budget got:
// the next attempt of the row in this process carries on from there
// rather than starting over (with a budget of a few calls a minute a
// lookup of several pages may not fit in one effect's timeout). Slack's
// cursors stay valid for minutes, and pages go from the newest message
// back, so the messages that arrived meanwhile (newer than the row's
// earlier post) need not be read.
type lookupProgress struct {
	method, cursor string
	page, read     int
}

// confirmPost looks for the row's earlier post. found is nil when the
// lookup found nothing or could not be made; note says which, for the row.
// An error means the lookup must be tried again later (rate limited, or
// Slack failed to answer it): nothing may be posted meanwhile.
func (e *effects) confirmPost(ctx context.Context, api *slack.Client, token string, job Job, channel, thread string) (found *postRef, note string, err error) {
	method := "conversations.history"
	if thread != "" {
		method = "conversations.replies"
	}
	me, note, err := e.whoAmI(ctx, api, token, job)
	if err != nil || note != "" {
		return nil, note, err
	}
	oldest := e.lookupFrom(job)
	var at lookupProgress
	if v, ok := e.progress.LoadAndDelete(job.Row.ID); ok && v.(lookupProgress).method == method {
		at = v.(lookupProgress)
	}
	for ; at.page < confirmPages; at.page++ {
		if err := e.waitHistory(ctx, method); err != nil {
			if AsFailure(err).Class == RateLimited {
				e.confirmed(ConfirmRateLimited)
				if at.page > 0 {
					at.method = method
					e.progress.Store(job.Row.ID, at)
				}
			}
			return nil, "", err
		}
		var msgs []slack.Message
		var next string
		e.log.DebugContext(ctx, "slack call", "method", method, "key", job.Row.Key, "channel", channel, "thread_ts", thread, "oldest", oldest, "page", at.page+1)
		if thread != "" {
			var more bool
			msgs, more, next, err = api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: channel, Timestamp: thread, Cursor: at.cursor, Oldest: oldest, Limit: confirmPageSize,
				IncludeAllMetadata: true,
			})
			if !more {
				next = ""
			}
		} else {
			var h *slack.GetConversationHistoryResponse
			h, err = api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: channel, Cursor: at.cursor, Oldest: oldest, Limit: confirmPageSize, IncludeAllMetadata: true,
			})
			if h != nil {
				msgs = h.Messages
				if h.HasMore {
					next = h.ResponseMetaData.NextCursor
				}
			}
		}
		if err != nil {
			// The page is asked for again (from the same cursor) next time.
			if at.page > 0 {
				at.method = method
				e.progress.Store(job.Row.ID, at)
			}
			return e.lookupFailed(method, channel, err)
		}
		at.read += len(msgs)
		for _, m := range msgs {
			if k, _ := m.Metadata.EventPayload["idempotency_key"].(string); m.Metadata.EventType != MetadataEventType || k != job.Row.Key {
				continue
			}
			if m.BotID != me.botID {
				e.log.Info("a message with this row's key was posted by another bot: not ours, passed over",
					"key", job.Row.Key, "channel", channel, "ts", m.Timestamp, "bot_id", m.BotID, "our_bot_id", me.botID)
				continue
			}
			e.progress.Delete(job.Row.ID)
			e.confirmed(ConfirmFound)
			e.log.Info("earlier post found before posting again: the row is done with it, nothing posted",
				"key", job.Row.Key, "channel", channel, "ts", m.Timestamp, "method", method, "pages", at.page+1)
			return &postRef{channel: channel, ts: m.Timestamp},
				fmt.Sprintf("confirmed: found the earlier post (ts %s) through %s; not posted again", m.Timestamp, method), nil
		}
		if next == "" {
			e.progress.Delete(job.Row.ID)
			e.confirmed(ConfirmNotFound)
			return nil, fmt.Sprintf("confirmed: no earlier post among %d messages of %s since %s; posted", at.read, method, oldest), nil
		}
		at.cursor = next
	}
	e.progress.Delete(job.Row.ID)
	e.confirmed(ConfirmNotFound)
	return nil, fmt.Sprintf("confirmed: no earlier post in %d pages (%d messages) of %s since %s, more not read; posted",
		confirmPages, at.read, method, oldest), nil
}

// lookupFrom is the lookup's oldest (a ts on Slack's clock): the row's own
// Slack timestamp when it has one, else its first claim on Slack's clock
// by the measured offset; less confirmSkew either way.
func (e *effects) lookupFrom(job Job) string {
	if t, ok := slackTime(job.Payload.Facts); ok {
		return slackTS(t.Add(-confirmSkew))
	}
	since := job.Row.FirstClaimedAt
	if since.IsZero() {
		since = job.Row.CreatedAt
	}
	if since.IsZero() {
		return ""
	}
	return slackTS(e.cfg.SlackClock.Lower(since).Add(-confirmSkew))
}

// slackTime is the Slack timestamp of the request a row came from: its
// message's ts, else the inner event's event_ts. Both were stamped by
// Slack's clock before anything was posted for the row.
func slackTime(f Facts) (time.Time, bool) {
	if store.ValidTS(f.TS) {
		return store.TSTime(f.TS), true
	}
	var ev struct {
		EventTS string `json:"event_ts"`
	}
	if len(f.Event) > 0 && json.Unmarshal(f.Event, &ev) == nil && store.ValidTS(ev.EventTS) {
		return store.TSTime(ev.EventTS), true
	}
	return time.Time{}, false
}

// lookupFailed decides what a failed history call means: rate limited →
// wait for Retry-After (nothing posted); an error the token cannot fix
// (missing_scope, not_in_channel, channel_not_found…) → the lookup is
// impossible and the post goes ahead; anything else (a 5xx, a timeout) →
// try the lookup again later.
func (e *effects) lookupFailed(method, channel string, err error) (*postRef, string, error) {
	f := slackFailure(method, channel, err)
	var ser slack.SlackErrorResponse
	errors.As(err, &ser)
	switch {
	case f.Class == RateLimited:
		if e.cfg.History != nil {
			e.cfg.History.Hold(method, f.RetryAfter)
		}
		e.confirmed(ConfirmRateLimited)
		f.NotSent = true
		f.Err = fmt.Errorf("looking for the earlier post before posting again: %w", f.Err)
		return nil, "", f
	case f.Class == Permanent || ser.Err == "thread_not_found":
		why := f.Code
		if f.Code == "missing_scope" {
			why += " " + historyScope(channel, ser.Needed)
		}
		e.confirmed(ConfirmImpossible)
		if _, seen := e.impossible.LoadOrStore(channel, true); !seen {
			e.log.Warn("cannot look for earlier posts in this channel before posting again: posts after an unknown outcome may be repeated (at-least-once); grant the scope or invite the bot, or set [slack] confirm_posts = false",
				"channel", channel, "method", method, "reason", why, "err", f.Err)
		}
		return nil, fmt.Sprintf("confirmed: lookup impossible (%s); posted, possibly again (at-least-once)", why), nil
	default:
		f.NotSent = true
		f.Err = fmt.Errorf("looking for the earlier post before posting again: %w", f.Err)
		return nil, "", f
	}
}

// waitHistory takes a slot of the shared history budget, waiting at most
// half of what is left of ctx (the post itself needs the rest). A wait
// that would be longer gives the row back as rate limited.
func (e *effects) waitHistory(ctx context.Context, method string) error {
	b := e.cfg.History
	if b == nil {
		return nil
	}
	wctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		defer cancel()
	}
	if err := b.Wait(wctx, method); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		after := max(time.Until(b.Ready(method)), time.Second)
		return &Failure{Class: RateLimited, RetryAfter: after, Code: "confirm_budget", NotSent: true,
			Err: fmt.Errorf("the shared history budget has no slot for %s now; the post waits for its lookup", method)}
	}
	return nil
}

// confirmed counts one lookup outcome.
func (e *effects) confirmed(outcome string) {
	if e.cfg.OnConfirm != nil {
		e.cfg.OnConfirm(outcome)
	}
}

// historyScope names the scope a history read of channel needs: Slack's
// "needed" when it said, else the one its id's kind calls for.
func historyScope(channel, needed string) string {
	if needed != "" {
		return needed
	}
	switch {
	case strings.HasPrefix(channel, "D"):
		return "im:history"
	case strings.HasPrefix(channel, "G"):
		return "groups:history"
	default:
		return "channels:history"
	}
}

// slackTS writes t as a Slack ts ("1700000000.000100").
func slackTS(t time.Time) string {
	us := t.UnixMicro()
	return strconv.FormatInt(us/1e6, 10) + "." + fmt.Sprintf("%06d", us%1e6)
}
