package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/store"
)

// routeCmd is `ackd route list|pause|resume` (issue 31.2): the pause state
// lives in the database, so every daemon, replica and hand-run sweep on it
// honours it.
func routeCmd(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "route", Short: "List routes, pause and resume them (their rows wait, their requests are still acked)"}
	var listJSON, pauseJSON, resumeJSON bool
	var by string
	list := &cobra.Command{
		Use:   "list",
		Short: "Each route with its effect, whether it is paused (since when, by whom) and its pending rows",
		Long: "Each route of the config (--config or ACKD_CONFIG) with its effect, whether it is paused\n" +
			"(since when, by whom) and its pending rows; then any paused route the config does not\n" +
			"name (paused by another config, or since renamed).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.readStore(cmd.Context(), func(st store.Store, cfg config.Config) error {
				routes, err := routeList(cmd.Context(), st, cfg)
				if err != nil {
					return err
				}
				if listJSON {
					enc := json.NewEncoder(g.stdout)
					enc.SetEscapeHTML(false)
					return enc.Encode(routes)
				}
				w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(w, "ROUTE\tEFFECT\tPAUSED\tPENDING")
				for _, r := range routes {
					effect, paused := r.Effect, "no"
					if !r.Configured {
						effect = "(not in the config)"
					}
					if r.Paused {
						paused = fmt.Sprintf("since %s by %s (%s)", r.PausedAt, r.PausedBy, time.Duration(r.PausedSeconds)*time.Second)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", r.Route, effect, paused, r.Pending)
				}
				return w.Flush()
			})
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print a JSON array of routes")

	pause := &cobra.Command{
		Use:   "pause NAME",
		Short: "Pause a route: its requests are still recorded and acked, its rows wait unclaimed until resumed",
		Long: "Pause a route: its requests are still recorded and acked as usual, and its rows stay\n" +
			"pending, claimed by no sweeper (every daemon and replica on the database, and a hand-run\n" +
			"`ackd sweep --once`) until `ackd route resume NAME`. A row a sweep holds when the pause\n" +
			"lands finishes its attempt. NAME must be a route of the config (--config or ACKD_CONFIG)\n" +
			"or of a pending row; an empty or unknown name is refused and nothing changes.",
		Args: exactlyOneName("pause"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := config.RouteName(args[0]) // NFC, as the config's names
			who, err := operator(by, cmd.Flags().Changed("by"))
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), false, func(st store.Store, cfg config.Config) error {
				ctx := cmd.Context()
				if err := checkRouteName(ctx, st, cfg, "pause", name); err != nil {
					return err
				}
				changed, err := st.PauseRoute(ctx, name, who)
				if err != nil {
					return err
				}
				p, err := pauseOf(ctx, st, name)
				if err != nil {
					return err
				}
				if changed {
					g.logger().Info("route paused", "route", name, "by", who)
				}
				if pauseJSON {
					return json.NewEncoder(g.stdout).Encode(map[string]any{"route": name, "paused": true, "changed": changed,
						"paused_at": p.PausedAt.UTC().Format(time.RFC3339), "paused_by": p.By, "pending": p.Pending})
				}
				if !changed {
					fmt.Fprintf(g.stdout, "route %s is already paused (since %s, by %s); nothing changed\n", name, p.PausedAt.UTC().Format(time.RFC3339), p.By)
					return nil
				}
				fmt.Fprintf(g.stdout, "paused route %s (by %s at %s): its requests are still recorded and acked; its %d pending %s and new ones wait, claimed by no sweeper, until `ackd route resume %s`\n",
					name, p.By, p.PausedAt.UTC().Format(time.RFC3339), p.Pending, plural(p.Pending, "row", "rows"), shellQuote(name))
				return nil
			})
		},
	}
	pause.Flags().BoolVar(&pauseJSON, "json", false, "print JSON")
	pause.Flags().StringVar(&by, "by", "", "who pauses (default: user@host of this shell)")

	resume := &cobra.Command{
		Use:   "resume NAME",
		Short: "Resume a paused route: its rows are due as they were",
		Args:  exactlyOneName("resume"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := config.RouteName(args[0]) // NFC, as the config's names
			who, err := operator(by, cmd.Flags().Changed("by"))
			if err != nil {
				return err
			}
			return g.withStore(cmd.Context(), false, func(st store.Store, cfg config.Config) error {
				ctx := cmd.Context()
				p, err := pauseOf(ctx, st, name)
				if err != nil {
					return err
				}
				if p.Route == "" {
					// Not paused: a known route says so (exit 0), a
					// mistyped one is refused.
					if err := checkRouteName(ctx, st, cfg, "resume", name); err != nil {
						return err
					}
					if resumeJSON {
						return json.NewEncoder(g.stdout).Encode(map[string]any{"route": name, "paused": false, "changed": false})
					}
					fmt.Fprintf(g.stdout, "route %s is not paused; nothing changed\n", name)
					return nil
				}
				changed, err := st.ResumeRoute(ctx, name)
				if err != nil {
					return err
				}
				if changed {
					g.logger().Info("route resumed", "route", name, "by", who, "paused_by", p.By,
						"paused_for", st.Now().Sub(p.PausedAt).Round(time.Second).String())
				}
				if resumeJSON {
					return json.NewEncoder(g.stdout).Encode(map[string]any{"route": name, "paused": false, "changed": changed, "pending": p.Pending})
				}
				if !changed {
					fmt.Fprintf(g.stdout, "route %s is not paused (resumed meanwhile); nothing changed\n", name)
					return nil
				}
				fmt.Fprintf(g.stdout, "resumed route %s (paused by %s since %s; resumed by %s): its %d pending %s are due as they were\n",
					name, p.By, p.PausedAt.UTC().Format(time.RFC3339), who, p.Pending, plural(p.Pending, "row", "rows"))
				return nil
			})
		},
	}
	resume.Flags().BoolVar(&resumeJSON, "json", false, "print JSON")
	resume.Flags().StringVar(&by, "by", "", "who resumes, for the log (default: user@host of this shell)")
	c.AddCommand(list, pause, resume)
	return c
}

// exactlyOneName refuses anything but one non-empty route name.
func exactlyOneName(verb string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) != 1:
			return fmt.Errorf("route %s: give one route name (`ackd route list` lists them)", verb)
		case strings.TrimSpace(args[0]) == "":
			return fmt.Errorf("route %s: the route name is empty (an unset shell variable?); name one (`ackd route list` lists them)", verb)
		}
		return nil
	}
}

// operator is who acts: --by, or user@host of this process.
func operator(by string, given bool) (string, error) {
	if given {
		if strings.TrimSpace(by) == "" {
			return "", fmt.Errorf("route: --by is empty; leave it out to record user@host")
		}
		return by, nil
	}
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return name + "@" + host, nil
}

// pauseOf is route's pause, or a zero RoutePause when it is not paused.
func pauseOf(ctx context.Context, st store.Store, route string) (store.RoutePause, error) {
	paused, err := st.PausedRoutes(ctx)
	if err != nil {
		return store.RoutePause{}, err
	}
	for _, p := range paused {
		if p.Route == route {
			return p, nil
		}
	}
	return store.RoutePause{}, nil
}

// checkRouteName refuses a route name that neither the config, the pending
// rows nor the pauses know, suggesting the nearest known one.
func checkRouteName(ctx context.Context, st store.Store, cfg config.Config, verb, name string) error {
	known, configGiven, err := knownRoutes(ctx, st, cfg)
	if err != nil {
		return err
	}
	if slices.Contains(known, name) {
		return nil
	}
	msg := fmt.Sprintf("route %s: %q is not a route of ", verb, name)
	if configGiven {
		msg += fmt.Sprintf("the config (%s), of a pending row, nor a paused one", cfg.Source)
	} else {
		msg += "a pending row, nor a paused one (give --config to name the config's routes too)"
	}
	return unknownRoute(msg, name, known)
}

// unknownRoute is the refusal of a route name no one knows: msg, the
// nearest known name when there is one, and every known name.
func unknownRoute(msg, name string, known []string) error {
	if s := config.Nearest(name, known); s != "" {
		msg += fmt.Sprintf(": did you mean %q?", s)
	} else {
		msg += "."
	}
	list := "none"
	if len(known) > 0 {
		list = strings.Join(known, ", ")
	}
	return fmt.Errorf("%s Known routes: %s. Nothing changed", msg, list)
}

// knownRoutes are the routes an operator may name: the config's (when one
// is given), the pending rows', and the paused ones, sorted.
func knownRoutes(ctx context.Context, st store.Store, cfg config.Config) (names []string, configGiven bool, err error) {
	configGiven = cfg.Source != config.Default().Source
	if configGiven {
		for _, r := range cfg.Routes {
			names = append(names, r.Name)
		}
	}
	rowRoutes, _, err := st.FilterNames(ctx, store.StatusPending)
	if err != nil {
		return nil, false, err
	}
	names = append(names, rowRoutes...)
	paused, err := st.PausedRoutes(ctx)
	if err != nil {
		return nil, false, err
	}
	for _, p := range paused {
		names = append(names, p.Route)
	}
	slices.Sort(names)
	return slices.Compact(names), configGiven, nil
}

// routeRow is one line of `ackd route list` (and its --json element).
type routeRow struct {
	Route                string `json:"route"`
	Effect               string `json:"effect,omitempty"`
	Configured           bool   `json:"configured"`
	Paused               bool   `json:"paused"`
	PausedAt             string `json:"paused_at,omitempty"`
	PausedBy             string `json:"paused_by,omitempty"`
	PausedSeconds        int64  `json:"paused_seconds,omitempty"`
	Pending              int64  `json:"pending"`
	OldestPendingSeconds *int64 `json:"oldest_pending_seconds,omitempty"`
}

// routeList is each configured route, then each paused route the config
// does not name.
func routeList(ctx context.Context, st store.Store, cfg config.Config) ([]routeRow, error) {
	paused, err := st.PausedRoutes(ctx)
	if err != nil {
		return nil, err
	}
	pending, err := st.PendingByRoute(ctx)
	if err != nil {
		return nil, err
	}
	now := st.Now()
	row := func(name string) routeRow {
		r := routeRow{Route: name, Pending: pending[name]}
		for _, p := range paused {
			if p.Route == name {
				r.Paused, r.PausedAt, r.PausedBy = true, p.PausedAt.UTC().Format(time.RFC3339), p.By
				r.PausedSeconds = int64(max(0, now.Sub(p.PausedAt)).Seconds())
				if !p.OldestPending.IsZero() {
					age := int64(max(0, now.Sub(p.OldestPending)).Seconds())
					r.OldestPendingSeconds = &age
				}
			}
		}
		return r
	}
	out := []routeRow{}
	seen := map[string]bool{}
	for _, rt := range cfg.Routes {
		if seen[rt.Name] {
			continue
		}
		seen[rt.Name] = true
		r := row(rt.Name)
		r.Effect, r.Configured = rt.Effect, true
		out = append(out, r)
	}
	for _, p := range paused {
		if !seen[p.Route] {
			out = append(out, row(p.Route))
		}
	}
	return out, nil
}

// pausedJSON is one paused route for `ackd status --json`.
type pausedJSON struct {
	Route                string `json:"route"`
	PausedAt             string `json:"paused_at"`
	PausedBy             string `json:"paused_by"`
	PausedSeconds        int64  `json:"paused_seconds"`
	Pending              int64  `json:"pending"`
	OldestPendingSeconds int64  `json:"oldest_pending_seconds"`
}

// pausedStatus is what `ackd status` says of the paused routes: JSON
// elements and text lines (their rows wait for a resume, not a sweep).
func pausedStatus(ctx context.Context, st store.Store) ([]pausedJSON, []string, error) {
	paused, err := st.PausedRoutes(ctx)
	if err != nil {
		return nil, nil, err
	}
	now := st.Now()
	out, lines := []pausedJSON{}, []string(nil)
	for _, p := range paused {
		j := pausedJSON{Route: p.Route, PausedAt: p.PausedAt.UTC().Format(time.RFC3339), PausedBy: p.By,
			PausedSeconds: int64(max(0, now.Sub(p.PausedAt)).Seconds()), Pending: p.Pending}
		line := fmt.Sprintf("route %s since %s (%s) by %s: ", p.Route, j.PausedAt, (time.Duration(j.PausedSeconds) * time.Second).String(), p.By)
		if p.Pending == 0 {
			line += "no pending row yet"
		} else {
			j.OldestPendingSeconds = int64(max(0, now.Sub(p.OldestPending)).Seconds())
			line += fmt.Sprintf("%d pending %s (oldest %s) wait, claimed by no sweeper", p.Pending, plural(p.Pending, "row", "rows"),
				(time.Duration(j.OldestPendingSeconds) * time.Second).String())
		}
		line += fmt.Sprintf("; `ackd route resume %s` resumes it", shellQuote(p.Route))
		out, lines = append(out, j), append(lines, line)
	}
	return out, lines, nil
}

// pausedWaits is what a pending row of a paused route waits for (`outbox
// show`), or waiting as it was.
func pausedWaits(ctx context.Context, st store.Store, r store.Row, waiting string) (string, error) {
	if r.Status != store.StatusPending || (r.ClaimToken != "" && r.ClaimExpiresAt.After(st.Now())) {
		return waiting, nil // a sweep holds it: its attempt finishes
	}
	route := routeOf(r)
	if route == "-" || r.Effect == store.EffectStepDeadline { // never paused
		return waiting, nil
	}
	p, err := pauseOf(ctx, st, route)
	if err != nil || p.Route == "" {
		return waiting, err
	}
	return fmt.Sprintf("its route %s to be resumed: paused since %s by %s, no sweeper claims its rows (`ackd route resume %s`)",
		route, p.PausedAt.UTC().Format(time.RFC3339), p.By, shellQuote(route)), nil
}

// notePaused tells a hand-run sweep's operator which routes it left alone.
func (g *globals) notePaused(ctx context.Context, st store.Store) {
	paused, err := st.PausedRoutes(ctx)
	if err != nil {
		fmt.Fprintf(g.stderr, "ackd sweep: paused routes unknown: %v\n", err)
		return
	}
	for _, p := range paused {
		fmt.Fprintf(g.stderr, "ackd sweep: route %s is paused (since %s, by %s): its %d pending %s left alone\n",
			p.Route, p.PausedAt.UTC().Format(time.RFC3339), p.By, p.Pending, plural(p.Pending, "row", "rows"))
	}
}
