package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/redact"
	"github.com/ackd/ackd/store"
	"github.com/mattn/go-isatty"
)

// loadConfig resolves the configuration: file (or defaults) < env < flags.
func (g *globals) loadConfig() (config.Config, error) {
	path := g.config
	if path == "" {
		path = os.Getenv("ACKD_CONFIG")
	}
	cfg := config.Default()
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return cfg, err
		}
	}
	cfg.ApplyEnv(os.Getenv)
	// ACKD_DB beside a config file's db naming another database: refused
	// where PostgreSQL is involved, a warning between two SQLite files (it
	// wins, as in 0.1.0); --db and ACKD_DB_FILE are explicit choices.
	if g.db == "" && os.Getenv("ACKD_DB_FILE") == "" {
		w, err := cfg.CheckEnvDB(os.Getenv("ACKD_DB"))
		if err != nil {
			return cfg, err
		}
		cfg.EnvDBWarning = w
	}
	// ACKD_DB_FILE: the database setting read from a file (a systemd
	// credential), because a PostgreSQL URL carries a password. It overrides
	// ACKD_DB rather than conflicting with it: ackd 0.1.0's unit set
	// ACKD_DB, and a drop-in adding ACKD_DB_FILE must not stop ackd.
	if file := os.Getenv("ACKD_DB_FILE"); file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return cfg, fmt.Errorf("ACKD_DB_FILE: %w", err)
		}
		if cfg.DB = strings.TrimSpace(string(b)); cfg.DB == "" {
			return cfg, fmt.Errorf("ACKD_DB_FILE: %s is empty", file)
		}
	}
	if g.listen != "" {
		cfg.Listen = g.listen
	}
	if g.db != "" {
		cfg.DB = g.db
	}
	err := cfg.Validate()
	return cfg, err
}

func (g *globals) logger() *slog.Logger {
	level := slog.LevelInfo
	if v := os.Getenv("ACKD_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			fmt.Fprintf(g.stderr, "ackd: ACKD_LOG_LEVEL=%q is not debug, info, warn or error; logging at info\n", v)
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	if f, ok := g.stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		return slog.New(slog.NewTextHandler(g.stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(g.stderr, opts))
}

// How a command opens the database. Only serve (through daemon.New) and
// migrate create or migrate one; every other command works on the schema it
// finds, so that inspecting a file with a newer ackd never stops the older
// ackd serve that runs on it.
type openMode int

const (
	openMigrate  openMode = iota // migrate: create if missing, migrate to this binary's schema
	openWrite                    // must exist, this binary's schema, never migrated (sweep, prune, retry)
	openReadOnly                 // must exist, any schema from readSchema on, no write of any kind
)

// readSchema is the oldest schema the inspection commands read: request_id
// (migration 3) is the newest column they need.
const readSchema = 3

// openStore opens the configured database read-only (bench's check).
func (g *globals) openStore(ctx context.Context) (store.Store, config.Config, error) {
	return g.open(ctx, openReadOnly)
}

// withStore opens the configured database (creating and migrating it only
// when create is set, otherwise as it is: openWrite), runs fn, closes the
// database, and reports both errors.
func (g *globals) withStore(ctx context.Context, create bool, fn func(store.Store, config.Config) error) error {
	mode := openWrite
	if create {
		mode = openMigrate
	}
	return g.withMode(ctx, mode, fn)
}

// readStore is withStore for commands that only read: the database is
// opened read-only (openReadOnly).
func (g *globals) readStore(ctx context.Context, fn func(store.Store, config.Config) error) error {
	return g.withMode(ctx, openReadOnly, fn)
}

func (g *globals) withMode(ctx context.Context, mode openMode, fn func(store.Store, config.Config) error) error {
	st, cfg, err := g.open(ctx, mode)
	if err != nil {
		return err
	}
	return errors.Join(fn(st, cfg), st.Close())
}

func (g *globals) open(ctx context.Context, mode openMode) (store.Store, config.Config, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, cfg, err
	}
	opts := cfg.StoreOptions(schema, nil)
	opts.MustExist = mode != openMigrate
	opts.NoMigrate = mode != openMigrate
	if opts.ReadOnly = mode == openReadOnly; opts.ReadOnly {
		opts.MinSchema = readSchema
	}
	opts.Role = store.RoleCLI
	opts.Logger = g.storeLog
	if opts.Logger == nil {
		opts.Logger = g.logger().With("component", "store")
	}
	st, err := daemon.OpenStore(ctx, cfg.DB, opts)
	return st, cfg, err
}

func secrets(signing bool) (config.Secrets, error) {
	sec := config.Secrets{CredentialsDir: os.Getenv("CREDENTIALS_DIRECTORY")}
	var errs []error // every unreadable secret, not just the first
	// An empty file is "not set"; serve and config check refuse it only
	// where the configuration needs that secret (daemon's secretProblems).
	get := func(name string, dst *string) {
		v, empty, err := config.ReadSecret(name, os.Getenv)
		if err != nil {
			errs = append(errs, err)
		}
		if empty != "" {
			if sec.EmptyFiles == nil {
				sec.EmptyFiles = map[string]string{}
			}
			sec.EmptyFiles[name] = empty
		}
		*dst = v
	}
	// The signing secret is required to serve; a sweep uses it only to
	// re-sign redeliver rows, and leaves them alone without it.
	get("SLACK_SIGNING_SECRET", &sec.SigningSecret)
	if signing {
		get("SLACK_APP_TOKEN", &sec.AppToken)
	}
	get("SLACK_BOT_TOKEN", &sec.BotToken)
	get("ACKD_FORWARD_SECRET", &sec.ForwardSecret)
	get("ACKD_REDELIVER_SECRET", &sec.RedeliverSecret)
	get("SLACK_CLIENT_SECRET", &sec.ClientSecret)
	get("ACKD_TOKEN_KEY", &sec.TokenKey)
	get("ACKD_TOKEN_KEY_OLD", &sec.TokenKeyOld)
	get("ACKD_CONSOLE_PASSWORD", &sec.ConsolePassword)
	return sec, errors.Join(errs...)
}

// parseSince reads --since: a Slack ts (from), or a duration before
// Slack's now (ago), which catch-up measures on Slack's clock.
func parseSince(v string) (from time.Time, ago time.Duration, err error) {
	if v == "" {
		return time.Time{}, 0, nil
	}
	if store.ValidTS(v) {
		return store.TSTime(v), 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, 0, fmt.Errorf("--since %q is neither a duration (\"2h\") nor a Slack ts (\"1700000000.000100\")", v)
	}
	return time.Time{}, d, nil
}

// printRedacted prints a JSON document indented, with redact.Secrets
// applied; anything that is not a JSON object is printed as it is.
func printRedacted(w io.Writer, doc []byte) {
	if pretty, ok := redact.Pretty(doc); ok {
		_, _ = w.Write(pretty)
		return
	}
	fmt.Fprintln(w, string(doc))
}

// redactSecrets is redact.Secrets (package internal/redact, shared with
// the console).
func redactSecrets(v any) { redact.Secrets(v) }

// plural is one when n is 1, else many.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
