// Package ingress is Slack's requests in: the HTTP endpoints (verify the
// signature, read the body within its budget, parse the envelope, check the
// ids, find the client's address) and Socket Mode (socket.go), each request
// filtered and routed into intents (routes.go) and committed before it is
// answered, within the ack budget. Catch-up's recovered messages become the
// same intents (backfill.go: the third ingress).
//
// A request is refused before its body is read unless it carries Slack's
// signature headers with a fresh timestamp; bodies that are read share a
// byte budget (answered 503 when it is full) and must arrive within half the
// ack budget (see body.go).
//
// The daemon (package daemon) owns the process: it opens the database and
// the sweep, hands them over with Attach, serves Register's routes on its
// listener, and starts and stops Socket Mode. Answers that Slack needs
// synchronously in the body (view_submission response_action,
// block_suggestion options) come only from a redeliver route, whose first
// attempt runs inline within the ack budget.
package ingress

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/internal/seal"
	"github.com/ackd/ackd/oauth"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Options are the ingress's settings from the process that runs it.
type Options struct {
	Secrets    config.Secrets
	Logger     *slog.Logger // the process's logger (Socket Mode adds its component)
	HTTPClient *http.Client // Socket Mode's calls to Slack
	Now        func() time.Time
	// BodyBudget bounds the bytes of Slack request bodies held at once
	// (default DefaultBodyBudget); see bodyBudget.
	BodyBudget int64
	// RefusedLogEvery is the interval of the log lines of unauthenticated
	// answers (default DefaultRefusedLogEvery); see RefusalLog.
	RefusedLogEvery time.Duration
}

// Metrics are the series the ingress records, registered by the daemon.
type Metrics struct {
	Registry   prometheus.Registerer
	AckLatency *prometheus.HistogramVec // endpoint, outcome
	Requests   *prometheus.CounterVec   // endpoint, status
	// AppRateLimited counts Slack's app_rate_limited callbacks, over HTTP
	// and Socket Mode (nil: not counted).
	AppRateLimited prometheus.Counter
}

// Runtime is what the ingress takes from the daemon once the database, the
// sweep and OAuth are open (Attach).
type Runtime struct {
	Store   store.Store
	Sweeper *sweep.Sweeper
	OAuth   *oauth.Service // nil without [oauth]
	// Sealer seals workflow steps' execution tokens in stored requests
	// (ACKD_TOKEN_KEY; nil without it).
	Sealer  *seal.Keys
	Metrics Metrics
	// Ctx is the daemon's background context, cancelled at Close: the
	// immediate attempts and Socket Mode's work end with it.
	Ctx context.Context
	// Trigger asks for an immediate sweep after a first delivery.
	Trigger func()
}

// Server is the ingress of one daemon.
type Server struct {
	cfg     config.Config
	opts    Options
	log     *slog.Logger
	verify  *Verifier // nil: no signing secret, HTTP Slack routes off
	bodies  *bodyBudget
	refused *RefusalLog
	marks   *MarkTracker // nil unless catch-up has channels

	// Set by Attach.
	store   store.Store
	sweeper *sweep.Sweeper
	oauth   *oauth.Service
	sealer  *seal.Keys
	metrics Metrics
	ctx     context.Context
	trigger func()
	socket  *socketIngress // nil unless [socket_mode] enabled and started
	// clearTokens: an execution token stored in clear was logged once.
	clearTokens atomic.Bool
}

// New makes the ingress for cfg, whose routes are already prepared
// (config.PrepareRoutes). The daemon calls Attach before it serves.
func New(cfg config.Config, opts Options, log *slog.Logger) *Server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{cfg: cfg, opts: opts, log: log, bodies: newBodyBudget(opts.BodyBudget)}
	if ch := cfg.BackfillChannels(); len(ch) > 0 {
		s.marks = newMarkTracker(ch)
	}
	s.refused = NewRefusalLog(log, opts.RefusedLogEvery)
	if opts.Secrets.SigningSecret != "" {
		// Without a signing secret (Socket Mode alone) the HTTP Slack
		// routes are not served at all.
		s.verify = NewVerifier(opts.Secrets.SigningSecret, opts.Now)
	}
	return s
}

// Attach hands the ingress what it records into and performs with.
func (s *Server) Attach(rt Runtime) {
	s.store, s.sweeper, s.oauth, s.sealer = rt.Store, rt.Sweeper, rt.OAuth, rt.Sealer
	s.metrics, s.ctx, s.trigger = rt.Metrics, rt.Ctx, rt.Trigger
}

// Trigger asks the daemon for an immediate sweep.
func (s *Server) Trigger() {
	if s.trigger != nil {
		s.trigger()
	}
}

// HTTPRoutes reports whether the HTTP Slack routes are served (a signing
// secret is set).
func (s *Server) HTTPRoutes() bool { return s.verify != nil }

// Register adds the HTTP Slack routes to mux, when they are served.
func (s *Server) Register(mux *http.ServeMux) {
	if s.verify == nil {
		// Not served: say why to whoever asks (ackd send, curl, a Slack
		// app pointed here by mistake), with nothing read or written.
		for _, p := range []string{"/slack/events", "/slack/commands", "/slack/interactivity"} {
			mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, RoutesOffText, http.StatusNotFound)
			})
		}
		return
	}
	mux.Handle("/slack/events", s.slackHandler("events", s.handleEvents))
	mux.Handle("/slack/commands", s.slackHandler("commands", s.handleCommand))
	mux.Handle("/slack/interactivity", s.slackHandler("interactivity", s.handleInteraction))
}

// RoutesOffText is the 404's body on the HTTP Slack routes of a daemon that
// does not serve them.
const RoutesOffText = "ackd serves no HTTP Slack routes here: it runs without SLACK_SIGNING_SECRET (Socket Mode only), so it could not verify Slack's requests. Give the daemon SLACK_SIGNING_SECRET (or SLACK_SIGNING_SECRET_FILE) to take them over HTTP, or send events through Slack over Socket Mode"

// Refused is the rate-limited log of unauthenticated answers, which the
// daemon flushes on its interval and shares with OAuth's handlers.
func (s *Server) Refused() *RefusalLog { return s.refused }

// Marks is the tracker of catch-up's marks moved by live messages; nil
// unless catch-up has channels.
func (s *Server) Marks() *MarkTracker { return s.marks }

// BodyBytesHeld is the body budget reserved now (a gauge).
func (s *Server) BodyBytesHeld() int64 { return s.bodies.held.Load() }

// StartSocket opens the Socket Mode connections ([socket_mode] enabled),
// after Attach.
func (s *Server) StartSocket() {
	s.socket = newSocketIngress(s)
	s.socket.start()
}

// StopSocket lets envelopes in flight commit and be acked, then closes the
// connections (Slack re-sends whatever was not acked). No-op without them.
func (s *Server) StopSocket(timeout time.Duration) {
	if s.socket != nil {
		s.socket.stop(timeout)
	}
}

// SocketState is Socket Mode's state for ackd_instances; nil without it.
func (s *Server) SocketState() *SocketState { return s.socket.state() }

// SocketHealth is Socket Mode's part of /healthz: nil when it is off or
// well.
func (s *Server) SocketHealth() error { return s.socket.health() }
