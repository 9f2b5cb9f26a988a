package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/store/sqlite"
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

// CheckConfig runs the checks serve runs before it serves, without serving
// or writing anything: the configuration (routes, and each template executed
// over sample data, as Validate does), the secrets serve requires for it,
// the credentials its effects need, and the database (reachable, and its
// schema version against the binary's). cfg is the configuration as serve
// would load it (file, environment, flags) and already validated; schema is
// SQLite's embedded schema text.
func CheckConfig(ctx context.Context, cfg Config, sec Secrets, schema string) []Check {
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
	warned := cfg.secretWarnings(sec)
	for _, name := range slices.Sorted(maps.Keys(warned)) {
		add("secrets", CheckWarn, "%s", warned[name])
	}
	if problems := cfg.secretProblems(sec); len(problems) > 0 {
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
	if w := cfg.clearTokenWarning(sec); w != "" {
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

	out = append(out, checkDatabase(ctx, cfg.DB, schema))
	if c, ok := checkTokenKey(ctx, cfg, sec, schema); ok {
		out = append(out, c)
	}
	return out
}

// UnitStateDirectory is the state directory of the packaged unit
// (systemd/ackd.service: StateDirectory=ackd), where its database lives;
// systemd creates it when it starts the unit. A test holds the two equal.
const UnitStateDirectory = "/var/lib/ackd"

// checkDatabase says whether the database is reachable and how its schema
// compares with the binary's, without creating or migrating it.
func checkDatabase(ctx context.Context, db, schema string) Check {
	c := func(status, format string, a ...any) Check {
		return Check{Name: "database", Status: status, Detail: fmt.Sprintf(format, a...)}
	}
	where := RedactDB(db)
	if IsPostgres(db) {
		v, err := postgres.Probe(ctx, db)
		if err != nil {
			return c(CheckFail, "%v", err)
		}
		status, note := schemaNote(v, migrationsIn(postgres.Schema))
		return c(status, "%s: postgres reachable, %s", where, note)
	}
	v, err := sqlite.Probe(ctx, db)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(db)
		st, derr := os.Stat(dir)
		if derr != nil && filepath.Clean(dir) == UnitStateDirectory {
			// Before the unit's first start: systemd creates its
			// StateDirectory= when it starts ackd (serve itself does not
			// create a missing directory).
			return c(CheckWarn, "%s: sqlite, not created yet; %s does not exist yet: ackd.service creates it at start (StateDirectory=ackd), "+
				"serve run by hand does not (install -d -m 0700 %s)", where, dir, dir)
		}
		if derr != nil || !st.IsDir() {
			return c(CheckFail, "%s does not exist, and neither does its directory %s: serve could not create it", where, dir)
		}
		return c(CheckOK, "%s: sqlite, not created yet (serve creates it in %s)", where, dir)
	case err != nil:
		return c(CheckFail, "%s: %v", where, err)
	}
	status, note := schemaNote(v, migrationsIn(schema))
	return c(status, "%s: sqlite, %s", where, note)
}

func migrationsIn(schema string) int {
	ms, err := store.Migrations(schema)
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].Version
}

func schemaNote(have, want int) (status, note string) {
	switch {
	case have == want:
		return CheckOK, fmt.Sprintf("schema %d (current)", have)
	case have == 0:
		return CheckOK, fmt.Sprintf("no schema yet (serve creates schema %d)", want)
	case have < want:
		return CheckOK, fmt.Sprintf("schema %d (serve migrates it to %d)", have, want)
	default:
		return CheckFail, fmt.Sprintf("schema %d is newer than this ackd (%d): serve would refuse it", have, want)
	}
}

// installationTokens stands for serve's token source under [oauth] (the
// installations, package oauth) when config check asks which effects would
// lack a credential: the check opens no installation.
type installationTokens struct{}

func (installationTokens) BotToken(context.Context, string) (string, error) {
	return "", sweep.ErrNotInstalled
}
