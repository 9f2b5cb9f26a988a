package config

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ackd/ackd/sweep"
)

// Check is one startup check `ackd config check` ran.
type Check struct {
	Name   string `json:"check"`
	Status string `json:"status"` // CheckOK, CheckWarn or CheckFail
	Detail string `json:"detail"`
}

// Outcomes of a Check.
const (
	CheckOK   = "ok"
	CheckWarn = "warn"
	CheckFail = "FAIL"
)

// CheckConfig runs the checks of `ackd config check` that need only the
// configuration and the secrets, without serving or writing anything: the
// routes, each template executed over sample data (as Validate does), the
// secrets serve requires for them, and the credentials their effects need.
// The checks that need the running system (the database, the token key
// against sealed rows) are the command's: daemon.CheckConfig adds them. cfg
// is the configuration as serve would load it (file, environment, flags)
// and already validated.
func CheckConfig(cfg Config, sec Secrets) []Check {
	var out []Check
	add := func(name, status, format string, a ...any) {
		out = append(out, Check{Name: name, Status: status, Detail: fmt.Sprintf(format, a...)})
	}

	var routes []string
	templates := 0
	for _, r := range cfg.Routes {
		routes = append(routes, r.Name+" → "+r.Effect)
		for _, src := range []string{r.Text, r.ToChannel, r.TS, r.AckText} {
			if strings.Contains(src, "{{") {
				templates++
			}
		}
	}
	if cfg.Builtin {
		add("routes", CheckWarn, "no [[route]] in %s: the built-in dry run (every event logged, nothing performed)", cfg.Source)
	} else {
		add("routes", CheckOK, "%d in %s: %s", len(cfg.Routes), cfg.Source, strings.Join(routes, ", "))
	}
	add("templates", CheckOK, "%d executed over sample data", templates)
	for _, w := range cfg.Warnings {
		add("config", CheckWarn, "%s", w)
	}

	// What New refuses: the same function, so the two cannot disagree;
	// every missing secret at once, one line each.
	warned := cfg.SecretWarnings(sec)
	for _, name := range slices.Sorted(maps.Keys(warned)) {
		add("secrets", CheckWarn, "%s", warned[name])
	}
	if problems := cfg.SecretProblems(sec); len(problems) > 0 {
		for _, err := range problems {
			add("secrets", CheckFail, "%v", err)
		}
	} else {
		var have []string
		for name, v := range map[string]string{"SLACK_SIGNING_SECRET": sec.SigningSecret, "SLACK_APP_TOKEN": sec.AppToken,
			"SLACK_BOT_TOKEN": sec.BotToken, "ACKD_FORWARD_SECRET": sec.ForwardSecret, "ACKD_REDELIVER_SECRET": sec.RedeliverSecret,
			"ACKD_TOKEN_KEY": sec.TokenKey} {
			if v != "" {
				have = append(have, name)
			}
		}
		slices.Sort(have)
		detail := "set: " + cmp.Or(strings.Join(have, ", "), "none")
		if empty := sec.unusedEmpty(warned); len(empty) > 0 {
			// Not needed by this configuration: an empty credential
			// file means "not set" (the documented install writes one
			// for each feature the config does not use).
			detail += "; not needed by this config: " + strings.Join(empty, ", ")
		}
		add("secrets", CheckOK, "%s", detail)
	}
	if w := cfg.ClearTokenWarning(sec); w != "" {
		add("secrets", CheckWarn, "%s", w)
	}
	ec := cfg.EffectConfig(sec, nil, nil)
	if cfg.OAuth != nil {
		// serve performs the Web API effects with each row's installation
		// token (Open sets Tokens), never with SLACK_BOT_TOKEN.
		ec.Tokens = installationTokens{}
	}
	skip := ec.Unavailable()
	if routed := cfg.RoutedSkips(skip); len(routed) > 0 {
		add("credentials", CheckWarn, "rows of these effects would stay pending: %s", sweep.SkipSummary(routed))
	}

	return out
}

// UnitStateDirectory is the state directory of the packaged unit
// (systemd/ackd.service: StateDirectory=ackd), where its database lives;
// systemd creates it when it starts the unit. A test holds the two equal.
const UnitStateDirectory = "/var/lib/ackd"

// installationTokens stands for serve's token source under [oauth] (the
// installations, package oauth) when config check asks which effects would
// lack a credential: the check opens no installation.
type installationTokens struct{}

func (installationTokens) BotToken(context.Context, string) (string, error) {
	return "", sweep.ErrNotInstalled
}
