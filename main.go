// Command ackd answers Slack within its 3-second deadline after durably
// recording each request in SQLite, then performs the side effects from an
// outbox with leases, fencing, backoff and a dead-letter state.
//
// Each command is thin wiring over a package: daemon (serve), store
// (migrate, status, outbox, prune), sweep (sweep --once) and slacksim (send,
// bench).
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/buildinfo"
	"github.com/ackd/ackd/internal/redact"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/slacksim"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
	"github.com/ackd/ackd/sweep"
)

//go:embed schema.sql
var schema string

func main() {
	if err := newRoot(os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "ackd:", err)
		os.Exit(1)
	}
}

// globals are the flags every command shares.
type globals struct {
	config, db, listen string
	stdout, stderr     io.Writer
	storeLog           *slog.Logger // the store's logger; nil: logger()
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "ackd",
		Short:         "Answer Slack within 3 seconds, durably, and do the work afterwards",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// ackd --version: what `ackd version` prints (its --json too).
	var showVersion bool
	root.Flags().BoolVar(&showVersion, "version", false, "print the version (as ackd version) and exit")
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if !showVersion {
			return cmd.Help()
		}
		vc := versionCmd(g)
		vc.Run(vc, nil)
		return nil
	}
	// --config is accepted everywhere (`ackd --config /etc/ackd/ackd.toml
	// outbox list`); --db and --listen only where they mean something.
	root.PersistentFlags().StringVar(&g.config, "config", "", "TOML config file (env ACKD_CONFIG); none = built-in dry-run defaults")
	root.AddCommand(
		g.with(serveCmd(g), "db", "listen"),
		g.with(sweepCmd(g), "db"),
		g.with(backfillCmd(g), "db"),
		g.with(migrateCmd(g), "db"),
		g.with(statusCmd(g), "db"),
		g.with(outboxCmd(g), "db"),
		g.with(routeCmd(g), "db"),
		g.with(pruneCmd(g), "db"),
		g.with(installsCmd(g), "db"),
		g.with(backupCmd(g), "db"),
		g.with(sendCmd(g), "listen"),
		g.with(benchCmd(g), "db", "listen"),
		g.with(configCmd(g), "db", "listen"),
		manifestCmd(g),
		versionCmd(g),
		g.with(ceilingCmd(g), "listen"))
	return root
}

// with registers the shared flags --db and --listen on c (persistent, so
// that subcommands such as outbox list inherit them).
func (g *globals) with(c *cobra.Command, flags ...string) *cobra.Command {
	pf := c.PersistentFlags()
	for _, f := range flags {
		switch f {
		case "db":
			pf.StringVar(&g.db, "db", "", "database: an SQLite file, or a postgres:// URL (env ACKD_DB, or ACKD_DB_FILE naming a file that holds it; default ./ackd.db)")
		case "listen":
			pf.StringVar(&g.listen, "listen", "", "address of the daemon's HTTP listener (env ACKD_LISTEN; default 127.0.0.1:3000)")
		}
	}
	return c
}

// loadConfig resolves the configuration: file (or defaults) < env < flags.
func (g *globals) loadConfig() (daemon.Config, error) {
	path := g.config
	if path == "" {
		path = os.Getenv("ACKD_CONFIG")
	}
	cfg := daemon.Default()
	if path != "" {
		var err error
		if cfg, err = daemon.Load(path); err != nil {
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
func (g *globals) openStore(ctx context.Context) (store.Store, daemon.Config, error) {
	return g.open(ctx, openReadOnly)
}

// withStore opens the configured database (creating and migrating it only
// when create is set, otherwise as it is: openWrite), runs fn, closes the
// database, and reports both errors.
func (g *globals) withStore(ctx context.Context, create bool, fn func(store.Store, daemon.Config) error) error {
	mode := openWrite
	if create {
		mode = openMigrate
	}
	return g.withMode(ctx, mode, fn)
}

// readStore is withStore for commands that only read: the database is
// opened read-only (openReadOnly).
func (g *globals) readStore(ctx context.Context, fn func(store.Store, daemon.Config) error) error {
	return g.withMode(ctx, openReadOnly, fn)
}

func (g *globals) withMode(ctx context.Context, mode openMode, fn func(store.Store, daemon.Config) error) error {
	st, cfg, err := g.open(ctx, mode)
	if err != nil {
		return err
	}
	return errors.Join(fn(st, cfg), st.Close())
}

func (g *globals) open(ctx context.Context, mode openMode) (store.Store, daemon.Config, error) {
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

func secrets(signing bool) (daemon.Secrets, error) {
	sec := daemon.Secrets{CredentialsDir: os.Getenv("CREDENTIALS_DIRECTORY")}
	var errs []error // every unreadable secret, not just the first
	// An empty file is "not set"; serve and config check refuse it only
	// where the configuration needs that secret (daemon's secretProblems).
	get := func(name string, dst *string) {
		v, empty, err := daemon.ReadSecret(name, os.Getenv)
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

func serveCmd(g *globals) *cobra.Command {
	var cpuProfile string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: Slack ingress, sweep ticker, pruner, /healthz, /metrics",
		Long: "Run the daemon: Slack ingress (/slack/events, /slack/commands, /slack/interactivity),\n" +
			"the sweep ticker and immediate trigger, the pruner, /healthz and /metrics.\n\n" +
			"Environment (each secret may instead be given as a file named by …_FILE, e.g. a\n" +
			"systemd credential; never on the command line; an empty file means not set, and is\n" +
			"refused, naming the feature, only where the config uses that secret):\n" +
			"  SLACK_SIGNING_SECRET   the app's signing secret. Required over HTTP (serve refuses to start\n" +
			"                         without it); optional with [socket_mode] enabled, where without it\n" +
			"                         the HTTP Slack routes are not served. Also signs redeliver requests\n" +
			"  SLACK_APP_TOKEN        the app-level token (xapp-…): required with [socket_mode] enabled,\n" +
			"                         unused otherwise\n" +
			"  SLACK_BOT_TOKEN        bot token for post, react, update (without it their rows stay pending);\n" +
			"                         not used with [oauth]\n" +
			"  SLACK_CLIENT_SECRET    with [oauth], required: the app's client secret\n" +
			"  ACKD_TOKEN_KEY         with [oauth] or step routes, required: the key sealing installation\n" +
			"                         tokens and workflow steps' execution tokens\n" +
			"  ACKD_TOKEN_KEY_OLD     with [oauth]: the previous key, still accepted for tokens it sealed\n" +
			"  ACKD_FORWARD_SECRET    signs forward, step and stream requests (X-Ackd-Signature); without it\n" +
			"                         they go unsigned\n" +
			"  ACKD_CONSOLE_PASSWORD  with [console] listen, required: the console's password (user ackd)\n" +
			"  ACKD_REDELIVER_SECRET  signs redeliver requests instead of SLACK_SIGNING_SECRET (an app that\n" +
			"                         verifies another secret); required by redeliver routes without one\n" +
			"  SLACK_API_URL          Web API base URL (tests, proxies); overrides [slack] api_url\n" +
			"  ACKD_CONFIG            as --config\n" +
			"  ACKD_DB                as --db; refused when the config file's db names another database.\n" +
			"                         Or ACKD_DB_FILE, a file that holds it (a postgres:// URL with a\n" +
			"                         password, as a systemd credential), which wins over both\n" +
			"  ACKD_LISTEN            as --listen\n" +
			"  ACKD_LOG_LEVEL         debug, info (default), warn, error\n" +
			"  NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID  set by systemd (Type=notify, WatchdogSec=)\n" +
			"  CREDENTIALS_DIRECTORY  set by systemd (LoadCredential=): an empty credential is named\n" +
			"                         by its LoadCredential= source",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			sec, err := secrets(true)
			if err != nil {
				return err
			}
			srv, err := daemon.New(cfg, daemon.Options{Schema: schema, Secrets: sec, Logger: g.logger(),
				Notifier: daemon.NewNotifier(), ShutdownTimeout: 20 * time.Second})
			if err != nil {
				return err
			}
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if err := srv.Open(ctx); err != nil {
				return err
			}
			<-ctx.Done()
			stop() // a second signal now kills the process instead of waiting
			return srv.Close()
		},
	}
	c.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to this file until shutdown")
	_ = c.Flags().MarkHidden("cpuprofile")
	return c
}

func configCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Check the configuration"}
	var asJSON bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Run every startup check of serve without serving; exit 0 when serve would start",
		Long: "Loads the configuration exactly as serve does (--config / ACKD_CONFIG, the environment,\n" +
			"--db and --listen) and runs the checks serve runs before it serves: routes and keys,\n" +
			"every template executed over sample data, the secrets serve requires, the credentials\n" +
			"the routes' effects need, and the database (reachable; its schema against this binary's).\n" +
			"It creates, migrates and writes nothing. Exit status 0: serve would start (warnings\n" +
			"included); 1: it would not. For deploy pipelines: run it before restarting the unit.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var checks []daemon.Check
			cfg, err := g.loadConfig()
			if err != nil {
				checks = append(checks, daemon.Check{Name: "config", Status: daemon.CheckFail, Detail: err.Error()})
			} else {
				// Every problem in one run: the secrets that cannot be read,
				// then serve's checks over those that could.
				sec, err := secrets(true)
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					for _, e := range j.Unwrap() {
						checks = append(checks, daemon.Check{Name: "secrets", Status: daemon.CheckFail, Detail: e.Error()})
					}
				}
				checks = append(checks, daemon.CheckConfig(cmd.Context(), cfg, sec, schema)...)
			}
			failed, warned, keyOnly := 0, 0, true
			for _, c := range checks {
				switch c.Status {
				case daemon.CheckFail:
					failed++
					keyOnly = keyOnly && c.Name == daemon.CheckTokenKey
				case daemon.CheckWarn:
					warned++
				}
			}
			if asJSON {
				if err := json.NewEncoder(g.stdout).Encode(map[string]any{"ok": failed == 0, "checks": checks}); err != nil {
					return err
				}
			} else {
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				for _, c := range checks {
					fmt.Fprintf(w, "%-4s\t%s\t%s\n", c.Status, c.Name, c.Detail)
				}
				w.Flush()
			}
			if failed > 0 && keyOnly {
				return fmt.Errorf("config check: %d failed: serve would start, but the rows of those teams would wait", failed)
			}
			if failed > 0 {
				return fmt.Errorf("config check: %d failed: serve would not start", failed)
			}
			if !asJSON {
				fmt.Fprintf(g.stdout, "config check: serve would start (%d warnings)\n", warned)
			}
			return nil
		},
	}
	check.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.AddCommand(check)
	return c
}

func sweepCmd(g *globals) *cobra.Command {
	var once bool
	c := &cobra.Command{
		Use:   "sweep --once",
		Short: "Claim and perform one batch of due outbox rows, then exit",
		Long: "Runs the same sweep as the daemon's ticker, against the same database; safe to run\n" +
			"while the daemon runs (claims are disjoint). Effect failures are recorded on their rows.\n\n" +
			"Rows whose effect needs a credential this process lacks are left alone (not claimed, or\n" +
			"given back untouched): the Web API effects (post, react, update) need SLACK_BOT_TOKEN,\n" +
			"a forward recorded by a daemon that signs needs ACKD_FORWARD_SECRET, redeliver needs\n" +
			"SLACK_SIGNING_SECRET (or ACKD_REDELIVER_SECRET), and a workflow step (step, step_deadline,\n" +
			"or any row whose stored request carries a sealed execution token) needs ACKD_TOKEN_KEY.\n" +
			"stderr names what was left. Exit status is non-zero when the database failed, or when the\n" +
			"sweep performed nothing while rows it left alone are due and a credential was missing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once {
				return errors.New("the daemon sweeps by itself; use --once for a single sweep by hand")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return g.withStore(ctx, false, func(st store.Store, cfg daemon.Config) error {
				sec, err := secrets(false)
				if err != nil {
					return err
				}
				log := g.logger()
				ec := cfg.EffectConfig(sec, log, nil)
				ec.Steps = st
				svc, err := cfg.OAuthService(sec, st, log, nil, nil, nil)
				if err != nil {
					return err
				}
				if svc != nil {
					// Tokens due for a refresh first; one another process
					// is refreshing (its lease) is left to it.
					rr, err := svc.RefreshDue(ctx)
					if err != nil {
						fmt.Fprintf(g.stderr, "ackd sweep: token refresh pass failed: %v\n", err)
					} else if rr.Refreshed+rr.Held+rr.Failed > 0 {
						fmt.Fprintf(g.stderr, "ackd sweep: tokens refreshed=%d left_to_another_process=%d failed=%d\n", rr.Refreshed, rr.Held, rr.Failed)
					}
					if rr.Sealed > 0 {
						fmt.Fprintf(g.stderr, "ackd sweep: %d installations do not open with ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD): their rows wait\n", rr.Sealed)
					}
					ec.Tokens = svc
				}
				sc := cfg.SweepConfig()
				sc.Skip = ec.Unavailable()
				if routed := cfg.RoutedSkips(sc.Skip); len(routed) > 0 {
					fmt.Fprintf(g.stderr, "ackd sweep: not claiming rows this process cannot perform: %s\n", sweep.SkipSummary(routed))
				}
				sw := sweep.New(st, sweep.Effects(ec), sc, log, nil)
				g.notePaused(ctx, st) // routecmd.go
				res, err := sw.RunOnce(ctx)
				fmt.Fprintln(g.stdout, res)
				if err != nil {
					return err
				}
				if res.Claimed == 0 {
					// Rows that wait while other transactions lock them are
					// not a credential's fault: say what the database shows.
					if err := lockedOut(ctx, st, sw.ClaimFilter()); err != nil {
						return err
					}
				}
				if (len(sc.Skip) == 0 && res.Skipped == 0) || res.Claimed > res.Skipped {
					return nil
				}
				// Nothing was performed, and this process lacks a credential:
				// if rows are waiting, saying "done" would hide them.
				s, err := st.Stats(ctx)
				if err != nil {
					return err
				}
				// Rows due now that this process left alone: not those in
				// backoff, nor a workflow step's deadline row, due later.
				waiting := int64(res.Skipped)
				for e := range skipsOf(sc.Skip, res) {
					waiting += s.Due[e]
				}
				if waiting > 0 {
					// The effects the routes name, as the line above said
					// (all of them only when no route names any).
					left := cfg.RoutedSkips(skipsOf(sc.Skip, res))
					if len(left) == 0 {
						left = skipsOf(sc.Skip, res)
					}
					return fmt.Errorf("sweep performed nothing while %d rows are due: this process lacks a credential they may need (%s); run it with the daemon's credentials (docs/howto/operate.md)",
						waiting, sweep.SkipSummary(left))
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&once, "once", false, "run one sweep and exit")
	return c
}

// lockedOut reports rows a claim passed over because other transactions
// lock them (PostgreSQL), naming those sessions; nil when there are none,
// or the engine cannot tell.
func lockedOut(ctx context.Context, st store.Store, filter *store.ClaimFilter) error {
	cb, ok := st.(store.ClaimBlockers)
	if !ok {
		return nil
	}
	waiting, holders, err := cb.ClaimBlockers(ctx, filter)
	if err != nil || waiting == 0 || len(holders) == 0 {
		return err
	}
	// Other sweepers (replicas, another hand-run sweep) lock rows for the
	// moment of their own claims: that is competition, not a fault. Only
	// transactions still open a second later, the same ones, are named.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}
	waiting, again, err := cb.ClaimBlockers(ctx, filter)
	if err != nil {
		return err
	}
	first := map[int]time.Duration{}
	for _, h := range holders {
		first[h.PID] = h.XactAge
	}
	holders = holders[:0]
	for _, h := range again {
		if age, ok := first[h.PID]; ok && h.XactAge > age {
			holders = append(holders, h)
		}
	}
	if waiting == 0 || len(holders) == 0 {
		return nil
	}
	var b strings.Builder
	for i, h := range holders {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more", len(holders)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "pid %d (application %q from %s, %s for %s, transaction open %s)", h.PID, h.Application, h.Client,
			h.State, h.StateAge.Round(time.Second), h.XactAge.Round(time.Second))
	}
	return fmt.Errorf("sweep claimed nothing while %d rows are due and free: other transactions hold locks on the outbox and a claim passes over the rows they lock: %s. "+
		"They are released when those transactions end: the server ends a silent one after idle_in_transaction_session_timeout, an operator with SELECT pg_terminate_backend(pid)",
		waiting, b.String())
}

func backfillCmd(g *globals) *cobra.Command {
	var channels []string
	var since string
	var dryRun bool
	c := &cobra.Command{
		Use:   "backfill [--channel C]... [--since 2h | --since TS] [--dry-run]",
		Short: "Recover channel messages Slack never delivered from history, and record them once",
		Long: "Reads conversations.history (and conversations.replies for threads) of each channel and\n" +
			"records, for every message the live path has not, what its message (and app_mention) event\n" +
			"would have: the same routes, filters and row keys, so nothing acts twice. Safe to run beside\n" +
			"the daemon, on the same database. Without --since each channel is read from its mark (the\n" +
			"newest message known recorded); with --since from that long ago or that ts. Never further\n" +
			"back than [backfill] max_age; a --since before what ackd still keeps ([retention] done less\n" +
			"10m: an older message's rows may have been pruned, and would be performed again) is refused.\n\n" +
			"Reads SLACK_BOT_TOKEN (channels:history, groups:history) and SLACK_API_URL like sweep --once.\n" +
			"Progress goes to stderr, one summary line to stdout. Exit status is non-zero unless every\n" +
			"channel was read to the end.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return g.withStore(ctx, false, func(st store.Store, cfg daemon.Config) error {
				sec, err := secrets(false)
				if err != nil {
					return err
				}
				if len(channels) > 0 {
					cfg.Backfill.Channels = channels
					if err := cfg.Validate(); err != nil {
						return fmt.Errorf("--channel: %w", err)
					}
				}
				for _, w := range cfg.Warnings {
					fmt.Fprintf(g.stderr, "ackd backfill: config: %s\n", w)
				}
				from, ago, err := parseSince(since)
				if err != nil {
					return err
				}
				cc := cfg.CatchUpConfig(sec, st, slackrate.New(cfg.Backfill.Rate))
				if len(cc.Channels) == 0 {
					return errors.New("no channels to catch up: give --channel, or list them in [backfill] channels")
				}
				// A --since past what ackd still keeps (retention.done) is
				// refused by the run itself, on Slack's clock.
				switch reach, clamped := cc.Reach(); {
				case clamped:
					fmt.Fprintf(g.stderr, "ackd backfill: backfill.max_age %s reaches past retention.done %s (an older message's rows may have been pruned): reading back at most %s\n",
						cfg.Backfill.MaxAge.Duration, cfg.Retention.Done.Duration, reach)
				case ago > reach || !from.IsZero() && st.Now().Sub(from) > reach:
					fmt.Fprintf(g.stderr, "ackd backfill: --since %s reaches past backfill.max_age (%s): reading from %s ago\n",
						since, cfg.Backfill.MaxAge.Duration, cfg.Backfill.MaxAge.Duration)
				}
				cc.DryRun, cc.Logger = dryRun, slog.New(slog.DiscardHandler)
				pr := newProgressPrinter(g.stderr)
				cc.Progress = pr.update
				cu, err := catchup.New(cc)
				if err != nil {
					return err
				}
				var res catchup.Result
				if ago > 0 {
					res, err = cu.RunAgo(ctx, ago)
				} else {
					res, err = cu.Run(ctx, from)
				}
				pr.finish()
				if errors.Is(err, catchup.ErrBeforeKept) {
					return fmt.Errorf("--since %s %w; give a later --since, or lengthen [retention] done", since, err)
				}
				verb := "recorded"
				if dryRun {
					verb = "would record"
				}
				t := res.Totals()
				fmt.Fprintf(g.stdout, "backfill: %s %d messages (%d already recorded, %d filtered) from %d channels; %s\n",
					verb, t.Recorded, t.Duplicates, t.Filtered, len(res.Channels), res)
				if err != nil {
					return err
				}
				if !res.Finished() {
					var failed []string
					for _, p := range res.Channels {
						if p.Err != nil {
							failed = append(failed, p.Channel)
						}
					}
					return fmt.Errorf("backfill did not finish: %s not read to the end (see above); run it again to resume", strings.Join(failed, ", "))
				}
				return nil
			})
		},
	}
	c.Flags().StringArrayVar(&channels, "channel", nil, "a channel ID to catch up (repeatable; default [backfill] channels)")
	c.Flags().StringVar(&since, "since", "", "read from this long ago (\"2h\") or this Slack ts (\"1700000000.000100\"); default each channel's mark")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "record nothing; say what would be recorded")
	return c
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

// progressPrinter shows catch-up's progress: on a terminal one line per
// channel rewritten in place; otherwise one line per channel when it ends.
type progressPrinter struct {
	w    io.Writer
	tty  bool
	open bool // a line is being rewritten
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	f, ok := w.(*os.File)
	return &progressPrinter{w: w, tty: ok && isatty.IsTerminal(f.Fd())}
}

func (p *progressPrinter) update(pr catchup.Progress) {
	line := fmt.Sprintf("%s  pages=%d messages=%d recorded=%d duplicates=%d filtered=%d rate_limited=%d waited=%s",
		pr.Channel, pr.Pages, pr.Messages, pr.Recorded, pr.Duplicates, pr.Filtered, pr.RateLimited, pr.Waited.Round(100*time.Millisecond))
	switch {
	case pr.Err != nil:
		line += "  stopped: " + pr.Err.Error()
	case pr.Done && pr.Note != "":
		line += "  (" + pr.Note + ")"
	case pr.Done:
		line += "  done"
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		p.open = true
		if pr.Done {
			fmt.Fprintln(p.w)
			p.open = false
		}
		return
	}
	if pr.Done {
		fmt.Fprintln(p.w, line)
	}
}

func (p *progressPrinter) finish() {
	if p.open {
		fmt.Fprintln(p.w)
	}
}

// skipsOf is what a sweep left alone: the effects it did not claim, and
// forward rows it gave back for want of the forward secret.
func skipsOf(skip map[string]string, res sweep.Result) map[string]string {
	out := map[string]string{}
	maps.Copy(out, skip)
	if res.Skipped > 0 {
		out["forward"] = sweep.CredForwardSecret + " is not set"
	}
	return out
}

func migrateCmd(g *globals) *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema (serve also does this at start)",
		Long: "Create or upgrade the database schema (serve also does this at start).\n\n" +
			"--dry-run prints the database's schema version and each migration this ackd would\n" +
			"apply with what it costs (in place, or how many rows it updates), and writes nothing\n" +
			"(a missing SQLite file is not created). Each migration applied to an existing\n" +
			"database is logged with the time it held the write lock (lock_ms): a daemon still\n" +
			"serving the database waits that long to record its acks.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun {
				return g.migrateDryRun(cmd.Context())
			}
			return g.withStore(cmd.Context(), true, func(st store.Store, cfg daemon.Config) error {
				v, err := st.SchemaVersion(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "%s: schema version %d\n", st.Location(), v)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the migrations that would run; write nothing")
	return c
}

func (g *globals) migrateDryRun(ctx context.Context) error {
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	p, err := daemon.PendingMigrations(ctx, cfg.DB, schema)
	if err != nil {
		return err
	}
	loc := daemon.RedactDB(cfg.DB)
	switch {
	case !p.Exists:
		fmt.Fprintf(g.stdout, "%s: no database yet; migrate would create it\n", loc)
	case len(p.Apply) == 0:
		fmt.Fprintf(g.stdout, "%s: schema version %d, up to date: nothing to apply\n", loc, p.Current)
		return nil
	default:
		fmt.Fprintf(g.stdout, "%s: schema version %d\n", loc, p.Current)
	}
	for _, m := range p.Apply {
		fmt.Fprintf(g.stdout, "would apply migration %d: %s\n", m.Version, m.Summary())
		if cost := m.Cost(); cost != "" && p.Exists {
			if n, ok := p.Rows[m.Version]; ok {
				cost += fmt.Sprintf(" (%d %s now)", n, plural(n, "row", "rows"))
			}
			fmt.Fprintf(g.stdout, "  cost: %s\n", cost)
		}
	}
	fmt.Fprintf(g.stdout, "dry run: nothing written (migrate would bring it to schema version %d)\n", p.Apply[len(p.Apply)-1].Version)
	return nil
}

func statusCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Outbox rows by status, receipts, the oldest pending row's age, and the daemons running on the database",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.readStore(cmd.Context(), func(st store.Store, cfg daemon.Config) error {
				s, err := st.Stats(cmd.Context())
				if err != nil {
					return err
				}
				daemons, copied, copiedWhy, err := instancesOn(cmd.Context(), st)
				if err != nil {
					return err
				}
				waiting := waitingRows(s.Due, daemons)
				pausedJSON, pausedLines, err := pausedStatus(cmd.Context(), st) // routecmd.go
				if err != nil {
					return err
				}
				marks, err := st.Marks(cmd.Context())
				if err != nil {
					return err
				}
				now := st.Now()
				lag := func(m store.Mark) time.Duration { return max(0, now.Sub(store.TSTime(m.TS))).Round(time.Second) }
				if asJSON {
					running := []map[string]any{}
					for _, in := range daemons {
						d := map[string]any{"pid": in.PID, "host": in.Host, "listen": in.Listen,
							"started_at":            in.StartedAt.UTC().Format(time.RFC3339),
							"heartbeat_age_seconds": int64(max(0, now.Sub(in.HeartbeatAt)).Seconds())}
						if sm := daemon.ParseInstanceState(in).SocketMode; sm != nil {
							d["socket_mode"] = sm // as of its last heartbeat
						}
						running = append(running, d)
					}
					copiedJSON := []map[string]any{}
					for i, in := range copied {
						copiedJSON = append(copiedJSON, map[string]any{"pid": in.PID, "host": in.Host, "listen": in.Listen,
							"heartbeat_age_seconds": int64(max(0, now.Sub(in.HeartbeatAt)).Seconds()), "why": copiedWhy[i]})
					}
					markJSON := []map[string]any{}
					for _, m := range marks {
						markJSON = append(markJSON, map[string]any{"channel": m.Channel, "ts": m.TS,
							"lag_seconds": int64(lag(m).Seconds()), "resume_from": m.ResumeFrom})
					}
					return json.NewEncoder(g.stdout).Encode(map[string]any{
						"db": st.Location(), "engine": st.Engine(), "schema_version": s.SchemaVersion, "receipts": s.Receipts,
						"pending": s.Pending, "leased": s.Leased, "done": s.Done, "parked": s.Parked, "discarded": s.Discarded,
						"oldest_pending_seconds": int64(s.OldestPending.Seconds()),
						"daemons":                running,
						"copied_heartbeats":      copiedJSON,
						"recovered":              s.Recovered,
						"marks":                  markJSON,
						"waiting":                waiting,
						"paused_routes":          pausedJSON,
					})
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintf(w, "database\t%s (%s, schema %d)\n", st.Location(), st.Engine(), s.SchemaVersion)
				fmt.Fprintf(w, "receipts\t%d\n", s.Receipts)
				fmt.Fprintf(w, "pending\t%d (%d leased)\n", s.Pending, s.Leased)
				fmt.Fprintf(w, "done\t%d\n", s.Done)
				fmt.Fprintf(w, "parked\t%d\n", s.Parked)
				fmt.Fprintf(w, "discarded\t%d\n", s.Discarded)
				fmt.Fprintf(w, "oldest pending\t%s\n", s.OldestPending.Round(time.Second))
				for i, wr := range waiting {
					label := ""
					if i == 0 {
						label = "waiting"
					}
					fmt.Fprintf(w, "%s\t%d %s %s due, for %s\n", label, wr.Rows, wr.Effect, plural(wr.Rows, "row", "rows"), wr.For)
				}
				for i, line := range pausedLines {
					label := ""
					if i == 0 {
						label = "paused"
					}
					fmt.Fprintf(w, "%s\t%s\n", label, line)
				}
				fmt.Fprintf(w, "recovered\t%d (intents catch-up recorded that the live path had missed)\n", s.Recovered)
				for i, m := range marks {
					label := ""
					if i == 0 {
						label = "marks"
					}
					line := fmt.Sprintf("%s %s (%s, lag %s)", m.Channel, m.TS, store.TSTime(m.TS).UTC().Format(time.DateTime), lag(m))
					if m.ResumeFrom != "" {
						line += "; catch-up under way, resumes from " + m.ResumeFrom
					}
					fmt.Fprintf(w, "%s\t%s\n", label, line)
				}
				if len(daemons) == 0 {
					fmt.Fprintf(w, "daemons\tnone running (no heartbeat in the last %s)\n", daemon.InstanceStale)
				}
				for i, in := range daemons {
					label := ""
					if i == 0 {
						label = "daemons"
					}
					fmt.Fprintf(w, "%s\t%s\n", label, daemon.DescribeInstance(in, now))
					if sm := daemon.ParseInstanceState(in).SocketMode; sm != nil {
						fmt.Fprintf(w, "\tsocket mode: %s (at its last heartbeat)\n", daemon.DescribeSocket(sm, now))
					}
				}
				for i, in := range copied {
					fmt.Fprintf(w, "copied heartbeat\tpid %d on host %s, seen %s ago: not running here; %s\n", in.PID, in.Host,
						max(0, now.Sub(in.HeartbeatAt)).Round(time.Second), copiedWhy[i])
				}
				return w.Flush()
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func outboxCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "outbox", Short: "Inspect, requeue and discard outbox rows"}
	var status string
	var limit int
	var listJSON, showJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List outbox rows, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if status != "" && !slices.Contains(store.Statuses, status) {
				return fmt.Errorf("outbox list: --status %q is not a status; use one of %s", status, strings.Join(store.Statuses, ", "))
			}
			return g.readStore(cmd.Context(), func(st store.Store, _ daemon.Config) error {
				rows, err := st.List(cmd.Context(), status, limit)
				if err != nil {
					return err
				}
				if listJSON {
					out := make([]map[string]any, 0, len(rows))
					for _, r := range rows {
						out = append(out, rowJSON(r))
					}
					return json.NewEncoder(g.stdout).Encode(out)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tSTATUS\tEFFECT\tATTEMPTS\tCREATED\tKEY\tLAST ERROR")
				for _, r := range rows {
					fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Status, r.Effect, r.Attempts,
						r.CreatedAt.UTC().Format(time.DateTime), r.Key, oneLine(lastError(r), 80))
				}
				return w.Flush()
			})
		},
	}
	list.Flags().StringVar(&status, "status", "", "only rows with this status: "+strings.Join(store.Statuses, ", "))
	list.Flags().IntVar(&limit, "limit", 50, "at most this many rows")
	list.Flags().BoolVar(&listJSON, "json", false, "print a JSON array of rows (the fields of show --json, without payload and request)")

	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one outbox row with its payload",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return fmt.Errorf("outbox show: %q is not a row id", args[0])
			}
			return g.readStore(cmd.Context(), func(st store.Store, _ daemon.Config) error {
				r, err := st.Get(cmd.Context(), id)
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("outbox show: no outbox row %d (done and discarded rows are pruned after [retention] done)", id)
				}
				if err != nil {
					return err
				}
				if r.Status != store.StatusPending {
					r.NextAttemptAt = time.Time{} // no sweep will attempt it: show none
				}
				waiting := ""
				if r.Status == store.StatusPending {
					daemons, err := runningDaemons(cmd.Context(), st)
					if err != nil {
						return err
					}
					waiting = waitsFor(r, daemons, st.Now())
					if waiting, err = pausedWaits(cmd.Context(), st, r, waiting); err != nil { // routecmd.go
						return err
					}
				}
				attempts, err := st.Attempts(cmd.Context(), id)
				if err != nil && !errors.Is(err, store.ErrNotFound) { // pruned since the Get: none
					return err
				}
				if showJSON {
					return showRowJSON(g.stdout, r, waiting, attempts)
				}
				t := func(v time.Time) string {
					if v.IsZero() {
						return "-"
					}
					return v.UTC().Format(time.RFC3339Nano)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintf(w, "id\t%d\nkey\t%s\neffect\t%s\nstatus\t%s\nattempts\t%d\n", r.ID, r.Key, r.Effect, r.Status, r.Attempts)
				fmt.Fprintf(w, "created\t%s\nnext attempt\t%s\nlease until\t%s\ncompleted\t%s\n",
					t(r.CreatedAt), t(r.NextAttemptAt), t(r.ClaimExpiresAt), t(r.CompletedAt))
				fmt.Fprintf(w, "last error\t%s\nresult\t%s\n", lastError(r), r.Result)
				if waiting != "" {
					fmt.Fprintf(w, "waiting for\t%s\n", waiting)
				}
				if r.OutcomeUnknown {
					// A post is then confirmed before it is repeated.
					fmt.Fprintf(w, "outcome unknown\tyes: an earlier attempt may have taken effect (first claimed %s)\n", t(r.FirstClaimedAt))
				}
				if r.Note != "" {
					fmt.Fprintf(w, "note\t%s\n", r.Note)
				}
				w.Flush()
				printAttempts(g.stdout, attempts)
				fmt.Fprintln(g.stdout, "payload:")
				printRedacted(g.stdout, []byte(r.Payload))
				if r.RequestID != "" {
					if r.Request == nil {
						fmt.Fprintf(g.stdout, "request:\n(%s: no longer stored)\n", r.RequestID)
						return nil
					}
					// What the effect is performed from: the envelope, the
					// command form as JSON, or the interaction payload.
					var p sweep.Payload
					_ = json.Unmarshal([]byte(r.Payload), &p)
					fmt.Fprintf(g.stdout, "request (%s, %d bytes, stored once for %s):\n", r.Request.ContentType, len(r.Request.Body), r.RequestID)
					if raw := sweep.RequestRaw(p.Source, r.Request); raw != nil {
						printRedacted(g.stdout, raw)
					} else {
						fmt.Fprintln(g.stdout, "(not shown: it does not parse)")
					}
				}
				return nil
			})
		},
	}

	show.Long = "Show one outbox row with its payload.\n\n" +
		"A pending row also says what it is waiting for: a sweep performing it now, its next\n" +
		"attempt, the running daemon's next sweep, or a process that has what the row needs\n" +
		"(the credential no running daemon has: each records at its heartbeat what it can\n" +
		"perform)."
	show.Long += "\n\n" +
		"Its attempts are listed oldest first: each one's number, start (the claim's time),\n" +
		"duration, outcome (done, retry, parked; fenced: its lease was lost and nothing of it\n" +
		"was written; unknown: its process stopped or died mid-effect and its lease ran out),\n" +
		"the handler's HTTP status or Slack's error, what it produced (a message ts, the\n" +
		"handler's status) and its error."
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON: the row's fields, what it waits for (waiting_for), its attempts, its payload and its stored request (redacted as in the text)")
	c.AddCommand(list, show, retryCmd(g), discardCmd(g))
	c.AddCommand(replayCmd(g)) // outboxreplay.go
	return c
}

// rowJSON is one row for outbox list --json and show --json: times are
// RFC 3339 in UTC, or null when unset (next_attempt_at is null unless the
// row is pending: no sweep will attempt it).
func rowJSON(r store.Row) map[string]any {
	t := func(v time.Time) any {
		if v.IsZero() {
			return nil
		}
		return v.UTC().Format(time.RFC3339Nano)
	}
	next := r.NextAttemptAt
	if r.Status != store.StatusPending {
		next = time.Time{}
	}
	var route string
	var p sweep.Payload
	if json.Unmarshal([]byte(r.Payload), &p) == nil {
		route = p.Route
	}
	return map[string]any{"id": r.ID, "key": r.Key, "effect": r.Effect, "route": route, "status": r.Status, "attempts": r.Attempts,
		"created_at": t(r.CreatedAt), "next_attempt_at": t(next), "lease_until": t(r.ClaimExpiresAt), "completed_at": t(r.CompletedAt),
		"last_error": r.LastError, "result": r.Result, "request_id": r.RequestID}
}

// printAttempts prints a row's attempts as a timeline (outbox show).
func printAttempts(out io.Writer, attempts []store.Attempt) {
	if len(attempts) == 0 {
		fmt.Fprintln(out, "attempts: none")
		return
	}
	fmt.Fprintln(out, "attempts:")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  N\tSTARTED\tTOOK\tOUTCOME\tSTATUS\tRESULT\tERROR")
	dash := func(v string) string { return cmp.Or(v, "-") }
	for _, a := range attempts {
		took := "-"
		if !a.EndedAt.IsZero() {
			took = a.EndedAt.Sub(a.StartedAt).Round(time.Millisecond).String()
		}
		errText := a.Error
		if a.Outcome == store.AttemptUnknown && errText == "" {
			errText = "(its lease ran out with no word from its process: it may have taken effect)"
		}
		fmt.Fprintf(w, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.N, a.StartedAt.UTC().Format(time.RFC3339Nano), took,
			a.Outcome, dash(a.Status), dash(oneLine(a.Result, 40)), dash(oneLine(errText, 100)))
	}
	w.Flush()
}

// attemptsJSON is a row's attempts for show --json: times RFC 3339 in UTC
// (ended_at and duration_ms null for an unknown outcome).
func attemptsJSON(attempts []store.Attempt) []map[string]any {
	out := make([]map[string]any, 0, len(attempts))
	for _, a := range attempts {
		var ended, took any
		if !a.EndedAt.IsZero() {
			ended, took = a.EndedAt.UTC().Format(time.RFC3339Nano), a.EndedAt.Sub(a.StartedAt).Milliseconds()
		}
		out = append(out, map[string]any{"n": a.N, "started_at": a.StartedAt.UTC().Format(time.RFC3339Nano),
			"ended_at": ended, "duration_ms": took, "outcome": a.Outcome, "status": a.Status, "error": a.Error, "result": a.Result})
	}
	return out
}

// showRowJSON prints one row with its attempts, payload and stored request,
// the last two redacted as the text form redacts them.
func showRowJSON(w io.Writer, r store.Row, waiting string, attempts []store.Attempt) error {
	out := rowJSON(r)
	out["waiting_for"] = nil
	if waiting != "" {
		out["waiting_for"] = waiting
	}
	out["attempts"] = attemptsJSON(attempts)
	redacted := func(doc []byte) any {
		var v any
		if json.Unmarshal(doc, &v) != nil {
			return string(doc)
		}
		redactSecrets(v)
		return v
	}
	out["payload"] = redacted([]byte(r.Payload))
	if r.RequestID != "" {
		req := map[string]any{"stored": r.Request != nil}
		if r.Request != nil {
			var p sweep.Payload
			_ = json.Unmarshal([]byte(r.Payload), &p)
			req["content_type"], req["bytes"] = r.Request.ContentType, len(r.Request.Body)
			if raw := sweep.RequestRaw(p.Source, r.Request); raw != nil {
				req["body"] = redacted(raw)
			}
		}
		out["request"] = req
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// lastError is a row's last error as the commands show it: a done row's is
// from an attempt before the one that succeeded, and says so.
func lastError(r store.Row) string {
	if r.Status == store.StatusDone && r.LastError != "" {
		return "(before it succeeded) " + r.LastError
	}
	return r.LastError
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func pruneCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "prune",
		Short: "Delete receipts, and done and discarded rows, older than the retention (pending and parked rows stay)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Prune's slices go through the group committer, which logs a
			// lost transaction for the daemon's operator; this command
			// reports its own error, once.
			pg := *g
			pg.storeLog = slog.New(slog.DiscardHandler)
			return pg.withStore(cmd.Context(), false, func(st store.Store, cfg daemon.Config) error {
				res, err := st.Prune(cmd.Context(), cfg.Retention.Receipts.Duration, cfg.Retention.Done.Duration, 0)
				if err != nil {
					return fmt.Errorf("%w (deleted before the failure: receipts=%d done=%d)", err, res.Receipts, res.Done)
				}
				fmt.Fprintf(g.stdout, "pruned receipts=%d done=%d discarded=%d requests=%d\n", res.Receipts, res.Done, res.Discarded, res.Requests)
				return nil
			})
		},
	}
}

func backupCmd(g *globals) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the SQLite database to FILE while ackd runs: consistent, mode 0600, integrity-checked",
		Long: "Writes one consistent snapshot of the database (VACUUM INTO, while the daemon keeps\n" +
			"acking) into a file created 0600 beside FILE, checks it with PRAGMA integrity_check,\n" +
			"fsyncs it and renames it to FILE: FILE is either the whole checked copy or absent.\n" +
			"The database holds Slack's verification tokens and response_urls: keep backups as\n" +
			"private as the database. An existing FILE is refused unless --force. The database\n" +
			"is read, never migrated or written. On PostgreSQL, use pg_dump.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if daemon.IsPostgres(cfg.DB) {
				return errors.New("backup: the database is PostgreSQL; back it up with pg_dump (ackd backup copies SQLite files)")
			}
			info, err := sqlite.Backup(cmd.Context(), cfg.DB, args[0], force)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "backed up %s to %s (%d bytes, schema %d, integrity ok, mode 0600)\n",
				cfg.DB, info.Path, info.Bytes, info.SchemaVersion)
			return nil
		},
	}
	c.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return c
}

func (g *globals) baseURL() string {
	cfg, err := g.loadConfig()
	listen := "127.0.0.1:3000"
	if err == nil {
		listen = cfg.Listen
	}
	return "http://" + listen
}

func sendCmd(g *globals) *cobra.Command {
	var url, cacert string
	var form bool
	var retryNum int
	c := &cobra.Command{
		Use:   "send FILE",
		Short: "Sign a payload file with SLACK_SIGNING_SECRET and POST it to a running ackd",
		Long: "Signs FILE with the signing secret in SLACK_SIGNING_SECRET (or the file named by\n" +
			"SLACK_SIGNING_SECRET_FILE), the same secret the daemon uses, and POSTs it.\n" +
			"JSON files go to /slack/events. With --form the file is a form body: a slash command,\n" +
			"or an interaction when it has a payload= field. --url overrides the target URL.\n" +
			"An https:// --url is checked against the system's CAs (SSL_CERT_FILE names another\n" +
			"bundle) and, with --cacert, the certificates in that PEM file: Caddy's local CA is\n" +
			"/var/lib/caddy/.local/share/caddy/pki/authorities/local/root.crt.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			var client *http.Client
			if cacert != "" {
				if client, err = caClient(cacert); err != nil {
					return err
				}
			}
			sec, err := daemon.Secret("SLACK_SIGNING_SECRET", os.Getenv)
			if err != nil {
				return err
			}
			if sec == "" {
				return errors.New("set SLACK_SIGNING_SECRET (the same secret the daemon uses)")
			}
			body = []byte(strings.TrimRight(string(body), "\r\n"))
			if url == "" {
				path := "/slack/events"
				if form {
					path = "/slack/commands"
					if strings.HasPrefix(string(body), "payload=") || strings.Contains(string(body), "&payload=") {
						path = "/slack/interactivity"
					}
				}
				url = g.baseURL() + path
			}
			a, err := slacksim.SendAnswer(cmd.Context(), slacksim.SendOptions{
				URL: url, Secret: sec, Body: body, Form: form, RetryNum: retryNum, Client: client})
			if err != nil {
				return err
			}
			line := fmt.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
			if o := a.Header.Get(daemon.HeaderOutcome); o != "" {
				line += " (ackd: " + outcomeText(o, a.Header.Get(daemon.HeaderReason)) + ")"
			}
			fmt.Fprintln(g.stdout, line)
			if resp := strings.TrimSpace(string(a.Body)); resp != "" && resp != http.StatusText(a.Status) {
				fmt.Fprintln(g.stdout, resp)
			}
			switch {
			case a.Status == http.StatusUnauthorized:
				return errors.New("rejected (401): the signing secret differs from the daemon's, or the clock is off (a signature is valid for 5 minutes)")
			case a.Status == http.StatusBadRequest && !form && !json.Valid(body):
				return fmt.Errorf("the daemon answered 400: %s is not JSON; a form body (a slash command, or an interaction with payload=) is sent with --form", args[0])
			case a.Status >= 300:
				return fmt.Errorf("the daemon answered %d", a.Status)
			}
			return nil
		},
	}
	c.Flags().StringVar(&cacert, "cacert", "", "PEM file of CA certificates to trust for an https:// --url, besides the system's (e.g. Caddy's local CA)")
	c.Flags().StringVar(&url, "url", "", "target URL (default http://{listen}/slack/events, /slack/commands or /slack/interactivity)")
	c.Flags().BoolVar(&form, "form", false, "the file is a form body (slash command or interaction), not Events API JSON")
	c.Flags().IntVar(&retryNum, "retry-num", 0, "add X-Slack-Retry-Num: N and X-Slack-Retry-Reason: http_timeout")
	return c
}

// caClient is an HTTP client for send that trusts the certificates in the
// PEM file besides the system's.
func caClient(file string) (*http.Client, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--cacert: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--cacert: %s holds no PEM certificate", file)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil
}

// outcomeText says what ackd decided, from its X-Ackd-Outcome header.
func outcomeText(outcome, reason string) string {
	switch outcome {
	case "first":
		return "first delivery, recorded"
	case "duplicate":
		return "duplicate, already recorded: nothing added"
	case "ignored":
		if reason != "" {
			return "ignored (" + reason + "), nothing recorded"
		}
		return "ignored, nothing recorded"
	case "challenge":
		return "url_verification challenge answered"
	case "failed":
		return "failed: not recorded within the ack budget"
	case "unknown":
		return "unknown: the commit got no answer and the database could not say whether it was recorded"
	default:
		return outcome
	}
}

// versionJSON prints the version as JSON for `ackd version --json`: what
// `ackd version` prints (internal/buildinfo), the revision and whether the
// tree had changes apart, and the platform.
func versionJSON(w io.Writer) error {
	bi := buildinfo.Read()
	rev, modified := strings.CutSuffix(bi.Commit, "-dirty")
	if rev == "unknown" {
		rev = ""
	}
	return json.NewEncoder(w).Encode(map[string]any{"version": bi.Version, "revision": rev, "modified": modified,
		"go": bi.GoVersion, "os": runtime.GOOS, "arch": runtime.GOARCH})
}

func versionCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go version (also: ackd --version)",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			if asJSON {
				_ = versionJSON(g.stdout)
				return
			}
			fmt.Fprintln(g.stdout, buildinfo.Read())
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON: version, revision, modified, go, os, arch")
	return c
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
