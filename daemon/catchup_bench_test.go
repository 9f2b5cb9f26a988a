package daemon_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
)

// BenchmarkCatchUp measures what the issue asks to report: how many
// messages catch-up recovers a minute under a rate of 50 calls a minute
// (pages of 200), and what a catch-up recording a backlog of 3,000 messages
// costs live acks, at rate 50 and at 6000 (as fast as the database takes
// them), against a real server and SQLite file with synchronous=FULL.
//
//	go test -run '^$' -bench BenchmarkCatchUp -benchtime 1x ./daemon/     # about a minute
func BenchmarkCatchUp(b *testing.B) {
	quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
	setup := func(b *testing.B, messages int) (*testServer, *fakeslack.Server, config.Config) {
		fs := fakeslack.New(b, backfillToken)
		cfg := configFor(b, `
[sweep]
immediate = false
interval  = "1h"
[backfill]
channels = ["C1", "C2"]
on_start = false
[[route]]
name   = "seen"
event  = "message"
key    = "message"
effect = "log"
`)
		cfg.Slack.APIURL = fs.URL()
		for i := range messages {
			fs.AddMessage("C2", fakeslack.Message{User: "U1", Text: "backlog " + strconv.Itoa(i)})
		}
		s := startServer(b, cfg, daemon.Options{Logger: quiet, Secrets: config.Secrets{BotToken: backfillToken}})
		return s, fs, cfg
	}
	run := func(ctx context.Context, s *testServer, fs *fakeslack.Server, cfg config.Config, rate int) (catchup.Result, error) {
		cc := ingress.CatchUpConfig(cfg, config.Secrets{BotToken: backfillToken}, s.Store(), slackrate.New(rate))
		cc.APIURL, cc.Logger, cc.Channels = fs.URL(), quiet, []string{"C2"}
		cu, err := catchup.New(cc)
		if err != nil {
			return catchup.Result{}, err
		}
		return cu.Run(ctx, time.Now().Add(-time.Hour))
	}

	b.Run("recovered-per-minute/rate-50", func(b *testing.B) {
		s, fs, cfg := setup(b, 2000) // 10 pages of 200
		var recovered int
		var took time.Duration
		for b.Loop() {
			start := time.Now()
			res, err := run(context.Background(), s, fs, cfg, 50)
			took += time.Since(start)
			if err != nil || !res.Finished() {
				b.Fatalf("%v %s", err, res)
			}
			recovered += res.Totals().Recorded + res.Totals().Duplicates
		}
		b.ReportMetric(float64(recovered)/took.Minutes(), "msgs/min")
	})

	// acks sends live message events one after another until stop is
	// closed (or n are sent) and reports their latency.
	acks := func(b *testing.B, s *testServer, n int, stop <-chan struct{}) {
		client := &http.Client{Timeout: 10 * time.Second}
		var lat []time.Duration
		for i := 0; i < n || n == 0; i++ {
			if stop != nil {
				select {
				case <-stop:
					n = -1
				default:
				}
				if n < 0 {
					break
				}
			}
			ts := store.TimeTS(time.Now())
			body := eventBody(fmt.Sprintf("EvAck%d", i), message("C1", ts, "live"))
			h := evSigned(testSecret, time.Now().Unix(), body)
			t0 := time.Now()
			r, err := evSend(client, http.MethodPost, s.URL+"/slack/events", body, h)
			lat = append(lat, time.Since(t0))
			if err != nil || r.Status != http.StatusOK {
				b.Fatalf("ack: %d %v", r.Status, err)
			}
		}
		slices.Sort(lat)
		pct := func(p float64) float64 {
			return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
		}
		b.ReportMetric(pct(0.50), "p50_ms")
		b.ReportMetric(pct(0.99), "p99_ms")
		b.ReportMetric(float64(len(lat)), "acks")
	}
	b.Run("ack/idle", func(b *testing.B) {
		s, _, _ := setup(b, 0)
		for b.Loop() {
			acks(b, s, 2000, nil)
		}
	})
	// Live acks while one catch-up records a backlog of 3,000 messages.
	for _, rate := range []int{50, 6000} {
		b.Run(fmt.Sprintf("ack/during-catch-up/rate-%d", rate), func(b *testing.B) {
			for b.Loop() {
				s, fs, cfg := setup(b, 3000)
				done := make(chan struct{})
				go func() {
					defer close(done)
					if res, err := run(context.Background(), s, fs, cfg, rate); err != nil || res.Totals().Recorded != 3000 {
						b.Errorf("catch-up: %v %s", err, res)
					}
				}()
				acks(b, s, 0, done)
			}
		})
	}
}
