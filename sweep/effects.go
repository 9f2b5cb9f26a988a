package sweep

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"golang.org/x/sync/singleflight"

	"github.com/ackd/ackd/internal/seal"
	"github.com/ackd/ackd/internal/slackclock"
	"github.com/ackd/ackd/internal/slackrate"
)

// EffectConfig is what the effect performers need from the daemon.
type EffectConfig struct {
	BotToken string // xoxb-…; empty: post, react and update park with no_bot_token
	// Tokens, when set ([oauth]), gives each row the token of its own
	// installation at perform time instead of BotToken.
	Tokens TokenSource
	// NotInstalledWait: with Tokens, how long a row whose team has no
	// installation waits before it parks (default DefaultNotInstalledWait).
	NotInstalledWait time.Duration
	APIURL           string // Web API base; empty means Slack's. A trailing slash is added.
	ForwardSecret    string // signs forward requests; empty sends no X-Ackd-Signature
	// RedeliverSecret signs re-delivered Slack requests as Slack would:
	// the app's signing secret (ACKD_REDELIVER_SECRET, else
	// SLACK_SIGNING_SECRET). Empty: redeliver rows park with no_signing_secret.
	RedeliverSecret string
	HTTPClient      *http.Client // shared by every effect; nil means a plain client (the job's ctx is the deadline); redirects are never followed, even by a client given here
	Logger          *slog.Logger // performers log at Debug, and what post confirmation found or could not read (Info, Warn once per channel); nil discards
	Now             func() time.Time
	// NoConfirm turns off the lookup before a post is repeated after an
	// unknown outcome ([slack] confirm_posts = false): such a post is
	// simply made again (at-least-once). See confirm.go.
	NoConfirm bool
	// History paces the lookups' conversations.history/replies calls,
	// shared with every other holder of the same budget (catch-up). Nil:
	// Effects makes one of DefaultHistoryRate calls a minute.
	History *slackrate.Budget
	// OnConfirm, when set, is told each lookup's outcome (ConfirmFound,
	// ConfirmNotFound, ConfirmImpossible, ConfirmRateLimited): a metric.
	OnConfirm func(outcome string)
	// SlackClock, when set, is told of every Web API answer's Date header
	// and gives the lookup's window Slack's clock (confirm.go); nil:
	// Effects makes one over Now.
	SlackClock *slackclock.Clock
	// Sealer opens (and the daemon seals) workflow steps' execution tokens
	// with ACKD_TOKEN_KEY (steptoken.go). nil: step and step_deadline rows
	// are not claimed, and a row whose request carries a sealed token is
	// given back.
	Sealer *seal.Keys
	// Steps is where a step keeps its handler's reply and where its
	// deadline looks for it (step.go); nil: a reply is not kept (a retry
	// asks the handler again) and a deadline always calls Slack.
	Steps StepStore
	// Stream is [stream]: the status, the apology, the longest answer of
	// stream rows (stream.go).
	Stream StreamConfig
	// StreamObserver, when set, is told what streams do (metrics).
	StreamObserver StreamObserver
	// MaxAttempts is sweep.max_attempts, the store's: a step's last attempt
	// ends the step with functions.completeError before the row parks, and
	// a stream row whose agent fails on its last attempt clears its status
	// first (default 8).
	MaxAttempts int
}

// Effects returns the performers for every effect a route can name: log,
// post, react, update, forward, respond, redeliver, step (with
// step_deadline, the timer a step row brings), stream, and stream_stop (the
// row of a user's Stop: stop.go). They share one Slack client with
// slack-go's own retries off: a failed attempt goes back to the outbox, which
// reschedules it, rather than sleeping inside the call.
func Effects(cfg EffectConfig) Registry {
	cfg.HTTPClient = noRedirects(cfg.HTTPClient)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.History == nil {
		cfg.History = slackrate.New(DefaultHistoryRate)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	apiURL := cfg.APIURL
	if apiURL == "" {
		apiURL = slack.APIURL
	}
	if !strings.HasSuffix(apiURL, "/") {
		apiURL += "/" // slack-go appends the method name to the base as is
	}
	if cfg.SlackClock == nil {
		cfg.SlackClock = slackclock.New(cfg.Now)
	}
	// Every answer from the Web API tells Slack's clock (its Date header);
	// cfg.HTTPClient is already this package's own copy.
	cfg.HTTPClient.Transport = cfg.SlackClock.Transport(cfg.HTTPClient.Transport, apiURL)
	e := &effects{cfg: cfg, apiURL: apiURL, log: cfg.Logger.With("component", "effects")}
	if cfg.BotToken != "" {
		e.api = slack.New(cfg.BotToken, slack.OptionAPIURL(apiURL), slack.OptionHTTPClient(cfg.HTTPClient))
	}
	return Registry{
		"log":              LogEffect(cfg.Logger),
		"post":             PerformerFunc(e.post),
		"react":            PerformerFunc(e.react),
		"update":           PerformerFunc(e.update),
		"forward":          PerformerFunc(e.forward),
		"respond":          PerformerFunc(e.respond),
		"redeliver":        PerformerFunc(e.redeliver),
		EffectStep:         PerformerFunc(e.step),
		EffectStepDeadline: PerformerFunc(e.stepDeadline),
		"stream":           PerformerFunc(e.stream),
		EffectStreamStop:   PerformerFunc(e.streamStop),
	}
}

// noRedirects returns a copy of c (or a plain client) that never follows a
// redirect: the caller sees the 3xx itself. Following one is wrong for every
// effect: on 301/302/303 Go re-sends a POST as a bodyless GET, whose 200
// would mark the row done although the handler never saw the envelope; on
// 307/308 the signed body, its X-Ackd-Signature and Idempotency-Key would go
// to whatever host the Location names, internal ones included. The caller's
// client is copied, not changed, since it may be shared.
func noRedirects(c *http.Client) *http.Client {
	var nc http.Client
	if c != nil {
		nc = *c
	}
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

// effects holds what the performers share.
type effects struct {
	cfg EffectConfig
	api *slack.Client // nil without a bot token
	// apiURL is the Web API base, with its trailing slash.
	apiURL string
	log    *slog.Logger
	// impossible holds the channels a post's lookup could not read, and
	// the installations ("auth.test:KEY") whose bot could not be learned,
	// each logged once.
	impossible sync.Map
	// progress holds, by row id, the lookups cut short (lookupProgress).
	progress sync.Map
	// ids holds, by installation ("" for SLACK_BOT_TOKEN), the bot its
	// token posts as (identity.go); whoami shares one auth.test among
	// the lookups that need it at once.
	ids    sync.Map
	whoami singleflight.Group
	// stops is the streams this process runs, told at once of a stop
	// of their thread performed here (stop.go); noSessions holds, by
	// installation, until when agents.sessions.setStatus is not asked
	// (it answered not_authorized or feature_disabled).
	stops      stopBoard
	noSessions sync.Map
}

// render renders the template param key, or returns def when src is empty.
func render(p Payload, key, src, def string) (string, error) {
	if src == "" {
		return def, nil
	}
	s, err := p.Render(key, src)
	if err != nil {
		return "", &Failure{Class: Permanent, Code: "template", Err: err}
	}
	return s, nil
}

// result encodes an effect's result as the JSON stored in outbox.result.
func result(v any) Outcome {
	b, _ := json.Marshal(v) // maps of strings and ints always marshal
	return Outcome{Result: string(b)}
}

// present reports whether a JSON value was given: not absent and not null.
func present(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

// readBody reads at most 1 MiB of a response; handlers have no business
// sending more, and a follow-up reply is far smaller.
func readBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return b, fmt.Errorf("read response: %w", err)
	}
	return b, nil
}
