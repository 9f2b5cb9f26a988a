package daemon

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ackd/ackd/sweep"
)

// secretProblems is every secret serve requires for this configuration and
// does not have (or cannot use), each as its own error, so that New refuses
// with all of them and `ackd config check` lists all of them in one run.
//
// An empty credential file is "not set" (ReadSecret): the documented
// install writes one for every feature the config does not use. It is an
// error only where the configuration uses the secret — a feature that is
// on — and then the error names the feature, the file, what to write into
// it and how to turn the feature off instead.
func (c Config) secretProblems(sec Secrets) []error {
	var errs []error
	if err := checkSocketSecrets(c, sec); err != nil {
		errs = append(errs, err)
	}
	if sec.SigningSecret == "" && !c.Socket.Enabled {
		errs = append(errs, sec.needs(sweep.CredSigningSecret,
			fmt.Errorf("no Slack signing secret: set SLACK_SIGNING_SECRET or SLACK_SIGNING_SECRET_FILE (or enable [socket_mode] with SLACK_APP_TOKEN)"),
			"Slack's requests over HTTP are verified with it", "the app's Signing Secret (Basic Information)",
			"receive over Socket Mode instead ([socket_mode] enabled = true, with SLACK_APP_TOKEN) in "+c.file()))
	}
	if sec.SigningSecret == "" && sec.RedeliverSecret == "" {
		// The app behind a redeliver route checks Slack's signature, so
		// its rows could never be performed: refuse rather than pile them up.
		if what, n := c.routesWith("redeliver"); n > 0 {
			unset := fmt.Errorf("%s: effect redeliver signs each request for the app: set SLACK_SIGNING_SECRET or ACKD_REDELIVER_SECRET (or …_FILE)", c.routeNames("redeliver"))
			if sec.EmptyFiles[sweep.CredSigningSecret] != "" {
				errs = append(errs, sec.needs(sweep.CredSigningSecret, unset,
					what+plural(n, " signs", " sign")+" each request for the app with it", "the app's Signing Secret",
					"remove the redeliver routes from "+c.file()))
			} else {
				errs = append(errs, unset)
			}
		}
	}
	if c.OAuth == nil && sec.BotToken == "" && sec.EmptyFiles[sweep.CredBotToken] != "" {
		// Unset, the token's rows wait for a process that has it (a
		// warning, below in CheckConfig); an empty file where routes use
		// it is a credential not yet written.
		const write, off = "the bot token (xoxb-…, OAuth & Permissions)", "remove them from "
		if what, n := c.routesWith(botTokenEffects()...); n > 0 {
			errs = append(errs, sec.needs(sweep.CredBotToken, nil, what+plural(n, " calls", " call")+" Slack's Web API with it", write, off+c.file()))
		}
		if len(c.Backfill.Channels) > 0 {
			errs = append(errs, sec.needs(sweep.CredBotToken, nil, "catch-up reads the history of [backfill] channels with it", write,
				"empty [backfill] channels in "+c.file()+" (catch-up off)"))
		}
	}
	if sec.ForwardSecret == "" && sec.EmptyFiles[sweep.CredForwardSecret] != "" {
		if what, n := c.routesWith("forward"); n > 0 {
			errs = append(errs, sec.needs(sweep.CredForwardSecret, nil, what+plural(n, " signs", " sign")+" each request with it (X-Ackd-Signature)",
				"the secret your handler verifies", "remove the forward routes from "+c.file()))
		}
	}
	if c.OAuth != nil {
		if _, err := TokenKeys(sec); err != nil {
			errs = append(errs, err)
		}
		if sec.ClientSecret == "" {
			errs = append(errs, c.clientSecretMissing(sec))
		}
	}
	return errs
}

// clientSecretMissing is the error for [oauth] without SLACK_CLIENT_SECRET.
func (c Config) clientSecretMissing(sec Secrets) error {
	return sec.needs("SLACK_CLIENT_SECRET",
		errMissing("SLACK_CLIENT_SECRET", "[oauth] exchanges install codes and refreshes tokens with the app's client secret"),
		"[oauth] exchanges install codes and refreshes tokens with it", "the app's Client Secret (Basic Information)",
		"remove the [oauth] section from "+c.file())
}

// file names the config file in a message: its path, or "a config file"
// when ackd runs on the built-in defaults.
func (c Config) file() string {
	if c.Source == "" || c.Source == Default().Source {
		return "a config file"
	}
	return c.Source
}

// botTokenEffects are the effects a sweep cannot perform without
// SLACK_BOT_TOKEN (sweep's own list, so an effect added there counts here).
func botTokenEffects() []string {
	var out []string
	for e, why := range (sweep.EffectConfig{RedeliverSecret: "-"}).Unavailable() {
		if strings.Contains(why, sweep.CredBotToken) {
			out = append(out, e)
		}
	}
	return out
}

// routesWith names the routes whose effect is one of effects, e.g. `route
// "eyes" (react)` or `routes "eyes" (react), "hi" (post)`, and counts them.
func (c Config) routesWith(effects ...string) (string, int) {
	var names []string
	for _, r := range c.Routes {
		if slices.Contains(effects, r.Effect) {
			names = append(names, fmt.Sprintf("%q (%s)", r.Name, r.Effect))
		}
	}
	return plural(len(names), "route ", "routes ") + strings.Join(names, ", "), len(names)
}

// routeNames is `route "a"` or `routes "a", "b"`: the routes with effect.
func (c Config) routeNames(effect string) string {
	var names []string
	for _, r := range c.Routes {
		if r.Effect == effect {
			names = append(names, fmt.Sprintf("%q", r.Name))
		}
	}
	return plural(len(names), "route ", "routes ") + strings.Join(names, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// needs is the error for secret name, which a feature that is on needs and
// which is not set: unset when it is not set at all; when its …_FILE names
// an empty file, an error naming the file, why (the feature), what to write
// and how to turn the feature off instead. Never "unset the variable": a
// unit's Environment= is not the operator's to unset.
func (s Secrets) needs(name string, unset error, why, write, off string) error {
	file := s.EmptyFiles[name]
	if file == "" {
		return unset
	}
	fix := "write " + write + " into it"
	if s.CredentialsDir != "" && filepath.Dir(file) == filepath.Clean(s.CredentialsDir) {
		// systemd's private copy: the operator writes the source.
		fix = fmt.Sprintf("write %s into its LoadCredential= source (/etc/ackd/credentials/%s in the packaged unit) and restart", write, filepath.Base(file))
	}
	return fmt.Errorf("%s_FILE names %s, which is empty, and %s: %s, or %s", name, file, why, fix, off)
}

// unusedEmpty lists the secrets whose …_FILE names an empty file that this
// configuration does not need (secretProblems found no problem with them):
// `ACKD_FORWARD_SECRET_FILE (empty)`, for config check's secrets line.
func (s Secrets) unusedEmpty() []string {
	var out []string
	for name := range s.EmptyFiles {
		out = append(out, name+"_FILE (empty)")
	}
	slices.Sort(out)
	return out
}
