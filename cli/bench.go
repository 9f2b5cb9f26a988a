package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/slacksim"
	"github.com/ackd/ackd/store"
)

func benchCmd(g *globals) *cobra.Command {
	var (
		o       slacksim.BenchOptions
		url     string
		asJSON  bool
		noCheck bool
		page    string
		every   time.Duration
	)
	c := &cobra.Command{
		Use:   "bench",
		Short: "Load a running ackd with signed events and report ack latency percentiles",
		Long: "Sends signed Events API event_callbacks to a running ackd (open loop at --rate, or\n" +
			"closed loop with --concurrency), then checks in the database (--db) that every acked\n" +
			"event has its receipt and outbox row. Needs SLACK_SIGNING_SECRET.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sec, err := config.Secret("SLACK_SIGNING_SECRET", os.Getenv)
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
			var load *pageLoad
			stopLoad := func() {}
			if page != "" {
				pw, err := config.Secret("ACKD_CONSOLE_PASSWORD", os.Getenv)
				if err != nil {
					return err
				}
				load = &pageLoad{URL: page, Every: every.String()}
				ctx, cancel := context.WithCancel(cmd.Context())
				done := make(chan struct{})
				go func() { defer close(done); load.run(ctx, pw, every) }()
				stopLoad = func() { cancel(); <-done }
			}
			res, err := slacksim.Bench(cmd.Context(), o)
			stopLoad()
			if err != nil {
				return err
			}
			report := struct {
				slacksim.BenchResult
				Check *store.EventCheck `json:"db_check,omitempty"`
				Page  *pageLoad         `json:"console_page,omitempty"`
			}{BenchResult: res, Page: load}
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
				if load != nil {
					fmt.Fprintf(g.stdout, "console page %s every %s: %d fetched (%d failed%s), p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
						load.URL, load.Every, load.Fetched, load.Failed, load.firstError(), load.P50, load.P99, load.Max)
				}
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
	f.StringVar(&page, "console-page", "", "while sending, also GET this console page (e.g. http://127.0.0.1:3002/search?q=bench) every --console-every, as user ackd with ACKD_CONSOLE_PASSWORD: does reading the console slow the acks?")
	f.DurationVar(&every, "console-every", 100*time.Millisecond, "interval of the --console-page fetches")
	c.AddCommand(benchCompareCmd(g))
	return c
}

// pageLoad is a console page fetched on a fixed interval during a bench
// (--console-page), and how long each fetch took.
type pageLoad struct {
	URL        string  `json:"url"`
	Every      string  `json:"every"`
	Fetched    int     `json:"fetched"`
	Failed     int     `json:"failed"`
	FirstError string  `json:"first_error,omitempty"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
}

// run fetches the page every interval until ctx ends (a fetch still
// running when the next is due delays it: one page at a time, as one
// operator's browser reads).
func (l *pageLoad) run(ctx context.Context, password string, every time.Duration) {
	client := &http.Client{Timeout: 30 * time.Second}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var took []time.Duration
	for {
		select {
		case <-ctx.Done():
			slices.Sort(took)
			at := func(q float64) float64 {
				if len(took) == 0 {
					return 0
				}
				return float64(took[min(len(took)-1, int(q*float64(len(took))))]) / float64(time.Millisecond)
			}
			l.P50, l.P99, l.Max = at(0.50), at(0.99), at(1)
			return
		case <-tick.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, l.URL, nil)
		if err != nil {
			l.fail(err)
			continue
		}
		req.SetBasicAuth("ackd", password)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				l.fail(err)
			}
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			l.fail(fmt.Errorf("%s: %s", l.URL, resp.Status))
			continue
		}
		took = append(took, time.Since(start))
		l.Fetched++
	}
}

func (l *pageLoad) fail(err error) {
	l.Failed++
	if l.FirstError == "" {
		l.FirstError = err.Error()
	}
}

func (l *pageLoad) firstError() string {
	if l.FirstError == "" {
		return ""
	}
	return ": " + l.FirstError
}

func (g *globals) checkBench(cmd *cobra.Command, ids []string) (store.EventCheck, error) {
	st, _, err := g.openStore(cmd.Context())
	if err != nil {
		return store.EventCheck{}, err
	}
	defer st.Close()
	return st.CheckEvents(cmd.Context(), ids)
}
