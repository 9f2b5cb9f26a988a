package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
	"github.com/spf13/cobra"
)

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
			return g.withStore(ctx, false, func(st store.Store, cfg config.Config) error {
				sec, err := secrets(false)
				if err != nil {
					return err
				}
				log := g.logger()
				ec := cfg.EffectConfig(sec, log, nil)
				ec.Steps = st
				svc, err := daemon.OAuthService(cfg, sec, st, log, nil, nil, nil)
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
				sc := daemon.SweepConfig(cfg)
				sc.Skip = ec.Unavailable()
				sc.Mask = sweep.SecretMask(ec, sec.SigningSecret, sec.AppToken, sec.ClientSecret)
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
