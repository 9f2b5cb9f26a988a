package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ackd/ackd/sweep"
)

// secretProblems is every secret serve requires for this configuration and
// does not have (or cannot use), each as its own error, so that New refuses
// with all of them and `ackd config check` lists all of them in one run.
//
// An empty credential file is "not set" (ReadSecret): the documented
// install writes one for every feature the config does not use, and ackd
// 0.1.0 read one so. Where "not set" is an error (a feature that is on and
// cannot work without it: the signing secret for HTTP, [oauth]'s secrets,
// redeliver's), the error names the feature, the file, what to write into
// it and how to turn the feature off instead. Where "not set" is not an
// error (the forward secret: forwards go unsigned; the bot token: its rows
// wait for a process that has it), an empty file is not one either:
// secretWarnings says so, naming the file.
func (c Config) SecretProblems(sec Secrets) []error {
	var errs []error
	if err := checkSocketSecrets(c, sec); err != nil {
		errs = append(errs, err)
	}
	if sec.SigningSecret == "" && !c.Socket.Enabled {
		errs = append(errs, sec.Needs(sweep.CredSigningSecret,
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
				errs = append(errs, sec.Needs(sweep.CredSigningSecret, unset,
					what+plural(n, " signs", " sign")+" each request for the app with it", "the app's Signing Secret",
					"remove the redeliver routes from "+c.file()))
			} else {
				errs = append(errs, unset)
			}
		}
	}
	if c.Console.Listen != "" && sec.ConsolePassword == "" {
		errs = append(errs, fmt.Errorf("[console] listen = %q needs a password: set ACKD_CONSOLE_PASSWORD or ACKD_CONSOLE_PASSWORD_FILE (user ackd), or remove [console] listen from %s", c.Console.Listen, c.file()))
	}
	if err := c.stepSecretProblem(sec); err != nil {
		errs = append(errs, err)
	}
	if c.OAuth != nil {
		if _, err := sealKeys(sec); err != nil {
			errs = append(errs, err)
		}
		if sec.ClientSecret == "" {
			errs = append(errs, c.ClientSecretMissing(sec))
		}
	}
	return errs
}

// secretWarnings are the empty credential files this configuration uses
// where an unset secret is no error (see secretProblems): what each means,
// keyed by the secret's name. serve logs them at start, config check lists
// them.
func (c Config) SecretWarnings(sec Secrets) map[string]string {
	out := map[string]string{}
	if c.OAuth == nil && sec.BotToken == "" && sec.EmptyFiles[sweep.CredBotToken] != "" {
		var uses []string
		if what, n := c.routesWith(botTokenEffects()...); n > 0 {
			uses = append(uses, what+plural(n, " calls", " call")+" Slack's Web API with it: those rows stay pending until a process that has the token performs them")
		}
		if len(c.Backfill.Channels) > 0 {
			uses = append(uses, "catch-up reads the history of [backfill] channels with it: catch-up cannot read")
		}
		if len(uses) > 0 {
			out[sweep.CredBotToken] = sec.emptyWarning(sweep.CredBotToken, strings.Join(uses, "; "),
				"the bot token (xoxb-…, OAuth & Permissions)", "remove those routes (and [backfill] channels) from "+c.file())
		}
	}
	if sec.ForwardSecret == "" && sec.EmptyFiles[sweep.CredForwardSecret] != "" {
		if what, n := c.routesWith("forward", "step", "stream"); n > 0 {
			out[sweep.CredForwardSecret] = sec.emptyWarning(sweep.CredForwardSecret,
				what+plural(n, " sends", " send")+" its requests unsigned (no X-Ackd-Signature), as with the secret not set and as ackd 0.1.0 did",
				"the secret your handler verifies", "leave it empty if your handler checks no signature")
		}
	}
	if c.Console.Listen != "" && sec.ConsolePassword != "" && utf8.RuneCountInString(sec.ConsolePassword) < MinConsolePassword {
		out["ACKD_CONSOLE_PASSWORD"] = fmt.Sprintf("ACKD_CONSOLE_PASSWORD is %d characters, shorter than %d: the console's password is all that stands between its listener and retry, discard and replay; use a longer random one (head -c 18 /dev/urandom | base64)",
			utf8.RuneCountInString(sec.ConsolePassword), MinConsolePassword)
	}
	return out
}

// MinConsolePassword is the console password length below which serve and
// config check warn (a warning: a config that started before still starts).
const MinConsolePassword = 16

// emptyWarning says that name's …_FILE is empty while the configuration
// uses it, what that means, what to write and where, or what else to do.
func (s Secrets) emptyWarning(name, means, write, other string) string {
	file := s.EmptyFiles[name]
	fix := "write " + write + " into it"
	if s.CredentialsDir != "" && filepath.Dir(file) == filepath.Clean(s.CredentialsDir) {
		fix = fmt.Sprintf("write %s into its LoadCredential= source (/etc/ackd/credentials/%s in the packaged unit) and restart", write, filepath.Base(file))
	}
	return fmt.Sprintf("%s_FILE names %s, which is empty: %s; %s, or %s", name, file, means, fix, other)
}

// clientSecretMissing is the error for [oauth] without SLACK_CLIENT_SECRET.
func (c Config) ClientSecretMissing(sec Secrets) error {
	return sec.Needs("SLACK_CLIENT_SECRET",
		ErrMissing("SLACK_CLIENT_SECRET", "[oauth] exchanges install codes and refreshes tokens with the app's client secret"),
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
func (s Secrets) Needs(name string, unset error, why, write, off string) error {
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
// configuration does not need (secretProblems found no problem with them,
// and warned is what secretWarnings said of the others):
// `ACKD_FORWARD_SECRET_FILE (empty)`, for config check's secrets line.
func (s Secrets) unusedEmpty(warned map[string]string) []string {
	var out []string
	for name := range s.EmptyFiles {
		if _, ok := warned[name]; !ok {
			out = append(out, name+"_FILE (empty)")
		}
	}
	slices.Sort(out)
	return out
}
