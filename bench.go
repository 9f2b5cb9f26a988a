package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/slacksim"
	"github.com/ackd/ackd/store"
)

func benchCmd(g *globals) *cobra.Command {
	var (
		o       slacksim.BenchOptions
		url     string
		asJSON  bool
		noCheck bool
	)
	c := &cobra.Command{
		Use:   "bench",
		Short: "Load a running ackd with signed events and report ack latency percentiles",
		Long: "Sends signed Events API event_callbacks to a running ackd (open loop at --rate, or\n" +
			"closed loop with --concurrency), then checks in the database (--db) that every acked\n" +
			"event has its receipt and outbox row. Needs SLACK_SIGNING_SECRET.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sec, err := daemon.Secret("SLACK_SIGNING_SECRET", os.Getenv)
			if err != nil {
				return err
			}
			if sec == "" {
				return errors.New("set SLACK_SIGNING_SECRET (the same secret the daemon uses)")
			}
			o.Secret = sec
			o.URL = url
			if o.URL == "" {
				o.URL = g.baseURL() + "/slack/events"
			}
			if !asJSON {
				o.Progress = g.stderr
			}
			res, err := slacksim.Bench(cmd.Context(), o)
			if err != nil {
				return err
			}
			report := struct {
				slacksim.BenchResult
				Check *store.EventCheck `json:"db_check,omitempty"`
			}{BenchResult: res}
			var checkErr error
			if !noCheck {
				check, err := g.checkBench(cmd, res.EventIDs)
				if err != nil {
					checkErr = fmt.Errorf("database check: %w", err)
				} else {
					report.Check = &check
					if check.Receipts != len(res.EventIDs) || check.WithRows != len(res.EventIDs) {
						checkErr = fmt.Errorf("database check: %d acked events, %d receipts, %d with outbox rows; missing e.g. %v",
							len(res.EventIDs), check.Receipts, check.WithRows, check.Missing)
					}
				}
			}
			if asJSON {
				if err := json.NewEncoder(g.stdout).Encode(report); err != nil {
					return err
				}
			} else {
				res.WriteTable(g.stdout)
				if report.Check != nil {
					fmt.Fprintf(g.stdout, "db check: %d acked events, %d receipts, %d with outbox rows\n",
						len(res.EventIDs), report.Check.Receipts, report.Check.WithRows)
				}
			}
			return checkErr
		},
	}
	f := c.Flags()
	f.StringVar(&url, "url", "", "events URL (default http://{listen}/slack/events)")
	f.Float64Var(&o.Rate, "rate", 0, "events per second, open loop (0: closed loop with --concurrency)")
	f.IntVar(&o.Concurrency, "concurrency", 32, "closed-loop workers")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to send")
	f.Float64Var(&o.DupFraction, "dup-fraction", 0, "fraction of events also delivered as an immediate concurrent duplicate")
	f.IntVar(&o.PayloadBytes, "payload", 0, "pad each body to about this many bytes")
	f.StringVar(&o.Kind, "kind", slacksim.KindMessage, "inner event: message, or function_executed (a workflow step, callback_id bench_step; its execution id is the event id)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.BoolVar(&noCheck, "no-check", false, "skip the database check (for a remote or database-less target)")
	c.AddCommand(benchCompareCmd(g))
	return c
}

func (g *globals) checkBench(cmd *cobra.Command, ids []string) (store.EventCheck, error) {
	st, _, err := g.openStore(cmd.Context())
	if err != nil {
		return store.EventCheck{}, err
	}
	defer st.Close()
	return st.CheckEvents(cmd.Context(), ids)
}
