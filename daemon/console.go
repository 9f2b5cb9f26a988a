package daemon

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ackd/ackd/console"
	"github.com/ackd/ackd/internal/buildinfo"
	"github.com/ackd/ackd/store"
)

// consoleServer makes the operator console's server ([console] listen):
// the console's pages on a listener of their own.
func (s *Server) consoleServer() (*http.Server, error) {
	var routes []console.Route
	for _, r := range s.cfg.Routes {
		routes = append(routes, console.Route{Name: r.Name, Match: r.MatchText(), Effect: r.Effect})
	}
	me := s.instance.ID
	version := buildinfo.Read().Version
	// The overview's counts read every status's index: at most once per
	// probe interval, however often pages are loaded (as /metrics).
	queue := newCached(s.opts.ProbeEvery, 5*time.Second, s.store.Queue)
	h, err := console.New(console.Options{
		Store: s.store, Routes: routes, Password: s.opts.Secrets.ConsolePassword,
		Queue: func(ctx context.Context) (store.Queue, error) {
			q, _, err := queue.get(ctx)
			return q, err
		},
		Logger: s.opts.Logger, InstanceFresh: InstanceStale,
		Describe: func(in store.Instance, now time.Time) string {
			var says []string
			if in.ID == me {
				says = append(says, "this daemon, ackd "+version)
			}
			if sock := DescribeSocket(ParseInstanceState(in).SocketMode, now); sock != "" {
				says = append(says, "Socket Mode: "+sock)
			}
			return strings.Join(says, "; ")
		},
	})
	if err != nil {
		return nil, err
	}
	return &http.Server{
		Handler: h,
		// An operator's browser: pages are small, a search reads at most a
		// bounded window of rows.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}, nil
}
