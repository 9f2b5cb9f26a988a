// Package cli is ackd's command line: the cobra commands, one file per
// command group, each thin wiring over a package: daemon (serve), config
// (config check), store (migrate, status, outbox, route, prune, backup),
// sweep (sweep --once), ingress and catchup (backfill), manifest, and
// slacksim (send, bench). The pieces every command shares (load the config,
// open the store, the logger) are in common.go.
package cli

import (
	_ "embed"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"
)

// schema is SQLite's schema.sql, embedded by package main (go:embed cannot
// reach a parent folder) and handed over by Execute.
var schema string

// Execute runs the ackd command line with args (without the program name),
// writing to stdout and stderr, over schemaSQL (schema.sql's text). It
// returns the process's exit code: 1 after printing the error.
func Execute(schemaSQL string, args []string, stdout, stderr io.Writer) int {
	schema = schemaSQL
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "ackd:", err)
		return 1
	}
	return 0
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
