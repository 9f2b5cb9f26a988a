package sweep

import (
	"context"
	"errors"
	"time"

	"github.com/slack-go/slack"
)

// TokenSource gives the bot token of a row's installation when the row is
// performed ([oauth]: one installation per team or enterprise). It is read
// at every attempt, never cached with the row, so a rotated token is used
// as soon as it is stored. Package oauth implements it.
type TokenSource interface {
	// BotToken returns installation key's current bot token (key is the
	// row's Facts.Install). ErrNotInstalled (wrapped) when there is none; a
	// *Failure is used as it is (a permanent one parks the row).
	BotToken(ctx context.Context, key string) (string, error)
}

// ErrNotInstalled: the token source has no installation for the row's team.
var ErrNotInstalled = errors.New("not_installed")

// DefaultNotInstalledWait is how long a row whose team has no installation
// waits (the app may be being installed right now) before it parks.
const DefaultNotInstalledWait = 15 * time.Minute

// notInstalledRetry is how often such a row is tried again meanwhile.
const notInstalledRetry = 5 * time.Second

// webAPI returns the Web API client for job: with a TokenSource, one
// carrying the current token of the row's installation; else the one
// client of SLACK_BOT_TOKEN. A row that cannot get a token fails with the
// reason.
func (e *effects) webAPI(ctx context.Context, job Job) (*slack.Client, error) {
	api, _, err := e.client(ctx, job)
	return api, err
}

// client is webAPI with the token the client carries.
func (e *effects) client(ctx context.Context, job Job) (*slack.Client, string, error) {
	if e.cfg.Tokens == nil {
		if e.api == nil {
			return nil, "", permanent("no_bot_token", "SLACK_BOT_TOKEN is not set; the Web API effects need a bot token")
		}
		return e.api, e.cfg.BotToken, nil
	}
	key := job.Payload.Facts.Install
	if key == "" {
		return nil, "", permanent("no_team", "the row names no team to take a token from (recorded without [oauth], or a request without team_id)")
	}
	tok, err := e.cfg.Tokens.BotToken(ctx, key)
	var f *Failure
	switch {
	case err == nil:
		return slack.New(tok, slack.OptionAPIURL(e.apiURL), slack.OptionHTTPClient(e.cfg.HTTPClient)), tok, nil
	case errors.Is(err, ErrNotInstalled):
		wait := e.cfg.NotInstalledWait
		if wait <= 0 {
			wait = DefaultNotInstalledWait
		}
		if age := e.cfg.Now().Sub(job.Row.CreatedAt); age < wait {
			return nil, "", &Failure{Class: Waiting, RetryAfter: notInstalledRetry, Code: "not_installed",
				Err: errors.New("no installation for team " + key + " yet; waiting for it to be installed")}
		}
		return nil, "", permanent("not_installed", "no installation for team %s within %s of the row's recording: install the app in that workspace, then ackd outbox retry", key, wait)
	case errors.As(err, &f):
		return nil, "", f
	default:
		return nil, "", &Failure{Class: Retryable, Code: "token", Err: err}
	}
}
