package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/config"
)

// CheckBotToken asks Slack, once, whether SLACK_BOT_TOKEN is a token it
// takes (auth.test), so that a wrong token is named at start instead of when
// the first post parks with invalid_auth. ok is false when there is nothing
// to check: no bot token, or [oauth] (each team's token is its
// installation's). Slack out of reach is a warning that says it was not
// checked; a refused token is a failure naming the credential and where the
// right one is.
func CheckBotToken(ctx context.Context, cfg config.Config, sec config.Secrets, hc *http.Client) (c config.Check, ok bool) {
	if sec.BotToken == "" || cfg.OAuth != nil {
		return config.Check{}, false
	}
	c = config.Check{Name: "slack"}
	const where = "copy the Bot User OAuth Token (xoxb-…) from the app's OAuth & Permissions page (reinstalling the app issues a new one) into SLACK_BOT_TOKEN or its _FILE"
	if strings.HasPrefix(sec.BotToken, "xapp-") {
		c.Status, c.Detail = config.CheckFail, "SLACK_BOT_TOKEN holds an app-level token (xapp-…), which is SLACK_APP_TOKEN's (Socket Mode); "+where
		return c, true
	}
	api := cfg.Slack.APIURL
	if api == "" {
		api = slack.APIURL
	}
	if !strings.HasSuffix(api, "/") {
		api += "/"
	}
	if hc == nil {
		hc = &http.Client{}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	at, err := slack.New(sec.BotToken, slack.OptionAPIURL(api), slack.OptionHTTPClient(hc)).AuthTestContext(ctx)
	var se slack.SlackErrorResponse
	switch {
	case err == nil:
		c.Status, c.Detail = config.CheckOK, fmt.Sprintf("SLACK_BOT_TOKEN is bot %s (user %s, bot_id %s) of team %s (auth.test)", at.User, at.UserID, at.BotID, at.Team)
	case errors.As(err, &se) && slices.Contains(tokenRefusals, se.Err):
		c.Status, c.Detail = config.CheckFail, fmt.Sprintf("Slack refuses SLACK_BOT_TOKEN (auth.test: %s): rows that call the Web API would park with it; %s", se.Err, where)
	default:
		c.Status, c.Detail = config.CheckWarn, fmt.Sprintf("SLACK_BOT_TOKEN not checked: auth.test at %s did not answer (%v); Slack may be out of reach from this host (ACKD_SLACK_CHECK=off skips the check)", api, err)
	}
	return c, true
}

// tokenRefusals are auth.test's answers that mean the token itself is wrong.
var tokenRefusals = []string{"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type"}
