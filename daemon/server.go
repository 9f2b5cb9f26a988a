// Package daemon is ackd's composition root: it opens the database and the
// sweep, and starts and stops everything a running ackd is made of — the
// ingress (package ingress: HTTP and Socket Mode), the sweep ticker and its
// immediate trigger, the pruner, catch-up, OAuth's refresher, the console,
// /healthz and /metrics (with their probes), the instance heartbeat and the
// systemd notifications and watchdog — with a bounded graceful shutdown. It
// owns nothing of its own beyond that wiring and lifecycle.
//
// Limits: one process owns the listener; other processes may share the
// database (`ackd sweep --once`).
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/oauth"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Options are a Server's dependencies.
type Options struct {
	Schema   string // schema.sql text
	Secrets  config.Secrets
	Logger   *slog.Logger
	Now      func() time.Time // default time.Now
	Notifier *Notifier        // nil: no sd_notify
	// ShutdownTimeout bounds waiting for in-flight acks at Close (default 10s).
	ShutdownTimeout time.Duration
	// HTTPClient is used by the effects (default: plain); the effects use a
	// copy that never follows redirects.
	HTTPClient *http.Client
	// BodyBudget bounds the bytes of Slack request bodies held at once
	// (default DefaultBodyBudget); see bodyBudget.
	BodyBudget int64
	// RefusedLogEvery is the interval of the log lines of unauthenticated
	// answers: the first of each is logged, the rest summarized at its end
	// (default DefaultRefusedLogEvery); see refusalLog.
	RefusedLogEvery time.Duration
	// ProbeEvery is how long one /healthz write check and one /metrics page
	// serve the probes that follow (default DefaultProbeEvery); see
	// probes.go. Tests that read a gauge as it changes lower it.
	ProbeEvery time.Duration
	// MigrateNotifyAfter is how long a schema migration at start runs
	// before Notifier is told it is still starting (EXTEND_TIMEOUT_USEC;
	// see migrationNotifier). 0: DefaultMigrateNotifyAfter; negative: at
	// once (tests).
	MigrateNotifyAfter time.Duration
}

// Server is a running ackd.
type Server struct {
	cfg     config.Config
	opts    Options
	log     *slog.Logger
	store   store.Store
	sweeper *sweep.Sweeper
	// performs is what this daemon records it can perform (ackd_instances).
	performs []string
	// in is Slack's requests in: HTTP and Socket Mode (package ingress).
	in      *ingress.Server
	probes  *probeCache
	metrics *metrics
	oauth   *oauth.Service // nil without [oauth]
	// budget is this process's one pace of calls to Slack's history
	// methods ([backfill] rate), shared by catch-up and anything else
	// that reads history.
	budget *slackrate.Budget

	ln   net.Listener
	http *http.Server
	// The operator listener ([metrics] listen); nil when /metrics and
	// /healthz share the Slack listener.
	metricsLn   net.Listener
	metricsHTTP *http.Server
	// The console's listener ([console] listen); nil without it.
	consoleLn   net.Listener
	consoleHTTP *http.Server

	ctx    context.Context // background work; cancelled at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // immediate sweep trigger, coalescing

	sweepOK   atomic.Int64    // unix ms of the last sweep that did not fail on the database
	running   [2]atomic.Int64 // per loop (ticker, immediate): unix ms its sweep started; 0 when idle
	instance  store.Instance  // this process in ackd_instances
	dbFile    *DBFile         // the SQLite file it serves (nil on PostgreSQL)
	closeOnce sync.Once
	closeErr  error
}

// New validates the configuration and secrets. Open starts the server.
func New(cfg config.Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if errs := cfg.SecretProblems(opts.Secrets); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MigrateNotifyAfter == 0 {
		opts.MigrateNotifyAfter = DefaultMigrateNotifyAfter
	}
	if opts.ProbeEvery <= 0 {
		opts.ProbeEvery = DefaultProbeEvery
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	// Rows record whether their forward is signed, so that a sweep without
	// the secret leaves them alone instead of sending them unsigned; and
	// whether a route is performed from the stored request is decided once
	// here, not on every ack.
	cfg.Routes = config.PrepareRoutes(cfg.Routes, opts.Secrets)
	s := &Server{cfg: cfg, opts: opts, log: opts.Logger.With("component", "daemon"),
		kick: make(chan struct{}, 1), budget: slackrate.New(cfg.Backfill.Rate)}
	s.in = ingress.New(cfg, ingress.Options{Secrets: opts.Secrets, Logger: opts.Logger, HTTPClient: opts.HTTPClient,
		Now: opts.Now, BodyBudget: opts.BodyBudget, RefusedLogEvery: opts.RefusedLogEvery}, s.log)
	return s, nil
}

// Open opens the database, binds the listener and starts the background
// loops. On error everything opened so far is closed.
func (s *Server) Open(ctx context.Context) (err error) {
	// Bind both listeners first: a daemon that cannot listen must not
	// leave a new, empty database behind.
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return listenError("listen", s.cfg.Listen, "--listen or ACKD_LISTEN (or listen in the config)", err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	if s.cfg.Metrics.Listen != "" {
		mln, err := net.Listen("tcp", s.cfg.Metrics.Listen)
		if err != nil {
			return listenError("metrics.listen", s.cfg.Metrics.Listen, "[metrics] listen in the config", err)
		}
		defer func() {
			if err != nil {
				mln.Close()
			}
		}()
		s.metricsLn = mln
	}
	if s.cfg.Console.Listen != "" {
		cln, err := net.Listen("tcp", s.cfg.Console.Listen)
		if err != nil {
			return listenError("console.listen", s.cfg.Console.Listen, "[console] listen in the config", err)
		}
		defer func() {
			if err != nil {
				cln.Close()
			}
		}()
		s.consoleLn = cln
	}
	sto := s.cfg.StoreOptions(s.opts.Schema, s.opts.Now)
	sto.Logger = s.opts.Logger.With("component", "store")
	mn := &migrationNotifier{n: s.opts.Notifier, after: s.opts.MigrateNotifyAfter, extend: migrateExtend}
	sto.OnMigrate = mn.step
	st, err := OpenStore(ctx, s.cfg.DB, sto)
	mn.close()
	if err != nil {
		return err
	}
	s.store = st
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	s.probes = newProbeCache(st, s.log, s.opts.ProbeEvery)
	s.metrics = newMetrics(st, s.opts.ProbeEvery)
	s.metrics.reg.MustRegister(newPauseCollector(st, s.cfg.Routes)) // metrics_pauses.go
	s.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ackd_request_body_bytes_held",
		Help: "Bytes of the request body budget reserved by Slack requests being read or answered now.",
	}, func() float64 { return float64(s.in.BodyBytesHeld()) }))
	ec := s.cfg.EffectConfig(s.opts.Secrets, s.opts.Logger, s.opts.HTTPClient)
	ec.History = s.budget // catch-up and post confirmation share one pace of history reads
	ec.OnConfirm = s.metrics.confirmed
	ec.Steps = st
	ec.StreamObserver = s.metrics.stream
	if s.oauth, err = OAuthService(s.cfg, s.opts.Secrets, st, s.opts.Logger, s.opts.HTTPClient, s.metrics.reg, s.in.Refused()); err != nil {
		return err
	}
	if s.oauth != nil {
		ec.Tokens = s.oauth
		s.oauth.Announce(ctx)
	}
	sc := SweepConfig(s.cfg)
	sc.Skip = ec.Unavailable()
	sc.Mask = sweep.SecretMask(ec, s.opts.Secrets.SigningSecret, s.opts.Secrets.AppToken, s.opts.Secrets.ClientSecret)
	s.sweeper = sweep.New(st, sweep.Effects(ec), sc, s.opts.Logger, s.metrics)
	s.performs = s.sweeper.Performs(ec)

	s.ln = ln
	if s.metricsLn != nil {
		s.metricsHTTP = &http.Server{
			Handler: s.operatorMux(http.NewServeMux()),
			// A scrape or a health probe is a small GET.
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      15 * time.Second,
			IdleTimeout:       90 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		}
	}
	s.announce(ctx)
	if s.consoleLn != nil {
		if s.consoleHTTP, err = s.consoleServer(); err != nil {
			return err
		}
	}
	s.http = &http.Server{
		Handler: s.Handler(),
		// Slack sends small bodies and needs its answer within 3s: a client
		// slower than this is not Slack, or is a slowloris.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// Covers the ack budget plus writing a small answer; /metrics is small.
		WriteTimeout: 15 * time.Second,
		// Slack reuses connections; idle ones are cheap but not free.
		IdleTimeout:    90 * time.Second,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sweepOK.Store(s.opts.Now().UnixMilli())
	s.in.Attach(ingress.Runtime{Store: st, Sweeper: s.sweeper, OAuth: s.oauth, Sealer: ec.Sealer,
		Metrics: ingress.Metrics{Registry: s.metrics.reg, AckLatency: s.metrics.ackLatency, Requests: s.metrics.requests, AppRateLimited: s.metrics.rateLimited},
		Ctx:     s.ctx, Trigger: s.Trigger})
	if s.cfg.Socket.Enabled {
		// Before the listener serves: /healthz and /metrics read it.
		s.in.StartSocket()
	}

	s.goLoop(func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", "err", err)
		}
	})
	if s.metricsHTTP != nil {
		s.goLoop(func() {
			if err := s.metricsHTTP.Serve(s.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("metrics server stopped", "err", err)
			}
		})
	}
	if s.consoleHTTP != nil {
		s.goLoop(func() {
			if err := s.consoleHTTP.Serve(s.consoleLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("console server stopped", "err", err)
			}
		})
	}
	s.goLoop(s.tickerLoop)
	s.goLoop(s.immediateLoop)
	s.goLoop(s.pruneLoop)
	s.goLoop(s.heartbeatLoop)
	s.goLoop(func() { s.every(s.in.Refused().Every(), s.in.Refused().Flush) })
	if s.in.Marks() != nil {
		s.goLoop(s.markLoop)
		if s.cfg.Backfill.OnStart {
			s.goLoop(s.catchUpOnStart)
		}
	}
	if s.oauth != nil {
		s.goLoop(func() { s.oauth.Run(s.ctx) })
	}
	if iv, ok := s.opts.Notifier.WatchdogInterval(); ok {
		s.goLoop(func() { s.watchdogLoop(iv) })
	}
	for _, w := range s.cfg.SecretWarnings(s.opts.Secrets) {
		s.log.Warn("secrets: " + w)
	}
	for _, w := range s.cfg.Warnings {
		s.log.Warn("config: " + w)
	}
	if w := s.cfg.ClearTokenWarning(s.opts.Secrets); w != "" {
		s.log.Warn("config: " + w)
	}
	var slowest time.Duration
	for _, r := range s.cfg.Routes {
		slowest = max(slowest, r.Timeout.Duration)
	}
	rounds := time.Duration((s.cfg.Sweep.Batch + s.cfg.Sweep.Workers - 1) / s.cfg.Sweep.Workers)
	if rounds*slowest >= s.cfg.Sweep.Lease.Duration {
		s.log.Warn("a full batch of the slowest effect outlasts the lease: rows late in a batch will wait for the lease to expire; raise sweep.lease or sweep.workers, or lower sweep.batch",
			"batch", s.cfg.Sweep.Batch, "workers", s.cfg.Sweep.Workers, "slowest_timeout", slowest.String(), "lease", s.cfg.Sweep.Lease.String())
	}
	if skip := s.cfg.RoutedSkips(sc.Skip); len(skip) > 0 {
		s.log.Warn("routes name effects this daemon cannot perform: their rows stay pending until a process with the credential sweeps them",
			"skipped", sweep.SkipSummary(skip))
	}
	if why, ok := sc.Skip["post"]; ok && s.cfg.ForwardsToEvents() {
		s.log.Info("a forward handler's reply with text is posted in the event's thread with chat.postMessage, which this daemon cannot do: such replies stay pending (a handler that answers with an empty body needs nothing)",
			"post", why)
	}
	if s.cfg.Builtin {
		s.log.Warn("no routes configured: running the built-in dry run, which logs every event and performs nothing (give --config a file with [[route]] entries)",
			"config", s.cfg.Source)
	}
	// Each engine says what its own durability settings are: SQLite's
	// synchronous means nothing to PostgreSQL.
	attrs := []any{"addr", ln.Addr().String(), "metrics_addr", s.MetricsAddr(), "console_addr", s.ConsoleAddr(), "db", st.Location(), "engine", st.Engine(), "config", s.cfg.Source}
	if es, ok := st.(interface{ Settings(context.Context) []any }); ok {
		attrs = append(attrs, es.Settings(ctx)...)
	}
	attrs = append(attrs, "routes", len(s.cfg.Routes), "ack_budget", s.cfg.Ack.Budget.String(),
		"http_slack_routes", s.in.HTTPRoutes(), "socket_mode", s.cfg.Socket.Enabled, "oauth", s.oauth != nil)
	s.log.Info("ackd listening", attrs...)
	if err := s.opts.Notifier.Ready(); err != nil {
		s.log.Warn("sd_notify READY failed", "err", err)
	}
	s.notifyStatus()
	return nil
}

// listenError is a listener that could not be bound, in words: an address
// in use is most likely another ackd (or the same one started twice), and
// the operator is told which setting moves this one.
func listenError(what, addr, setting string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s %s: %w: another process listens there, perhaps another ackd serve (ss -ltnp | grep %s shows it); stop it, or give this ackd another address with %s",
			what, addr, err, portOf(addr), setting)
	}
	return fmt.Errorf("%s %s: %w", what, addr, err)
}

// portOf is addr's port (":3000" for "127.0.0.1:3000"), or addr.
func portOf(addr string) string {
	if _, port, err := net.SplitHostPort(addr); err == nil {
		return ":" + port
	}
	return addr
}

func (s *Server) goLoop(fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// Addr is the listener's address (useful with port 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// MetricsAddr is the operator listener's address, or Addr when /metrics and
// /healthz are served on the Slack listener.
func (s *Server) MetricsAddr() string {
	if s.metricsLn == nil {
		return s.Addr()
	}
	return s.metricsLn.Addr().String()
}

// ConsoleAddr is the console's address, "" without [console] listen.
func (s *Server) ConsoleAddr() string {
	if s.consoleLn == nil {
		return ""
	}
	return s.consoleLn.Addr().String()
}

// Store is the server's database.
func (s *Server) Store() store.Store { return s.store }

// Sweeper is the server's sweep.
func (s *Server) Sweeper() *sweep.Sweeper { return s.sweeper }

// Close shuts down gracefully: stop accepting and let in-flight acks finish
// (bounded by ShutdownTimeout), cancel background loops and in-flight effects
// (their leases expire), then close the database. Every error is reported.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		_ = s.opts.Notifier.Stopping()
		s.log.Info("shutting down: finishing in-flight acks")
		var errs []error
		// Envelopes in flight commit and are acked; then the Socket Mode
		// connections close (Slack re-sends whatever was not acked).
		s.in.StopSocket(s.opts.ShutdownTimeout)
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
			if err := s.http.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("http shutdown: %w", err))
				_ = s.http.Close()
			}
			cancel()
		}
		if s.metricsHTTP != nil {
			// Scrapes and probes have nothing to finish.
			if err := s.metricsHTTP.Close(); err != nil {
				errs = append(errs, fmt.Errorf("metrics listener close: %w", err))
			}
		}
		if s.consoleHTTP != nil {
			// A page being read is cut short: the browser reloads it.
			if err := s.consoleHTTP.Close(); err != nil {
				errs = append(errs, fmt.Errorf("console listener close: %w", err))
			}
		}
		if s.cancel != nil {
			s.cancel()
		}
		s.wg.Wait()
		s.in.Refused().Flush() // what the last interval counted
		if s.store != nil && s.instance.ID != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			// Not a shutdown failure: the row goes stale and status stops
			// listing this daemon after InstanceStale.
			if err := s.store.Retire(ctx, s.instance.ID); err != nil {
				s.log.Warn("could not remove this daemon from ackd_instances", "err", err)
			}
			cancel()
		}
		if s.store != nil {
			if err := s.store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close database: %w", err))
			}
		}
		s.closeErr = errors.Join(errs...)
		if s.closeErr != nil {
			s.log.Error("stopped with errors", "err", s.closeErr)
		} else {
			s.log.Info("stopped")
		}
	})
	return s.closeErr
}

// Trigger asks for an immediate sweep. It never blocks; triggers that arrive
// while one is pending coalesce.
func (s *Server) Trigger() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// The loops that run sweeps, indexing Server.running.
const (
	tickerLoop = iota
	immediateLoop
)

// sweepOnce is the one sweep function behind the ticker and the trigger.
func (s *Server) sweepOnce(loop int) (sweep.Result, error) {
	s.running[loop].Store(s.opts.Now().UnixMilli())
	res, err := s.sweeper.RunOnce(s.ctx)
	s.running[loop].Store(0)
	// A sweep that failed because the disk is full or failing ran to its
	// end all the same: the loop is alive, and it sweeps again once the
	// database can write (see watchdogLoop).
	if err == nil || s.ctx.Err() != nil || errors.Is(err, store.ErrUnavailable) {
		s.sweepOK.Store(s.opts.Now().UnixMilli())
	}
	return res, err
}

func (s *Server) tickerLoop() {
	failing := false
	s.every(s.cfg.Sweep.Interval.Duration, func() {
		res, err := s.sweepOnce(tickerLoop)
		switch {
		case err != nil && s.ctx.Err() == nil:
			if !failing {
				s.log.Error("sweep failed; retrying every interval", "err", err)
			}
			failing = true
		case err == nil && failing:
			s.log.Info("sweep recovered")
			failing = false
		}
		if res.Claimed > 0 {
			s.log.Info("sweep", "trigger", "ticker", "claimed", res.Claimed, "done", res.Done,
				"retried", res.Retried, "parked", res.Parked, "fenced", res.Fenced)
			s.notifyStatus()
		}
	})
}

// every runs fn every d until Close.
func (s *Server) every(d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// immediateLoop runs the sweep right after first deliveries. It drains
// while sweeps come back full, so a burst is worked off without waiting for
// the ticker, and sweeps once more for follow-ups (a forward's reply). It is an optimisation: without it the ticker delivers all.
// immediateGather is how long the immediate sweep waits after a first
// delivery for others to arrive before it claims.
const immediateGather = 5 * time.Millisecond

func (s *Server) immediateLoop() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
			// A few milliseconds for the acks arriving together to land, so
			// one claim takes them all: at moderate rates a sweep per ack
			// cost a claim and a completion commit (each with its fsync and
			// its copies of the outbox's hot pages) per row.
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(immediateGather):
			}
			for s.ctx.Err() == nil {
				res, err := s.sweepOnce(immediateLoop)
				if err != nil {
					if s.ctx.Err() == nil {
						s.log.Warn("immediate sweep failed; the ticker will retry", "err", err)
					}
					break
				}
				if res.Claimed > 0 {
					// At debug, like each row done: at info an event
					// costs one line, its ack (journald's rate limit is
					// per line; see systemd/ackd.service). Failures are
					// logged per row at warn and error.
					s.log.Debug("sweep", "trigger", "immediate", "claimed", res.Claimed, "done", res.Done,
						"retried", res.Retried, "parked", res.Parked, "fenced", res.Fenced)
				}
				// Again while sweeps come back full, and when a completion
				// enqueued a follow-up (a forward's reply), which is due now.
				if res.Claimed < s.sweeper.Config().Batch && res.FollowUps == 0 {
					break
				}
			}
		}
	}
}

func (s *Server) pruneLoop() {
	s.every(s.cfg.Retention.Interval.Duration, func() {
		res, err := s.store.Prune(s.ctx, s.cfg.Retention.Receipts.Duration, s.cfg.Retention.Done.Duration, 0)
		if err != nil && s.ctx.Err() == nil {
			s.log.Error("prune failed", "err", err)
		} else if res.Receipts+res.Done+res.Requests > 0 {
			s.log.Info("pruned", "receipts", res.Receipts, "done_rows", res.Done, "requests", res.Requests)
		}
	})
}

// healthy reports whether the sweep loop is making progress: a sweep is
// running and younger than a lease, or the last one ended without a database
// error recently.
func (s *Server) healthy() bool {
	now := s.opts.Now().UnixMilli()
	for i := range s.running {
		if started := s.running[i].Load(); started != 0 && now-started < (s.cfg.Sweep.Lease.Duration+time.Minute).Milliseconds() {
			return true
		}
	}
	return now-s.sweepOK.Load() < (3*s.cfg.Sweep.Interval.Duration + 30*time.Second).Milliseconds()
}

// watchdogLoop pings systemd's watchdog at half its interval, only while the
// sweep loop is healthy and the database takes a write lock.
//
// A database that cannot write because the disk is full or failing
// (store.ErrUnavailable) does not stop the pings: a restart cannot fix the
// disk, a new process could not even open the database on a full disk
// (SQLite must create its -shm file), and after StartLimitBurst failed
// starts systemd would give up on ackd for good. Running on, ackd answers
// 500 and acks again the moment the disk takes writes (store/sqlite's group
// commit). The status line says why it is unhealthy.
func (s *Server) watchdogLoop(interval time.Duration) {
	s.every(interval/2, func() {
		ctx, cancel := context.WithTimeout(s.ctx, interval/4)
		err := s.store.CheckWrite(ctx)
		cancel()
		if errors.Is(err, store.ErrUnavailable) && s.healthy() {
			_ = s.opts.Notifier.Status("unhealthy: database cannot write (disk full or I/O error): " + err.Error())
			_ = s.opts.Notifier.Watchdog()
			return
		}
		if err != nil || !s.healthy() {
			s.log.Warn("not pinging the systemd watchdog: unhealthy", "db_err", err, "sweep_healthy", s.healthy())
			reason := "sweep loop not making progress"
			if err != nil {
				reason = "database not writable: " + err.Error()
			}
			_ = s.opts.Notifier.Status("unhealthy: " + reason)
			return
		}
		_ = s.opts.Notifier.Watchdog()
		s.notifyStatus()
	})
}

func (s *Server) notifyStatus() {
	if !s.opts.Notifier.Enabled() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	q, err := s.store.Queue(ctx)
	if err != nil {
		_ = s.opts.Notifier.Status("database unreadable: " + err.Error())
		return
	}
	_ = s.opts.Notifier.Status(fmt.Sprintf("pending=%d parked=%d oldest_pending=%s",
		q.Pending, q.Parked, q.OldestPending.Round(time.Second)))
}

// Handler is the HTTP surface of the Slack listener: the Slack endpoints,
// and /healthz and /metrics unless [metrics] listen moves them to a
// listener of their own.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.in.Register(mux)
	if s.oauth != nil {
		mux.Handle(s.cfg.OAuth.InstallPath, s.oauth.InstallHandler())
		mux.Handle(s.cfg.OAuth.RedirectPath, s.oauth.RedirectHandler())
	}
	if h := passthrough(s.cfg, s.log.With("component", "passthrough")); h != nil {
		for _, p := range s.cfg.Redeliver.Passthrough {
			mux.Handle(p, h)
		}
	}
	if s.cfg.Metrics.Listen == "" {
		s.operatorMux(mux)
	}
	return mux
}

// operatorMux adds the operator endpoints to mux.
func (s *Server) operatorMux(mux *http.ServeMux) *http.ServeMux {
	mux.HandleFunc("/healthz", s.handleHealth)
	mux.Handle("/metrics", s.metrics.handler())
	return mux
}

func (s *Server) sealedInstallations() int64 {
	if s.oauth == nil {
		return 0
	}
	return s.oauth.SealedInstallations()
}

// healthText says why the health write failed, in an operator's words.
func healthText(err error, engine string) string {
	switch {
	case store.IsBusy(err), engine == "sqlite" && errors.Is(err, context.DeadlineExceeded):
		// SQLite waits for the write lock (busy_timeout) longer than the
		// check's second: a deadline there is the lock held elsewhere.
		return "database locked by another process (a sqlite3 session with an open write, a backup by cp, a second ackd): " + err.Error()
	case store.IsReadOnly(err):
		return "database is read-only: " + err.Error()
	}
	return "database not writable: " + err.Error()
}

// handleHealth answers from the cached database write check (probes.go):
// the body says how old it is.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	_, age, err := s.probes.write.get(r.Context())
	checked := "database write checked " + age.Round(time.Millisecond).String() + " ago"
	if err != nil {
		http.Error(w, healthText(err, s.store.Engine())+" ("+checked+")", http.StatusServiceUnavailable)
		return
	}
	if !s.healthy() {
		http.Error(w, "sweep loop is not making progress", http.StatusServiceUnavailable)
		return
	}
	if err := s.in.SocketHealth(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok ("+checked+")")
	if n := s.sealedInstallations(); n > 0 {
		// The daemon serves (its answers to Slack are true, other teams'
		// rows are performed): a note, not a failed check.
		fmt.Fprintf(w, "oauth: %d installations do not open with ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD): their rows wait; see ackd's log\n", n)
	}
}
