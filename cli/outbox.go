package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/redact"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// previewRows is how many rows `--dry-run` shows of a filtered set.
const previewRows = 10

// rowsVerb is `outbox retry` or `outbox discard`: one verb over rows given
// by id or selected by a filter.
type rowsVerb struct {
	name, past string // "retry", "requeued"
	short      string
	long       string
	one        func(store.Store, context.Context, int64) error
	many       func(store.Store, context.Context, store.ParkedFilter) (int64, error)
	undo       bool // retry: --all-discarded puts discarded rows back
}

var filterHelp = fmt.Sprintf("\n\nA filter that could select the wrong rows is refused, and nothing changes: an empty\n"+
	"--route or --effect (an unset shell variable would otherwise mean \"every row\"), and a\n"+
	"name nothing knows. --route must name a route of the config (given with --config or\n"+
	"ACKD_CONFIG) or the route of one of the rows it selects among; --effect an effect ackd\n"+
	"performs or one of those rows'. The refusal lists the known names. --dry-run shows how\n"+
	"many rows would change and the first %d, and changes nothing.", previewRows)

func retryCmd(g *globals) *cobra.Command {
	return g.rowsCmd(rowsVerb{name: "retry", past: "requeued",
		short: "Put parked or discarded rows back to pending with a fresh attempt budget",
		long: "A discarded row is put back the same way, until it is pruned ([retention] done): a\n" +
			"discard is undone by retrying the row (--all-discarded takes the filters, like\n" +
			"--all-parked).\n\n" +
			"A redeliver row parked on 404 may already have run its listener (Bolt answers 404 when\n" +
			"nobody acked in time): retrying it may run the listener twice; discard it instead.",
		one: store.Store.Requeue, many: store.Store.RequeueParked, undo: true})
}

func discardCmd(g *globals) *cobra.Command {
	return g.rowsCmd(rowsVerb{name: "discard", past: "discarded",
		short: "Give up on rows: never performed, kept as discarded (pruned like done rows)",
		long: "A parked row, or by id a pending one that no sweep is performing (one waiting for a\n" +
			"credential, or for its next attempt; `ackd outbox show ID` says which). A discarded row\n" +
			"stays for the audit trail (status discarded, completed = when it was discarded, its\n" +
			"last error kept) and is pruned after [retention] done, like a done row; until then\n" +
			"`ackd outbox retry ID` puts it back. A row a sweep holds under a live lease is refused\n" +
			"(its effect is under way); a sweep whose lease ran out before the discard can no\n" +
			"longer record its outcome.",
		one: store.Store.Discard, many: store.Store.DiscardParked})
}

func (g *globals) rowsCmd(v rowsVerb) *cobra.Command {
	var allParked, allDiscarded, dryRun bool
	var f store.ParkedFilter
	var discardedSince string
	use := v.name + " ID... | --all-parked [--route R] [--effect E] [--older-than D] [--dry-run]"
	if v.undo {
		use = v.name + " ID... | --all-parked|--all-discarded [--discarded-since T] [--route R] [--effect E] [--older-than D] [--dry-run]"
	}
	c := &cobra.Command{
		Use:   use,
		Short: v.short,
		Long:  v.short + ".\n\n" + v.long + filterHelp,
		RunE: func(cmd *cobra.Command, args []string) error {
			bulk := allParked || allDiscarded
			f.Route = config.RouteName(f.Route) // NFC, as the config's names
			filtered := cmd.Flags().Changed("route") || cmd.Flags().Changed("effect") || f.OlderThan != 0
			switch {
			case allParked && allDiscarded:
				return fmt.Errorf("outbox %s: --all-parked and --all-discarded select different rows; give one", v.name)
			case bulk == (len(args) > 0):
				if v.undo {
					return fmt.Errorf("outbox %s: give row IDs, --all-parked or --all-discarded", v.name)
				}
				return fmt.Errorf("outbox %s: give row IDs or --all-parked", v.name)
			case filtered && !bulk:
				return fmt.Errorf("outbox %s: --route, --effect and --older-than select among parked rows; use them with --all-parked", v.name)
			case f.Expect < 0:
				return fmt.Errorf("outbox %s: --expect must not be negative", v.name)
			case cmd.Flags().Changed("expect") && !bulk:
				return fmt.Errorf("outbox %s: --expect is the count of a bulk selection; use it with --all-parked or --all-discarded", v.name)
			case f.OlderThan < 0:
				return fmt.Errorf("outbox %s: --older-than must not be negative", v.name)
			case cmd.Flags().Changed("discarded-since") && !allDiscarded:
				return fmt.Errorf("outbox %s: --discarded-since selects among discarded rows; use it with --all-discarded", v.name)
			}
			if cmd.Flags().Changed("discarded-since") {
				t, err := time.Parse(time.RFC3339Nano, discardedSince)
				if err != nil {
					return fmt.Errorf("outbox %s: --discarded-since %q is not an RFC 3339 time (as a bulk discard prints it, e.g. 2026-12-02T10:15:04.123Z)", v.name, discardedSince)
				}
				f.DiscardedSince = t
			}
			f.Discarded = allDiscarded
			ids := make([]int64, len(args))
			for i, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil {
					return fmt.Errorf("outbox %s: %q is not a row id", v.name, a)
				}
				ids[i] = id
			}
			return g.withStore(cmd.Context(), false, func(st store.Store, cfg config.Config) error {
				ctx := cmd.Context()
				if bulk {
					if err := checkFilter(ctx, cmd, st, cfg, v.name, f); err != nil {
						return err
					}
					if dryRun {
						return g.previewFilter(ctx, st, v, f)
					}
					// Taken before the discard, on the clock that stamps
					// it: the undo puts back exactly this discard's rows,
					// not those an operator discarded before.
					since, err := storeClock(ctx, st)
					if err != nil {
						return err
					}
					n, err := v.many(st, ctx, f)
					if changed := (*store.SelectionChanged)(nil); errors.As(err, &changed) {
						return fmt.Errorf("outbox %s: %w", v.name, changed)
					}
					if err != nil {
						return err
					}
					fmt.Fprintf(g.stdout, "%s %d %s rows\n", v.past, n, f.Status())
					if n > 0 && v.name == "discard" {
						undo := f
						undo.Discarded, undo.DiscardedSince = true, since
						fmt.Fprintf(g.stdout, "undo while they exist: ackd outbox retry --all-discarded%s\n", filterArgs(undo))
					}
					return nil
				}
				var errs []error
				for _, id := range ids {
					if err := g.rowByID(ctx, st, v, id, dryRun); err != nil {
						if r := (refusal{}); errors.As(err, &r) {
							errs = append(errs, r.error)
							continue
						}
						return errors.Join(append(errs, err)...)
					}
				}
				return errors.Join(errs...)
			})
		},
	}
	c.Flags().BoolVar(&allParked, "all-parked", false, "every parked row (narrowed by --route, --effect, --older-than)")
	if v.undo {
		c.Flags().BoolVar(&allDiscarded, "all-discarded", false, "every discarded row still kept (narrowed likewise): undoes discards")
		c.Flags().StringVar(&discardedSince, "discarded-since", "", "with --all-discarded: only rows discarded at or after this RFC 3339 time (a bulk discard prints its undo with it)")
	}
	c.Flags().StringVar(&f.Route, "route", "", "with --all-…: only rows made by this route (refused when empty or unknown)")
	c.Flags().StringVar(&f.Effect, "effect", "", "with --all-…: only rows of this effect (refused when empty or unknown)")
	c.Flags().DurationVar(&f.OlderThan, "older-than", 0, "with --all-…: only rows created longer ago than this (e.g. 24h)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, fmt.Sprintf("show what would change (how many rows, the first %d), change nothing", previewRows))
	c.Flags().Int64Var(&f.Expect, "expect", 0, "with --all-…: act only if the filter selects exactly this many rows (the count --dry-run printed); otherwise change nothing")
	return c
}

// refusal is a row an id named that the verb does not apply to, saying
// why: the other ids are still done, and the command exits non-zero.
type refusal struct{ error }

// checkFilter refuses a filter value that is empty or names nothing known
// (see filterHelp), listing the known names.
func checkFilter(ctx context.Context, cmd *cobra.Command, st store.Store, cfg config.Config, verb string, f store.ParkedFilter) error {
	rowRoutes, rowEffects, err := st.FilterNames(ctx, f.Status())
	if err != nil {
		return err
	}
	configGiven := cfg.Source != config.Default().Source
	routes := slices.Clone(rowRoutes)
	if configGiven {
		for _, r := range cfg.Routes {
			routes = append(routes, r.Name)
		}
	}
	slices.Sort(routes)
	routes = slices.Compact(routes)
	effects := append(sweep.EffectNames(), rowEffects...)
	slices.Sort(effects)
	effects = slices.Compact(effects)

	where := fmt.Sprintf("the %s rows", f.Status())
	if configGiven {
		where = fmt.Sprintf("the config (%s) or of %s", cfg.Source, where)
	} else {
		where += " (give --config to name the config's routes too)"
	}
	known := func(names []string) string {
		if len(names) == 0 {
			return "none"
		}
		return strings.Join(names, ", ")
	}
	check := func(flag, value string, names []string, of string) error {
		if !cmd.Flags().Changed(flag) {
			return nil
		}
		if value == "" {
			return fmt.Errorf("outbox %s: --%s is empty (an unset shell variable?) and would select every %s row: name one (known %ss: %s), or leave --%s out to mean every %s",
				verb, flag, f.Status(), flag, known(names), flag, flag)
		}
		if slices.Contains(names, value) {
			return nil
		}
		msg := fmt.Sprintf("outbox %s: --%s %q is not %s", verb, flag, value, of)
		if s := config.Nearest(value, names); s != "" {
			msg += fmt.Sprintf(": did you mean %q?", s)
		} else {
			msg += "."
		}
		return fmt.Errorf("%s Known %ss: %s", msg, flag, known(names))
	}
	if err := check("route", f.Route, routes, "a route of "+where); err != nil {
		return err
	}
	return check("effect", f.Effect, effects, fmt.Sprintf("an effect ackd performs, nor one of the %s rows", f.Status()))
}

// filterArgs is f as command-line flags, for a hint to run.
func filterArgs(f store.ParkedFilter) string {
	var b strings.Builder
	if f.Route != "" {
		fmt.Fprintf(&b, " --route %s", shellQuote(f.Route))
	}
	if f.Effect != "" {
		fmt.Fprintf(&b, " --effect %s", shellQuote(f.Effect))
	}
	if f.OlderThan > 0 {
		fmt.Fprintf(&b, " --older-than %s", f.OlderThan)
	}
	if f.Discarded && !f.DiscardedSince.IsZero() {
		fmt.Fprintf(&b, " --discarded-since %s", f.DiscardedSince.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z07:00"))
	}
	return b.String()
}

// storeClock is the time on the clock that stamps st's rows: PostgreSQL's
// own (every replica stamps with it), else the store's.
func storeClock(ctx context.Context, st store.Store) (time.Time, error) {
	if db, ok := st.(interface {
		DBNow(context.Context) (time.Time, error)
	}); ok {
		return db.DBNow(ctx)
	}
	return st.Now(), nil
}

// shellQuote quotes s for a shell unless it is plain.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// previewFilter is --dry-run of a filtered verb: how many rows it would
// change and the first previewRows of them.
func (g *globals) previewFilter(ctx context.Context, st store.Store, v rowsVerb, f store.ParkedFilter) error {
	rows, total, err := st.Matching(ctx, f, previewRows)
	if err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "would %s %d %s rows\n", v.name, total, f.Status())
	if total > 0 {
		// What was previewed, as a command that acts only while the
		// filter still selects that many rows.
		all := " --all-parked"
		if f.Discarded {
			all = " --all-discarded"
		}
		fmt.Fprintf(g.stdout, "to %s exactly these: ackd outbox %s%s%s --expect %d\n", v.name, v.name, all, filterArgs(f), total)
	}
	if total > 0 {
		w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tEFFECT\tROUTE\tATTEMPTS\tCREATED\tKEY\tLAST ERROR")
		for _, r := range rows {
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.Effect, routeOf(r), r.Attempts,
				r.CreatedAt.UTC().Format(time.DateTime), r.Key, oneLine(lastError(r), 60))
		}
		w.Flush()
		if more := total - int64(len(rows)); more > 0 {
			fmt.Fprintf(g.stdout, "… and %d more\n", more)
		}
	}
	fmt.Fprintln(g.stdout, "dry run: nothing changed")
	return nil
}

// routeOf is the route that made r (its payload's "route"), or "-".
func routeOf(r store.Row) string {
	var p struct {
		Route string `json:"route"`
	}
	if json.Unmarshal([]byte(r.Payload), &p) != nil || p.Route == "" {
		return "-"
	}
	return p.Route
}

// rowByID applies the verb to one row (or, with dryRun, says what it would
// do). A row the verb does not apply to is a refusal saying why.
func (g *globals) rowByID(ctx context.Context, st store.Store, v rowsVerb, id int64, dryRun bool) error {
	before, err := st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return refused("outbox %s: there is no row %d", v.name, id)
	}
	if err != nil {
		return err
	}
	now := st.Now()
	if why := notApplicable(v.name, before, now); why != "" {
		return refused("outbox %s: %s", v.name, why)
	}
	if dryRun {
		fmt.Fprintf(g.stdout, "would %s row %d (%s, effect %s, route %s, attempts %d)\n", v.name, id, before.Status, before.Effect, routeOf(before), before.Attempts)
		return nil
	}
	err = v.one(st, ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		// It changed meanwhile (a sweep claimed it, the pruner took it).
		after, gerr := st.Get(ctx, id)
		switch {
		case errors.Is(gerr, store.ErrNotFound):
			return refused("outbox %s: there is no row %d", v.name, id)
		case gerr != nil:
			return gerr
		}
		return refused("outbox %s: %s", v.name, notApplicable(v.name, after, st.Now()))
	}
	if err != nil {
		return err
	}
	line := fmt.Sprintf("%s row %d", v.past, id)
	switch {
	case v.name == "retry" && before.Status == store.StatusDiscarded:
		line += " (its discard undone)"
	case v.name == "discard" && before.Status == store.StatusPending:
		line += fmt.Sprintf(" (it was pending: no sweep will perform it; `ackd outbox retry %d` puts it back)", id)
		if before.ClaimToken != "" {
			line += fmt.Sprintf("; an attempt whose lease ran out at %s never reported: if it is still running, its effect may still happen, and it can no longer be recorded",
				before.ClaimExpiresAt.UTC().Format(time.DateTime))
		}
	}
	fmt.Fprintln(g.stdout, line)
	return nil
}

func refused(format string, a ...any) error {
	return refusal{fmt.Errorf(format, a...)}
}

// notApplicable says why verb does not apply to row r now, or "".
func notApplicable(verb string, r store.Row, now time.Time) string {
	leased := r.Status == store.StatusPending && r.ClaimToken != "" && r.ClaimExpiresAt.After(now)
	switch {
	case r.Status == store.StatusParked:
		return ""
	case r.Status == store.StatusDone:
		return fmt.Sprintf("row %d is done (completed %s); there is nothing to %s", r.ID, r.CompletedAt.UTC().Format(time.DateTime), verb)
	case r.Status == store.StatusDiscarded && verb == "retry":
		return ""
	case r.Status == store.StatusDiscarded:
		return fmt.Sprintf("row %d was discarded (%s) already; `ackd outbox retry %d` puts it back", r.ID, r.CompletedAt.UTC().Format(time.DateTime), r.ID)
	case leased:
		return fmt.Sprintf("row %d is being performed by a sweep (attempt %d, lease until %s); wait for its outcome", r.ID, r.Attempts+1, r.ClaimExpiresAt.UTC().Format(time.DateTime))
	case verb == "discard":
		return "" // pending, and no live lease
	default:
		return fmt.Sprintf("row %d is pending, not parked: it is already waiting for a sweep (attempts %d, next attempt %s)",
			r.ID, r.Attempts, r.NextAttemptAt.UTC().Format(time.DateTime))
	}
}

// waitsFor says what a pending row is waiting for, given the daemons
// running on the database now: a sweep under way, its next attempt, or a
// process that can perform it. Each daemon records at its heartbeat what
// it can perform (ackd_instances.effects); a row whose need no running
// daemon has waits for one that has the credential. "" for a row that is
// not pending.
func waitsFor(r store.Row, daemons []store.Instance, now time.Time) string {
	if r.Status != store.StatusPending {
		return ""
	}
	if r.ClaimToken != "" && r.ClaimExpiresAt.After(now) {
		return fmt.Sprintf("a sweep performing it now (lease until %s)", r.ClaimExpiresAt.UTC().Format(time.RFC3339))
	}
	if r.NextAttemptAt.After(now) {
		return fmt.Sprintf("its next attempt, at %s", r.NextAttemptAt.UTC().Format(time.RFC3339))
	}
	need, cred := sweep.Needs(r)
	if len(daemons) == 0 {
		s := "a sweep: no ackd serve is running on this database; `ackd sweep --once` performs due rows by hand"
		if cred != "" {
			s += " (with " + cred + ")"
		}
		return s
	}
	var pids []string
	for _, in := range daemons {
		if in.CanPerform(need) {
			return fmt.Sprintf("the next sweep of the running daemon (pid %d on %s): it is due", in.PID, in.Host)
		}
		pids = append(pids, fmt.Sprintf("pid %d on %s", in.PID, in.Host))
	}
	if cred == "" {
		return fmt.Sprintf("an ackd that performs %q: the running daemons (%s) do not (a newer ackd recorded the row?)", r.Effect, strings.Join(pids, ", "))
	}
	return fmt.Sprintf("a process with %s: the running daemons (%s) lack it, so none performs %s rows (start one with it, or run `ackd sweep --once` with it; or discard the row)",
		cred, strings.Join(pids, ", "), need)
}

// runningDaemons are the ackd serve processes running on the database now.
func runningDaemons(ctx context.Context, st store.Store) ([]store.Instance, error) {
	running, _, _, err := instancesOn(ctx, st)
	return running, err
}

// instancesOn sorts the fresh heartbeats on st: the daemons running on it
// (their process may be alive), and the heartbeats copied with the file
// (status of a backup: however fresh, and alive its pid, no daemon serving
// this file), each with why.
func instancesOn(ctx context.Context, st store.Store) (running, copied []store.Instance, why []string, err error) {
	fresh, err := st.Instances(ctx, daemon.InstanceStale)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, in := range fresh {
		if !daemon.Alive(in) {
			continue
		}
		if w := daemon.Elsewhere(in, st); w != "" {
			copied, why = append(copied, in), append(why, w)
			continue
		}
		running = append(running, in)
	}
	return running, copied, why, nil
}

// waitingEffect is one effect's due rows that no running daemon takes, for
// `ackd status`.
type waitingEffect struct {
	Effect string `json:"effect"`
	Rows   int64  `json:"rows"`
	For    string `json:"for"` // what they wait for
}

// waitingRows lists the effects whose due rows (Stats.Due) no running
// daemon performs: every effect when none runs, else those whose
// capability no running daemon records. A forward row that needs the
// forward secret is handed back with its last error saying so (`outbox
// show`); here it counts as performable.
func waitingRows(due map[string]int64, daemons []store.Instance) []waitingEffect {
	out := []waitingEffect{}
	for _, effect := range slices.Sorted(maps.Keys(due)) {
		_, cred := sweep.Needs(store.Row{Effect: effect})
		switch {
		case len(daemons) == 0:
			out = append(out, waitingEffect{effect, due[effect], "a sweep: no ackd serve is running (`ackd sweep --once` performs due rows by hand)"})
		case !slices.ContainsFunc(daemons, func(in store.Instance) bool { return in.CanPerform(effect) }):
			what := "an ackd that performs " + effect + " (the running daemons do not)"
			if cred != "" {
				what = cred + ": no running daemon has it (`ackd outbox show ID` says more)"
			}
			out = append(out, waitingEffect{effect, due[effect], what})
		}
	}
	return out
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
			return g.readStore(cmd.Context(), func(st store.Store, _ config.Config) error {
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
			return g.readStore(cmd.Context(), func(st store.Store, _ config.Config) error {
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
				maskShown(&r, attempts)
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
		return "(before it succeeded) " + redact.Text(r.LastError)
	}
	return redact.Text(r.LastError)
}

// maskShown masks what looks like a Slack token in the texts of a row and
// its attempts, as an ackd before 0.x may have stored them (the sweep now
// masks them before they are written).
func maskShown(r *store.Row, attempts []store.Attempt) {
	redact.Texts(&r.LastError, &r.Result, &r.Note)
	for i := range attempts {
		redact.Texts(&attempts[i].Error, &attempts[i].Status, &attempts[i].Result)
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}
