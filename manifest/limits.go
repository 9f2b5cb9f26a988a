package manifest

import (
	"fmt"
	"maps"
	"slices"
)

// Slack's limits on what a configuration can make a manifest hold, from
// Slack's manifest schema (manifest.schema.1.0.0.json; the copy and its
// origin are in testdata/slack-schema). The config accepts more than these
// (any number of routes, any command after its "/"), so Build checks them
// rather than print a manifest Slack refuses; TestSlackLimits checks that
// the schema refuses each one too.
const (
	maxCommands     = 50 // features.slash_commands maxItems
	minCommandLen   = 2  // slash_commands[].command minLength (the "/" and a letter)
	maxCommandLen   = 32 // slash_commands[].command maxLength
	maxBotEvents    = 100
	maxEventLen     = 50 // settings.event_subscriptions.bot_events[] maxLength
	maxScopes       = 255
	maxScopeLen     = 50 // oauth_config.scopes.bot[], .user[] maxLength
	maxRedirectLen  = 2500
	maxFunctions    = 50 // functions maxProperties
	maxFunctionArgs = 50 // functions.*.input_parameters, output_parameters maxProperties
)

// slackLimits says which of Slack's limits m is past, if any.
func slackLimits(m *Manifest) error {
	if n := len(m.Features.SlashCommands); n > maxCommands {
		return fmt.Errorf("the routes take %d slash commands; a Slack app has at most %d", n, maxCommands)
	}
	for _, c := range m.Features.SlashCommands {
		if n := len([]rune(c.Command)); n < minCommandLen || n > maxCommandLen {
			return fmt.Errorf("slash command %q: Slack takes a command of %d to %d characters, its / included", c.Command, minCommandLen, maxCommandLen)
		}
	}
	if es := m.Settings.EventSubscriptions; es != nil {
		if n := len(es.BotEvents); n > maxBotEvents {
			return fmt.Errorf("the manifest subscribes to %d bot events; Slack allows at most %d", n, maxBotEvents)
		}
		for _, e := range es.BotEvents {
			if len([]rune(e)) > maxEventLen {
				return fmt.Errorf("event %q is longer than any Slack event type (at most %d characters)", e, maxEventLen)
			}
		}
	}
	for _, l := range []struct {
		kind   string
		scopes []string
	}{{"bot", m.OAuthConfig.Scopes.Bot}, {"user", m.OAuthConfig.Scopes.User}} {
		kind, scopes := l.kind, l.scopes
		if n := len(scopes); n > maxScopes {
			return fmt.Errorf("%d %s scopes; Slack allows at most %d", n, kind, maxScopes)
		}
		for _, s := range scopes {
			if len([]rune(s)) > maxScopeLen {
				return fmt.Errorf("%s scope %q is longer than any Slack scope (at most %d characters)", kind, s, maxScopeLen)
			}
		}
	}
	for _, u := range m.OAuthConfig.RedirectURLs {
		if len([]rune(u)) > maxRedirectLen {
			return fmt.Errorf("[oauth] redirect_url is %d characters; Slack allows at most %d", len([]rune(u)), maxRedirectLen)
		}
	}
	if n := len(m.Functions); n > maxFunctions {
		return fmt.Errorf("the routes declare %d workflow steps; a Slack app has at most %d functions", n, maxFunctions)
	}
	for _, id := range slices.Sorted(maps.Keys(m.Functions)) {
		f := m.Functions[id]
		if n := len(f.InputParameters); n > maxFunctionArgs {
			return fmt.Errorf("function %s has %d inputs; Slack allows at most %d", id, n, maxFunctionArgs)
		}
		if n := len(f.OutputParameters); n > maxFunctionArgs {
			return fmt.Errorf("function %s has %d outputs; Slack allows at most %d", id, n, maxFunctionArgs)
		}
	}
	return nil
}
