package cli

// `ackd bench compare` (slacksim.RunCompare) and the hidden `ackd ceiling`
// it measures ackd against.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/slacksim"
	"github.com/ackd/ackd/store"
)

// startCPUProfile writes a CPU profile to path until the returned stop is
// called; an empty path profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// ceilingCmd is the hidden `ackd ceiling`: the no-database reference server
// that `ackd bench compare` measures ackd against.
func ceilingCmd(g *globals) *cobra.Command {
	var cpuProfile string
	c := &cobra.Command{
		Use:    "ceiling",
		Short:  "Serve /slack/events that only verifies the signature and answers 200 (benchmark reference)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sec, err := secrets(true)
			if err != nil {
				return err
			}
			if sec.SigningSecret == "" {
				return errors.New("set SLACK_SIGNING_SECRET (the same secret the load uses)")
			}
			listen := g.listen
			if listen == "" {
				listen = os.Getenv("ACKD_LISTEN")
			}
			if listen == "" {
				listen = "127.0.0.1:3000"
			}
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen %s: %w", listen, err)
			}
			mux := http.NewServeMux()
			mux.Handle("/slack/events", slacksim.CeilingHandler(sec.SigningSecret))
			mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
			// The same server timeouts as the daemon's, so only the handler differs.
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
				WriteTimeout: 15 * time.Second, IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			fmt.Fprintf(g.stderr, "ackd ceiling listening on %s (signature check only, no database)\n", ln.Addr())
			select {
			case err := <-served:
				return err
			case <-ctx.Done():
			}
			stop()
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		},
	}
	c.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile to this file until shutdown")
	return c
}

func benchCompareCmd(g *globals) *cobra.Command {
	var (
		o      slacksim.CompareOptions
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "compare",
		Short: "Measure ackd (synchronous FULL and NORMAL, and PostgreSQL with --postgres) against a no-database ceiling under the same load",
		Long: "Starts, one after the other, `ackd serve` with synchronous=FULL, `ackd serve` with\n" +
			"synchronous=NORMAL (both with the dry-run log route, each on a fresh database in a\n" +
			"temporary directory) and `ackd ceiling` (signature check and 200, no database), each\n" +
			"on a free 127.0.0.1 port; loads each with the same `ackd bench` traffic; checks each\n" +
			"database; and prints one table with the ratios to the ceiling. Exits non-zero when a\n" +
			"database check fails or a server does not stop cleanly on SIGTERM.\n\n" +
			"With --postgres URL (or ACKD_BENCH_POSTGRES), two more rows: one `ackd serve` on that\n" +
			"PostgreSQL database, and three replicas sharing it with the load spread round-robin,\n" +
			"each in a fresh schema dropped afterwards. The PostgreSQL server's own CPU shows\n" +
			"under \"other processes\".",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			if f.Changed("rate") && f.Changed("concurrency") {
				return errors.New("bench compare: give --rate (open loop) or --concurrency (closed loop), not both")
			}
			if o.Exe == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench compare: find this binary: %w", err)
				}
				o.Exe = exe
			}
			if o.Load.Seed == 0 {
				// One seed for all three runs: the same events are duplicated.
				o.Load.Seed = time.Now().UnixNano()&(1<<62-1) | 1
			}
			o.Command = commandLine(os.Args)
			if o.Postgres == "" {
				o.Postgres = os.Getenv("ACKD_BENCH_POSTGRES")
			}
			if o.Postgres != "" && !config.IsPostgres(o.Postgres) {
				return errors.New("bench compare: --postgres wants a postgres:// URL")
			}
			o.OpenDB = func(ctx context.Context, cfgPath, dbPath string) (store.Store, error) {
				sg := &globals{config: cfgPath, db: dbPath, stdout: io.Discard, stderr: io.Discard}
				st, _, err := sg.openStore(ctx)
				return st, err
			}
			o.PrefillDB = prefillDB
			if !asJSON {
				o.Log = g.stderr
			}
			// Ctrl-C stops the load and the current server, and removes the
			// run's directory (unless --keep).
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			rep, err := slacksim.RunCompare(ctx, o)
			if rep.KeptDir != "" {
				fmt.Fprintf(g.stderr, "kept the run's directory: %s\n", rep.KeptDir)
			}
			if err != nil {
				return err
			}
			if asJSON {
				if err := json.NewEncoder(g.stdout).Encode(rep); err != nil {
					return err
				}
			} else {
				rep.WriteTable(g.stdout)
			}
			if !rep.OK {
				return errors.New("bench compare: a database check failed or a server did not stop cleanly (see above)")
			}
			return nil
		},
	}
	f := c.Flags()
	f.Float64Var(&o.Load.Rate, "rate", 0, "events per second, open loop (0: closed loop with --concurrency)")
	f.IntVar(&o.Load.Concurrency, "concurrency", 64, "closed-loop workers")
	f.DurationVar(&o.Load.Duration, "duration", 10*time.Second, "how long to load each server")
	f.Float64Var(&o.Load.DupFraction, "dup-fraction", 0, "fraction of events also delivered as an immediate concurrent duplicate")
	f.IntVar(&o.Load.PayloadBytes, "payload", 0, "pad each body to about this many bytes")
	f.Int64Var(&o.Load.Seed, "seed", 0, "seed of the duplicate pattern, the same for all three servers (0: pick one)")
	f.StringVar(&o.Dir, "dir", "", "create the run's databases under this directory: put it on the disk you mean to measure (default $TMPDIR)")
	f.BoolVar(&o.Keep, "keep", false, "keep the run's directory (databases, configs, server logs) and print its path")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&o.Postgres, "postgres", "", "also measure PostgreSQL: a postgres:// URL of a database to create throwaway schemas in (env ACKD_BENCH_POSTGRES)")
	f.StringSliceVar(&o.Only, "only", nil, "measure only these configurations, comma-separated (e.g. \"FULL,FULL+1M prune\"); the ceiling always runs")
	f.IntVar(&o.Routes, "routes", 1, "dry-run log routes every event matches, each its own outbox row")
	f.IntVar(&o.SweepBatch, "sweep-batch", 0, "the servers' sweep.batch (0: ackd's default)")
	f.IntVar(&o.Prefill, "prefill", 0, "also measure FULL on a database pre-filled with this many expired receipts and done rows, without and with pruning")
	f.StringArrayVar(&o.ServerEnv, "server-env", nil, "KEY=VALUE added to each server's environment, e.g. GOGC=200 or GOMEMLIMIT=64MiB (repeatable)")
	f.BoolVar(&o.Load.SequentialIDs, "sequential-ids", false, "event ids in insertion order instead of Slack-like random ones")
	f.StringVar(&o.Exe, "ackd", "", "ackd binary to start as the servers (default: this one)")
	_ = f.MarkHidden("ackd")
	return c
}

// prefillDB writes n receipts and n done outbox rows, all received and
// completed 30 days ago (past every default retention), straight into the
// database in one transaction: the way a long-running install looks to the
// indexes, in seconds rather than the hours the ack path would take. The
// ids are slacksim.PrefillID(i), random like Slack's; each row carries
// payload, a real event's size.
func prefillDB(ctx context.Context, cfgPath, dbPath string, n int, payload []byte) error {
	sg := &globals{config: cfgPath, db: dbPath, stdout: io.Discard, stderr: io.Discard}
	st, _, err := sg.open(ctx, openMigrate) // creates and migrates
	if err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	db, err := sql.Open("sqlite", dbPath+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	old := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	rec, err := tx.PrepareContext(ctx, `INSERT INTO slack_event_receipts (event_id, event_type, received_at) VALUES (?, 'message', ?)`)
	if err != nil {
		return err
	}
	row, err := tx.PrepareContext(ctx, `INSERT INTO outbox (idempotency_key, effect, payload, status, attempts,
		next_attempt_at, created_at, completed_at) VALUES (?, 'log', ?, 'done', 1, ?, ?, ?)`)
	if err != nil {
		return err
	}
	p := string(payload)
	for i := range n {
		id := slacksim.PrefillID(i)
		if _, err := rec.ExecContext(ctx, id, old); err != nil {
			return err
		}
		if _, err := row.ExecContext(ctx, id+":log-every-event", p, old, old, old); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// commandLine quotes args the way a shell would need them.
func commandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && config.IsPostgres(v) {
			a = k + "=" + config.RedactDB(v)
		} else if config.IsPostgres(a) {
			a = config.RedactDB(a) // never print a password
		}
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
