package sweep

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"
)

// Which messages are ours. A post is confirmed by its key AND this app's
// identity: a message counts as the row's earlier post only when its
// metadata carries the row's key and its bot_id is the bot that the row's
// token posts as. Another app in the same channel may carry the same key
// (a staging app beside production, with the same route names): its
// messages have another bot_id and are passed over.
//
// The bot is learned from auth.test with the token that posts (the
// installation's with [oauth], SLACK_BOT_TOKEN without), at the first
// lookup that needs it, and kept in memory per installation for as long as
// its token is the same (a rotated token is asked again). auth.test is
// cheap for Slack ("hundreds of requests per minute") and needs no scope.
// Its answer also gives a fresh reading of Slack's clock (the Date header),
// which the lookup's window uses.
//
// When the bot cannot be learned for good (auth.test refuses the token, or
// names no bot_id: not a bot token), the lookup is impossible and the post
// is made (at-least-once), as when history cannot be read; the row's note
// says so. When auth.test fails for now (rate limited, a 5xx, a timeout),
// the post waits for the next attempt and nothing is posted.

// botIdentity is who a token posts as.
type botIdentity struct {
	token  string // the token it was learned with
	botID  string // auth.test's bot_id: the bot_id on every message it posts
	userID string // auth.test's user_id: the bot user
}

// whoAmI returns the bot the row's token posts as. note is set (and the
// identity empty) when it cannot be learned for good; err when it must be
// asked again later (nothing may be posted meanwhile). Lookups of one
// token at the same moment share one auth.test.
func (e *effects) whoAmI(ctx context.Context, api *slack.Client, token string, job Job) (id botIdentity, note string, err error) {
	key := job.Payload.Facts.Install // "" without [oauth]: the one token
	if v, ok := e.ids.Load(key); ok && v.(botIdentity).token == token {
		return v.(botIdentity), "", nil
	}
	v, err, _ := e.whoami.Do(key+"\x00"+token, func() (any, error) {
		if v, ok := e.ids.Load(key); ok && v.(botIdentity).token == token {
			return v, nil // learned by a call that ended since this one looked
		}
		e.log.DebugContext(ctx, "slack call", "method", "auth.test", "key", job.Row.Key, "install", key)
		at, err := api.AuthTestContext(ctx)
		if err != nil {
			return botIdentity{}, slackFailure("auth.test", "", err)
		}
		if at.BotID == "" {
			return botIdentity{}, &Failure{Class: Permanent, Code: "no_bot_id",
				Err: fmt.Errorf("auth.test names no bot_id for this token (user %s): not a bot token", at.UserID)}
		}
		id := botIdentity{token: token, botID: at.BotID, userID: at.UserID}
		e.ids.Store(key, id)
		return id, nil
	})
	if err == nil {
		return v.(botIdentity), "", nil
	}
	f := AsFailure(err)
	if f.Class == Permanent {
		return botIdentity{}, e.unknownBot(key, f.Code, f.Err), nil
	}
	if f.Class == RateLimited {
		e.confirmed(ConfirmRateLimited)
	}
	return botIdentity{}, "", &Failure{Class: f.Class, RetryAfter: f.RetryAfter, Code: f.Code, NotSent: true,
		Err: fmt.Errorf("learning which bot this app posts as, before posting again: %w", f.Err)}
}

// unknownBot counts an impossible lookup whose bot could not be learned,
// logs it once per installation, and returns the row's note.
func (e *effects) unknownBot(install, code string, err error) string {
	e.confirmed(ConfirmImpossible)
	if _, seen := e.impossible.LoadOrStore("auth.test:"+install, true); !seen {
		e.log.Warn("cannot tell this app's own posts from other apps' before posting again: posts after an unknown outcome may be repeated (at-least-once)",
			"install", install, "reason", code, "err", err)
	}
	return fmt.Sprintf("confirmed: lookup impossible (auth.test: %s; this app's bot_id unknown); posted, possibly again (at-least-once)", code)
}
