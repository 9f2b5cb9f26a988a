package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

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
			return g.withStore(ctx, false, func(st store.Store, cfg config.Config) error {
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
				cc := ingress.CatchUpConfig(cfg, sec, st, slackrate.New(cfg.Backfill.Rate))
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
