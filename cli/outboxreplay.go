package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/store"
)

// replayWarning is said by every replay and its dry run.
const replayWarning = "warning: a replay performs each row's effect again: a post posts again, a reaction is added again, " +
	"a forward or step calls its handler again (with the new key as Idempotency-Key, so the handler sees a new request)"

// replayCmd is `ackd outbox replay` (issue 31.3): a new pending row per
// selected row, keyed <key>#r<N>, with the same effect, payload and stored
// request; the original row and the receipts stay as they are.
func replayCmd(g *globals) *cobra.Command {
	var route, since, until, statuses string
	var expect int64
	var dryRun bool
	c := &cobra.Command{
		Use:   "replay (ID... | --route R --since T [--until T] [--status done,parked,discarded]) [--dry-run]",
		Short: "Perform finished rows again: a new pending row per row, keyed <key>#r<N>",
		Long: "Perform finished rows again: for each row given by id, or each row of a route created in a\n" +
			"time window (of the statuses given, done by default), a new pending row keyed\n" +
			"<original key>#r<N> (N: 1 + the replays of that key still stored) with the same effect,\n" +
			"payload and stored Slack request, due now. The original row stays as it was; receipts are\n" +
			"untouched; all the new rows are made in one transaction.\n\n" +
			"The side effects repeat: a post posts again, a forward calls its handler again, with the\n" +
			"new key as Idempotency-Key. A replayed row not yet performed can be discarded by id.\n\n" +
			"Times (--since, --until) are RFC 3339 (2026-12-02T10:15:00Z) or a duration ago (2h, 90m).\n" +
			"Refused, with nothing changed: no ids and no --route; --route without --since; an empty or\n" +
			"unknown route or status; a pending row (it has not finished); an id that is no row; a row\n" +
			"whose stored Slack request was pruned (it could not be performed again). --dry-run shows\n" +
			fmt.Sprintf("how many rows would be replayed and the first %d, and changes nothing.", previewRows),
		RunE: func(cmd *cobra.Command, args []string) error {
			flags := cmd.Flags()
			window := flags.Changed("since") || flags.Changed("until") || flags.Changed("status")
			switch {
			case len(args) == 0 && !flags.Changed("route"):
				return errors.New("outbox replay: give row IDs, or --route R --since T (nothing is replayed without a selection)")
			case len(args) > 0 && (flags.Changed("route") || window):
				return errors.New("outbox replay: give row IDs or --route with its window, not both")
			case flags.Changed("route") && route == "":
				return errors.New("outbox replay: --route is empty (an unset shell variable?): name a route (`ackd route list` lists them)")
			case flags.Changed("route") && !flags.Changed("since"):
				return errors.New("outbox replay: --route needs --since T (RFC 3339, or a duration ago such as 2h): the start of the window to replay")
			}
			route = config.RouteName(route) // NFC, as the config's names
			if expect < 0 {
				return errors.New("outbox replay: --expect must not be negative")
			}
			f := store.ReplayFilter{Expect: expect}
			for _, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil || id <= 0 {
					return fmt.Errorf("outbox replay: %q is not a row id", a)
				}
				if !slices.Contains(f.IDs, id) {
					f.IDs = append(f.IDs, id)
				}
			}
			if flags.Changed("status") {
				for s := range strings.SplitSeq(statuses, ",") {
					s = strings.TrimSpace(s)
					switch {
					case s == "":
						return fmt.Errorf("outbox replay: --status %q names an empty status; use %s", statuses, strings.Join(store.ReplayStatuses, ", "))
					case s == store.StatusPending:
						return errors.New("outbox replay: --status pending: a pending row is not replayed (it has not finished: it waits for a sweep)")
					case !slices.Contains(store.ReplayStatuses, s):
						msg := fmt.Sprintf("outbox replay: --status %q is not a status a replay copies", s)
						if n := config.Nearest(s, store.ReplayStatuses); n != "" {
							msg += fmt.Sprintf(": did you mean %q?", n)
						}
						return fmt.Errorf("%s (use %s)", msg, strings.Join(store.ReplayStatuses, ", "))
					}
					if !slices.Contains(f.Statuses, s) {
						f.Statuses = append(f.Statuses, s)
					}
				}
			}
			run := func(st store.Store, cfg config.Config) error {
				ctx := cmd.Context()
				if f.IDs == nil {
					now, err := storeClock(ctx, st)
					if err != nil {
						return err
					}
					if f.Since, err = parseWhen("since", since, now); err != nil {
						return err
					}
					if flags.Changed("until") {
						if f.Until, err = parseWhen("until", until, now); err != nil {
							return err
						}
					}
					f.Route = route
					if err := checkReplayRoute(ctx, st, cfg, f); err != nil {
						return err
					}
				}
				if err := f.Check(); err != nil {
					return fmt.Errorf("outbox %w", unwrapFilter(err))
				}
				if dryRun {
					if f.IDs == nil && f.Until.IsZero() {
						// The preview's window ends now: the command it
						// prints replays what it counted, not what arrives
						// later.
						now, err := storeClock(ctx, st)
						if err != nil {
							return err
						}
						f.Until = now
					}
					return g.previewReplay(ctx, st, f)
				}
				done, err := st.Replay(ctx, f)
				if err != nil {
					return replayError(err)
				}
				if len(done) > 0 {
					fmt.Fprintln(g.stderr, replayWarning)
				}
				return g.printReplayed(f, done)
			}
			if dryRun {
				return g.readStore(cmd.Context(), run)
			}
			return g.withStore(cmd.Context(), false, run)
		},
	}
	c.Flags().StringVar(&route, "route", "", "replay the rows this route made (with --since); refused when empty or unknown")
	c.Flags().StringVar(&since, "since", "", "with --route: rows created at or after this time (RFC 3339, or a duration ago: 2h)")
	c.Flags().StringVar(&until, "until", "", "with --route: rows created before this time (RFC 3339, or a duration ago; default now)")
	c.Flags().StringVar(&statuses, "status", "", "with --route: statuses to replay, comma-separated: done, parked, discarded (default done)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, fmt.Sprintf("show what would be replayed (how many rows, the first %d), change nothing", previewRows))
	c.Flags().Int64Var(&expect, "expect", 0, "act only if the selection is exactly this many rows (the count --dry-run printed, with its absolute --since and --until); otherwise replay nothing")
	return c
}

// parseWhen reads an RFC 3339 time or a duration ago (before now).
func parseWhen(flag, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, fmt.Errorf("outbox replay: --%s is empty (an unset shell variable?); give an RFC 3339 time or a duration ago such as 2h", flag)
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("outbox replay: --%s %s: a duration ago must be positive", flag, v)
		}
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("outbox replay: --%s %q is neither an RFC 3339 time (2026-12-02T10:15:00Z) nor a duration ago (2h, 90m)", flag, v)
}

// checkReplayRoute refuses a route that neither the config nor the rows of
// the statuses replayed know, with the nearest known name.
func checkReplayRoute(ctx context.Context, st store.Store, cfg config.Config, f store.ReplayFilter) error {
	configGiven := cfg.Source != config.Default().Source
	var known []string
	if configGiven {
		for _, r := range cfg.Routes {
			known = append(known, r.Name)
		}
	}
	for _, s := range f.StatusList() {
		routes, _, err := st.FilterNames(ctx, s)
		if err != nil {
			return err
		}
		known = append(known, routes...)
	}
	slices.Sort(known)
	known = slices.Compact(known)
	if slices.Contains(known, f.Route) {
		return nil
	}
	of := fmt.Sprintf("the %s rows", strings.Join(f.StatusList(), ", "))
	if configGiven {
		of = fmt.Sprintf("the config (%s) nor of %s", cfg.Source, of)
	} else {
		of += " (give --config to name the config's routes too)"
	}
	msg := fmt.Sprintf("outbox replay: --route %q is not a route of %s", f.Route, of)
	return unknownRoute(msg, f.Route, known)
}

// unwrapFilter drops the ErrFilter suffix from a store refusal's text.
func unwrapFilter(err error) error {
	return errors.New(strings.TrimSuffix(err.Error(), ": "+store.ErrFilter.Error()))
}

// replayError words a store refusal for the command line.
func replayError(err error) error {
	var refused *store.ReplayRefused
	if errors.As(err, &refused) {
		return fmt.Errorf("outbox %s", refused.Error())
	}
	if errors.Is(err, store.ErrFilter) {
		return fmt.Errorf("outbox %w", unwrapFilter(err))
	}
	return err
}

// previewReplay is --dry-run: how many rows, the first previewRows.
func (g *globals) previewReplay(ctx context.Context, st store.Store, f store.ReplayFilter) error {
	rows, total, err := st.ReplayMatching(ctx, f, previewRows)
	if err != nil {
		return replayError(err)
	}
	fmt.Fprintf(g.stdout, "would replay %d %s\n", total, plural(total, "row", "rows"))
	if total > 0 {
		cmd := "ackd outbox replay"
		if f.IDs != nil {
			for _, id := range f.IDs {
				cmd += " " + strconv.FormatInt(id, 10)
			}
		} else {
			cmd += fmt.Sprintf(" --route %s --since %s --until %s --status %s", shellQuote(f.Route),
				f.Since.UTC().Format(time.RFC3339Nano), f.Until.UTC().Format(time.RFC3339Nano), strings.Join(f.StatusList(), ","))
		}
		fmt.Fprintf(g.stdout, "to replay exactly these: %s --expect %d\n", cmd, total)
	}
	if total > 0 {
		fmt.Fprintln(g.stderr, replayWarning)
	}
	if total > 0 {
		w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tSTATUS\tEFFECT\tROUTE\tCREATED\tKEY\tNEW KEY")
		for _, r := range rows {
			base, _ := store.BaseKey(r.Key)
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Status, r.Effect, routeOf(r),
				r.CreatedAt.UTC().Format(time.DateTime), r.Key, base+"#r<N>")
		}
		w.Flush()
		if more := total - int64(len(rows)); more > 0 {
			fmt.Fprintf(g.stdout, "… and %d more\n", more)
		}
	}
	fmt.Fprintln(g.stdout, "dry run: nothing changed")
	return nil
}

// printReplayed says what a replay made, and how to cancel it.
func (g *globals) printReplayed(f store.ReplayFilter, done []store.Replayed) error {
	if len(done) == 0 {
		fmt.Fprintf(g.stdout, "replayed 0 rows: the filter selects no %s row of route %s in that window\n", strings.Join(f.StatusList(), " or "), f.Route)
		return nil
	}
	n := int64(len(done))
	fmt.Fprintf(g.stdout, "replayed %d %s (new pending %s, due now):\n", n, plural(n, "row", "rows"), plural(n, "row", "rows"))
	ids := make([]string, 0, len(done))
	for i, d := range done {
		if i < 50 {
			fmt.Fprintf(g.stdout, "row %d → row %d key %s\n", d.From, d.ID, d.Key)
		}
		ids = append(ids, strconv.FormatInt(d.ID, 10))
	}
	if len(done) > 50 {
		fmt.Fprintf(g.stdout, "… and %d more\n", len(done)-50)
	}
	if len(ids) <= 50 {
		fmt.Fprintf(g.stdout, "to cancel what no sweep has performed yet: ackd outbox discard %s\n", strings.Join(ids, " "))
	}
	who, _ := operator("", false)
	g.logger().Info("outbox rows replayed", "rows", n, "first_key", done[0].Key, "by", who)
	return nil
}
