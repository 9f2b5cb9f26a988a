package daemon

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/ingress"
)

// Catch-up ([backfill]) is the third ingress: package catchup reads the
// messages Slack never delivered from channel history, and this file turns
// each into what the live path would have recorded (Recovery), keeps each
// channel's mark moving with live message events (markTracker), and runs a
// catch-up after serve starts.

// catchUpLoop runs the catch-up of serve: once after start (on_start).
func (s *Server) catchUpOnStart() {
	cfg := ingress.CatchUpConfig(s.cfg, s.opts.Secrets, s.store, s.budget)
	cfg.Logger, cfg.Observer, cfg.HTTPClient = s.opts.Logger, s.metrics, s.opts.HTTPClient
	cu, err := catchup.New(cfg)
	if err != nil {
		s.log.Warn("catch-up is off", "reason", err.Error())
		return
	}
	s.log.Info("catch-up from each channel's mark", "channels", strings.Join(cfg.Channels, ","), "max_age", s.cfg.Backfill.MaxAge.String(),
		"rate", s.cfg.Backfill.Rate)
	res, err := cu.Run(s.ctx, time.Time{})
	switch {
	case errors.Is(err, context.Canceled):
		s.log.Info("catch-up stopped by shutdown; the next start resumes it", "summary", res.String())
	case err != nil:
		s.log.Error("catch-up failed", "err", err)
	case !res.Finished():
		s.log.Warn("catch-up finished with channels not read to the end", "summary", res.String())
	default:
		s.log.Info("catch-up finished", "summary", res.String())
	}
	if res.Totals().Recorded > 0 {
		s.Trigger()
	}
}

// markLoop writes live marks every ingress.MarkFlush, and once more at shutdown.
func (s *Server) markLoop() {
	write := func(ctx context.Context) {
		if err := s.in.Marks().Flush(ctx, s.store); err != nil && s.ctx.Err() == nil {
			s.log.Warn("could not write catch-up marks; kept for the next try", "err", err)
		}
	}
	t := time.NewTicker(ingress.MarkFlush)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			write(ctx)
			cancel()
			return
		case <-t.C:
			write(s.ctx)
		}
	}
}
