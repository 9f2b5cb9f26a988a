package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
	"github.com/spf13/cobra"
)

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
			return g.withStore(cmd.Context(), true, func(st store.Store, cfg config.Config) error {
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
	loc := config.RedactDB(cfg.DB)
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
			return pg.withStore(cmd.Context(), false, func(st store.Store, cfg config.Config) error {
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
			if config.IsPostgres(cfg.DB) {
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
