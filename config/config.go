package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2"
	"golang.org/x/text/unicode/norm"

	"github.com/ackd/ackd/sweep"
)

// Duration is a time.Duration written as a Go duration string ("2s", "48h").
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Config is ackd's configuration: DESIGN §5's TOML file. Default() gives the
// built-in values; Load parses a file over them; Validate checks the whole.
type Config struct {
	Listen      string `toml:"listen"`
	DB          string `toml:"db"`
	Synchronous string `toml:"synchronous"` // "FULL" (default) or "NORMAL"
	// CommitDelay: how long a group commit of fewer than 8 acks waits for
	// more (SQLite; 0, the default: none; at most 10ms).
	CommitDelay Duration `toml:"commit_delay"`
	// TrustedProxies are the peers (CIDR prefixes or addresses) whose
	// X-Forwarded-For names the client in the log; default loopback.
	TrustedProxies []string `toml:"trusted_proxies"`

	Ack       AckConfig       `toml:"ack"`
	Sweep     SweepConfig     `toml:"sweep"`
	Retention RetentionConfig `toml:"retention"`
	Slack     SlackConfig     `toml:"slack"`
	Filter    FilterConfig    `toml:"filter"`
	Commands  CommandsConfig  `toml:"commands"`
	Socket    SocketConfig    `toml:"socket_mode"`
	Metrics   MetricsConfig   `toml:"metrics"`
	Console   ConsoleConfig   `toml:"console"`
	Backfill  BackfillConfig  `toml:"backfill"`
	// OAuth, when present, serves many workspaces: the install flow and a
	// token per installation. Absent, one workspace with SLACK_BOT_TOKEN.
	OAuth     *OAuthConfig    `toml:"oauth"`
	Redeliver RedeliverConfig `toml:"redeliver"`
	Steps     StepsConfig     `toml:"steps"`
	Stream    StreamConfig    `toml:"stream"`
	Routes    []Route         `toml:"route"`

	// Source names where the config came from ("built-in defaults" or a path).
	Source string `toml:"-"`
	// Builtin is true when the built-in dry-run route is in use: no config
	// file was given, or the file has no [[route]].
	Builtin bool `toml:"-"`

	routeLines []int          // line of each [[route]] header, for error messages
	proxies    []netip.Prefix // TrustedProxies, parsed by Validate
	// backfillSet names the [backfill] keys the file sets that only mean
	// something with channels (on_start, replies, max_age, rate, limit).
	backfillSet []string

	// Warnings are what Validate found suspicious but not wrong (an event
	// type ackd does not know); serve logs them, config check prints them.
	Warnings []string `toml:"-"`
	// FileDB is the db the config file sets (resolved as Load resolves
	// it), "" when the file sets none: what CheckEnvDB holds ACKD_DB to.
	FileDB string `toml:"-"`
	// EnvDBWarning is CheckEnvDB's warning, kept for Validate to report
	// with its own.
	EnvDBWarning string `toml:"-"`
}

// AckConfig bounds the pre-ack intent transaction.
type AckConfig struct {
	Budget Duration `toml:"budget"`
}

// SweepConfig tunes the outbox sweep.
type SweepConfig struct {
	Interval    Duration `toml:"interval"`
	Batch       int      `toml:"batch"`
	Workers     int      `toml:"workers"`
	Lease       Duration `toml:"lease"`
	MaxAttempts int      `toml:"max_attempts"`
	Immediate   bool     `toml:"immediate"`
	Backoff     Duration `toml:"backoff"`
	MaxBackoff  Duration `toml:"max_backoff"`
}

// RetentionConfig says how long pruning keeps receipts and done rows.
type RetentionConfig struct {
	Receipts Duration `toml:"receipts"`
	Done     Duration `toml:"done"`
	Interval Duration `toml:"interval"`
}

// SlackConfig points at Slack.
type SlackConfig struct {
	APIURL    string `toml:"api_url"`
	BotUserID string `toml:"bot_user_id"`
	// ConfirmPosts: a post re-attempted after an outcome that may have
	// reached Slack first looks for its own metadata in the conversation
	// (default true; see sweep/confirm.go).
	ConfirmPosts bool `toml:"confirm_posts"`
}

// FilterConfig drops Events API events ackd will not act on (acked with 200).
type FilterConfig struct {
	Channels   []string `toml:"channels"`
	Subtypes   []string `toml:"subtypes"`
	IgnoreBots bool     `toml:"ignore_bots"`
}

// BackfillConfig is catch-up (package catchup): messages Slack never
// delivered, recovered from channel history (see backfill.go).
type BackfillConfig struct {
	// Channels to catch up; empty: catch-up is off (opt-in; the routes'
	// channel filters never turn it on).
	Channels []string `toml:"channels"`
	// OnStart: after serve starts, catch up each channel from its mark.
	OnStart bool `toml:"on_start"`
	// MaxAge: never read further back than this.
	MaxAge Duration `toml:"max_age"`
	// Rate: calls a minute to conversations.history and .replies together.
	Rate int `toml:"rate"`
	// Limit: messages asked for per page (Slack: at most 999; 15 for new
	// installs of apps distributed outside the Marketplace).
	Limit int `toml:"limit"`
	// Replies: read threads whose latest_reply is after the mark.
	Replies bool `toml:"replies"`
}

// CommandsConfig holds slash-command answers.
type CommandsConfig struct {
	UnhandledText string `toml:"unhandled_text"`
	FailedText    string `toml:"failed_text"`
	// UnknownText answers a command whose intent's commit got no answer
	// that the database could resolve in time: it may or may not run.
	UnknownText string `toml:"unknown_text"`
}

// SocketConfig is the Socket Mode ingress (see socket.go). The app-level
// token comes from SLACK_APP_TOKEN or SLACK_APP_TOKEN_FILE only.
type SocketConfig struct {
	Enabled     bool     `toml:"enabled"`
	Connections int      `toml:"connections"` // held at once, 1..10 (Slack's limit per app)
	Silence     Duration `toml:"silence"`     // a connection that receives nothing this long is replaced
}

// MetricsConfig places the operator endpoints.
type MetricsConfig struct {
	// Listen, when set, serves /metrics and /healthz on this address only,
	// so that the Slack-facing listener serves nothing but /slack/*. Empty:
	// both are served on listen, beside the Slack endpoints.
	Listen string `toml:"listen"`
}

// ConsoleConfig is [console]: the operator console (package console).
type ConsoleConfig struct {
	// Listen, when set, serves the console on this address only, behind
	// HTTP Basic auth (user ackd, ACKD_CONSOLE_PASSWORD); empty (the
	// default): no console.
	Listen string `toml:"listen"`
}

// OAuthConfig is [oauth]: the app is installed by OAuth in many workspaces
// (package oauth). Its secrets are SLACK_CLIENT_SECRET and ACKD_TOKEN_KEY.
type OAuthConfig struct {
	ClientID     string   `toml:"client_id"`
	Scopes       []string `toml:"scopes"`      // bot scopes
	UserScopes   []string `toml:"user_scopes"` // optional
	RedirectURL  string   `toml:"redirect_url"`
	InstallPath  string   `toml:"install_path"`  // default /slack/install
	RedirectPath string   `toml:"redirect_path"` // default /slack/oauth_redirect
	SuccessURL   string   `toml:"success_url"`
	FailureURL   string   `toml:"failure_url"`
	AuthorizeURL string   `toml:"authorize_url"` // default Slack's https://slack.com/oauth/v2/authorize
	// NotInstalledWait: how long a row of a team with no installation
	// waits before it parks (default 15m).
	NotInstalledWait Duration `toml:"not_installed_wait"`
}

// RedeliverConfig is [redeliver]: what an app behind redeliver routes needs
// besides the re-delivered requests.
type RedeliverConfig struct {
	// Passthrough lists paths (the app's own OAuth installer, e.g.
	// /slack/install and /slack/oauth_redirect) whose GET requests are
	// proxied to the app synchronously, query, cookies and redirects intact.
	Passthrough []string `toml:"passthrough"`
}

// StreamConfig is [stream]: what stream routes (an agent's answer streamed
// into the thread, sweep/stream.go) say besides the agent's text.
type StreamConfig struct {
	// Status is set in the thread before the agent is asked.
	Status string `toml:"status"`
	// FailedText, when set, is posted in the thread when a row parks
	// before any of its answer was shown; empty (the default): nothing.
	FailedText string `toml:"failed_text"`
	// MaxChars: the longest answer shown; a longer one is cut with a note.
	MaxChars int `toml:"max_chars"`
	// View is the agent experience `ackd manifest` declares for stream
	// routes: "agent_view" (Slack's only one for new apps since 2026-06-30;
	// "" means it) or the legacy "assistant_view" (deprecated from 2027-02).
	View string `toml:"view"`
	// Description is the agent's description in the manifest (at most 300
	// characters; "": manifest.DefaultAgentDescription).
	Description string `toml:"description"`
}

// streamEvents are the event types a stream route answers: a message (a
// mention, a DM or a thread message) or an assistant thread.
var streamEvents = []string{"app_mention", "message", "assistant_thread_started"}

// maxAgentDescription bounds [stream] description: Slack's manifest schema
// allows 300 characters for an agent's description.
const maxAgentDescription = 300

// didYouMean is ": did you mean \"x\"?" for the nearest of names, or "".
func didYouMean(s string, names []string) string {
	if n := Nearest(s, names); n != "" {
		return fmt.Sprintf(": did you mean %q?", n)
	}
	return ""
}

// maxStreamChars bounds [stream] max_chars: 200,000 characters are 17
// messages of Slack's 12,000.
const maxStreamChars = 200_000

// Route turns matching requests into one outbox row each.
type Route struct {
	Name string `toml:"name"`
	// Match: exactly one of Event, Command, or CallbackID/ActionID.
	Event      string   `toml:"event"`       // Events API inner event type; "*" = every event
	Events     []string `toml:"events"`      // several event types, e.g. ["message", "app_mention"]
	Channel    string   `toml:"channel"`     // optional channel filter (event, command or interaction channel)
	Command    string   `toml:"command"`     // "/deploy"; "*" = every slash command
	CallbackID string   `toml:"callback_id"` // "*" = every interaction payload, with or without a callback_id
	ActionID   string   `toml:"action_id"`
	Key        string   `toml:"key"` // "event" (default) or "message"

	Effect  string   `toml:"effect"`
	Timeout Duration `toml:"timeout"`
	AckText string   `toml:"ack_text"`
	// Description says what a slash command does, in Slack's command list,
	// or what a workflow step does, in Workflow Builder; `ackd manifest`
	// writes it into the app manifest (command and function routes only).
	Description string `toml:"description"`
	// Title, Inputs and Outputs declare a workflow step (a route with
	// event = "function_executed" and its callback_id) for the app
	// manifest: its name in Workflow Builder and its parameters (steps.go).
	Title   string                   `toml:"title"`
	Inputs  map[string]FunctionParam `toml:"inputs"`
	Outputs map[string]FunctionParam `toml:"outputs"`

	URL             string `toml:"url"`        // forward
	ToChannel       string `toml:"to_channel"` // post/update: target channel (template); default the event's
	Text            string `toml:"text"`       // post/update/respond (template)
	Blocks          string `toml:"blocks"`     // post/update/respond: Block Kit JSON array
	Thread          bool   `toml:"thread"`     // post: reply in the event's thread
	Reaction        string `toml:"reaction"`   // react
	TS              string `toml:"ts"`         // update: message ts (template); default the event's
	ResponseType    string `toml:"response_type"`
	ReplaceOriginal bool   `toml:"replace_original"`

	signed      bool               // forward, step: this daemon signs (ACKD_FORWARD_SECRET is set); recorded in the row
	fromRequest bool               // its rows are performed from the stored request (needsRequest), set by New
	ackTmpl     *template.Template // ack_text when it is a template, parsed and checked by Validate
}

// source is the kind of request a route matches (sweep.SourceEvent, …).
func (r *Route) source() string {
	switch {
	case r.Command != "":
		return sweep.SourceCommand
	case r.TakesEvents():
		return sweep.SourceEvent
	case r.CallbackID != "" || r.ActionID != "":
		return sweep.SourceInteraction
	default:
		return sweep.SourceEvent
	}
}

// Effects ackd can perform.
var knownEffects = []string{"forward", "post", "react", "update", "respond", "log", "redeliver", sweep.EffectStep, "stream"}

// DefaultRouteName is the built-in dry-run route.
const DefaultRouteName = "log-every-event"

// Default returns the built-in configuration: a dry run that logs every
// event_callback on 127.0.0.1:3000 with ./ackd.db.
func Default() Config {
	return Config{
		Listen:         "127.0.0.1:3000",
		DB:             "./ackd.db",
		Synchronous:    "FULL",
		TrustedProxies: slices.Clone(DefaultTrustedProxies),
		Ack:            AckConfig{Budget: Duration{2 * time.Second}},
		Sweep: SweepConfig{
			Interval: Duration{5 * time.Second}, Batch: 100, Workers: 4,
			Lease: Duration{10 * time.Minute}, MaxAttempts: 8, Immediate: true,
			Backoff: Duration{10 * time.Second}, MaxBackoff: Duration{time.Hour},
		},
		Retention: RetentionConfig{
			Receipts: Duration{48 * time.Hour}, Done: Duration{168 * time.Hour},
			Interval: Duration{time.Hour},
		},
		Slack:  SlackConfig{ConfirmPosts: true},
		Filter: FilterConfig{Subtypes: []string{""}, IgnoreBots: true},
		Commands: CommandsConfig{
			UnhandledText: "This command is not handled here.",
			FailedText:    "Sorry, that could not be recorded. Please try again.",
			UnknownText:   "Sorry, I could not confirm that this was recorded: it may still run. Check before trying again.",
		},
		Socket: SocketConfig{Connections: 2, Silence: Duration{30 * time.Second}},
		Steps:  StepsConfig{Deadline: Duration{DefaultStepDeadline}},
		Stream: StreamConfig{Status: sweep.DefaultStreamStatus, MaxChars: sweep.DefaultStreamMaxChars},
		Backfill: BackfillConfig{OnStart: true, MaxAge: Duration{24 * time.Hour}, Rate: 20, Limit: 200,
			Replies: true},
		Routes:  []Route{{Name: DefaultRouteName, Event: "*", Effect: "log"}},
		Source:  "built-in defaults",
		Builtin: true,
	}
}

// Load reads a TOML config file over the defaults and validates it. Unknown
// keys and invalid values fail with the key and line.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.Source = path
	// A relative db in the file means "beside this file", wherever the
	// command runs from (`ackd status --config /etc/ackd/ackd.toml` in
	// another directory must find the same database). The built-in default,
	// ACKD_DB and --db stay relative to the working directory.
	var set struct {
		DB *string `toml:"db"`
	}
	if toml.Unmarshal(b, &set) == nil && set.DB != nil {
		if !IsPostgres(cfg.DB) && !filepath.IsAbs(cfg.DB) {
			cfg.DB = filepath.Join(filepath.Dir(path), cfg.DB)
		}
		cfg.FileDB = cfg.DB
	}
	return cfg, nil
}

var routeHeader = regexp.MustCompile(`(?m)^[ \t]*\[\[[ \t]*route[ \t]*\]\]`)

// Parse decodes TOML over the defaults and validates the result. A file that
// has routes replaces the built-in dry-run route; a file without any keeps it
// (and Builtin stays true, so the daemon announces the dry run).
func Parse(b []byte) (Config, error) {
	cfg := Default()
	cfg.Routes = nil
	// Unknown keys and values of the wrong kind, in words (configlint.go).
	if err := lintTOML(b); err != nil {
		return Config{}, err
	}
	dec := toml.NewDecoder(bytes.NewReader(b)).DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			var msgs []string
			for _, e := range sm.Errors {
				row, _ := e.Position()
				msgs = append(msgs, fmt.Sprintf("line %d: unknown key %q", row, strings.Join(e.Key(), ".")))
			}
			return Config{}, errors.New(strings.Join(msgs, "; "))
		}
		return Config{}, decodeError(err)
	}
	if len(cfg.Routes) == 0 {
		cfg.Routes = Default().Routes
	} else {
		cfg.Builtin = false
	}
	cfg.backfillSet = backfillKeysSet(b)
	for i := range cfg.Routes {
		// One spelling of a name everywhere: keys, pauses and the CLI's
		// arguments are compared as NFC (RouteName).
		cfg.Routes[i].Name = RouteName(cfg.Routes[i].Name)
	}
	for _, loc := range routeHeader.FindAllIndex(b, -1) {
		cfg.routeLines = append(cfg.routeLines, bytes.Count(b[:loc[0]], []byte("\n"))+1)
	}
	err := cfg.Validate()
	return cfg, err
}

func (c *Config) routeWhere(i int) string {
	name := c.Routes[i].Name
	if i < len(c.routeLines) {
		return fmt.Sprintf("line %d: route %q", c.routeLines[i], name)
	}
	return fmt.Sprintf("route %d %q", i+1, name)
}

// Validate checks the whole configuration and names the offending key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	c.Warnings = nil
	// What 0.1.0 accepted and a check added since finds suspicious is a
	// warning (serve logs it, config check prints it), never a refusal: an
	// upgrade must not stop a config that started before (DESIGN §11).
	warn := func(format string, a ...any) { c.Warnings = append(c.Warnings, fmt.Sprintf(format, a...)) }
	if c.EnvDBWarning != "" {
		warn("%s", c.EnvDBWarning)
	}
	for _, ch := range c.Filter.Channels {
		if msg := checkChannel("filter.channels:", ch); msg != "" {
			warn("%s", msg)
		}
	}

	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen: %q is not host:port", c.Listen)
	}
	if c.Metrics.Listen != "" {
		if _, port, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			bad("metrics.listen: %q is not host:port", c.Metrics.Listen)
		} else if c.Metrics.Listen == c.Listen && port != "0" {
			bad("metrics.listen: %q is also listen; give the metrics listener an address of its own, or leave it empty to serve /metrics and /healthz on listen", c.Listen)
		}
	}
	if c.Console.Listen != "" {
		if host, port, err := net.SplitHostPort(c.Console.Listen); err != nil {
			bad("console.listen: %q is not host:port", c.Console.Listen)
		} else if port != "0" && (c.Console.Listen == c.Listen || c.Console.Listen == c.Metrics.Listen) {
			bad("console.listen: %q is also listen or metrics.listen; the console is served on an address of its own", c.Console.Listen)
		} else if !loopback(host) {
			warn("console.listen: %q is not a loopback address: the console speaks plain HTTP, so its password and pages cross the network in the clear; listen on 127.0.0.1 and put a TLS proxy in front (the commented console block of systemd/Caddyfile), or reach it over an SSH tunnel", c.Console.Listen)
		}
	}
	if c.DB == "" {
		bad("db: empty")
	}
	if p, err := parseTrustedProxies(c.TrustedProxies); err != nil {
		bad("trusted_proxies: %v", err)
	} else {
		c.proxies = p
	}
	switch strings.ToUpper(c.Synchronous) {
	case "FULL", "NORMAL":
		c.Synchronous = strings.ToUpper(c.Synchronous)
	default:
		bad("synchronous: %q must be FULL or NORMAL", c.Synchronous)
	}
	if d := c.CommitDelay.Duration; d < 0 || d > 10*time.Millisecond {
		bad("commit_delay: %s must be between 0 and 10ms", d)
	}
	if b := c.Ack.Budget.Duration; b <= 0 || b >= 3*time.Second {
		bad("ack.budget: %s must be above 0 and below Slack's 3s deadline", b)
	}
	positive := func(key string, d Duration) {
		if d.Duration <= 0 {
			bad("%s: %s must be positive", key, d.Duration)
		}
	}
	positive("sweep.interval", c.Sweep.Interval)
	positive("sweep.lease", c.Sweep.Lease)
	positive("sweep.backoff", c.Sweep.Backoff)
	positive("sweep.max_backoff", c.Sweep.MaxBackoff)
	positive("retention.receipts", c.Retention.Receipts)
	positive("retention.done", c.Retention.Done)
	positive("retention.interval", c.Retention.Interval)
	if c.Sweep.Batch <= 0 {
		bad("sweep.batch: %d must be positive", c.Sweep.Batch)
	}
	if c.Sweep.Workers <= 0 {
		bad("sweep.workers: %d must be positive", c.Sweep.Workers)
	}
	if c.Sweep.MaxAttempts <= 0 {
		bad("sweep.max_attempts: %d must be positive", c.Sweep.MaxAttempts)
	}
	if n := c.Socket.Connections; n < 1 || n > 10 {
		bad("socket_mode.connections: %d must be between 1 and 10 (Slack allows at most 10 per app)", n)
	}
	if d := c.Socket.Silence.Duration; d < 100*time.Millisecond {
		bad("socket_mode.silence: %s must be at least 100ms (Slack pings every few seconds)", d)
	}
	if c.Retention.Receipts.Duration < 10*time.Minute {
		bad("retention.receipts: %s is shorter than Slack's retry window (about 6 minutes)", c.Retention.Receipts.Duration)
	}
	if w := c.backfillReachWarning(); w != "" {
		c.Warnings = append(c.Warnings, w)
	}

	if strings.TrimSpace(c.Stream.Status) == "" {
		bad("stream.status: empty; it is the status shown in the thread while the agent works (default %q)", sweep.DefaultStreamStatus)
	}
	switch c.Stream.View {
	case "", "agent_view", "assistant_view":
	default:
		bad("stream.view: %q is not \"agent_view\" (new apps) or \"assistant_view\" (the legacy view)%s", c.Stream.View,
			didYouMean(c.Stream.View, []string{"agent_view", "assistant_view"}))
	}
	if n := utf8.RuneCountInString(c.Stream.Description); n > maxAgentDescription {
		bad("stream.description: %d characters; Slack's manifest takes at most %d", n, maxAgentDescription)
	}
	if n := c.Stream.MaxChars; n < 1 || n > maxStreamChars {
		bad("stream.max_chars: %d must be between 1 and %d", n, maxStreamChars)
	}

	errs = append(errs, c.validateBackfill(warn)...)
	c.validateOAuth(bad)
	c.validateSteps(bad, warn)

	seen := map[string]int{}
	for i := range c.Routes {
		r := &c.Routes[i]
		where := c.routeWhere(i)
		if r.Name == "" {
			bad("%s: name is required", where)
		} else if j, dup := seen[r.Name]; dup {
			bad("%s: duplicate route name (first at %s)", where, c.routeWhere(j))
		} else {
			seen[r.Name] = i
		}
		if strings.ContainsAny(r.Name, ": \t") {
			bad("%s: name must not contain ':' or spaces (it is part of the idempotency key)", where)
		}
		if strings.Contains(r.Name, "#") {
			// A replay's key is "<original key>#r<N>": a name with '#'
			// would read as a replay of another route's rows.
			bad("%s: name %q must not contain '#' (replays are keyed <key>#r<N>, so such a name reads as a replay of route %q); rename the route, e.g. %q",
				where, r.Name, r.Name[:strings.Index(r.Name, "#")], strings.ReplaceAll(r.Name, "#", "-"))
		}
		if r.Event != "" && len(r.Events) > 0 {
			bad("%s: set event or events, not both", where)
		}
		if slices.Contains(r.Events, "") || slices.Contains(r.Events, "*") {
			bad("%s: events lists event types; use event = \"*\" for every event", where)
		}
		for _, ev := range append([]string{r.Event}, r.Events...) {
			if ev == "" {
				continue
			}
			if msg := checkEventType(ev); msg != "" {
				warn("%s: %s", where, msg)
			}
		}
		if r.Channel != "" {
			if msg := checkChannel("channel", r.Channel); msg != "" {
				warn("%s: %s", where, msg)
			}
		}
		if msg := r.channelMissing(); msg != "" {
			warn("%s: %s", where, msg)
		}
		// Slack writes a reaction :eyes:, reactions.add takes "eyes": both
		// are accepted, the colons dropped.
		if len(r.Reaction) > 2 && strings.HasPrefix(r.Reaction, ":") && strings.HasSuffix(r.Reaction, ":") {
			r.Reaction = r.Reaction[1 : len(r.Reaction)-1]
		}
		if strings.ContainsAny(r.Reaction, " \t") || strings.HasPrefix(r.Reaction, ":") || strings.HasSuffix(r.Reaction, ":") {
			warn("%s: reaction %q is not an emoji name such as \"eyes\" (or \":eyes:\"): Slack refuses it (invalid_name) and the route's rows park", where, r.Reaction)
		}
		triggers := 0
		interaction := r.CallbackID + r.ActionID
		if r.FunctionRoute() {
			interaction = r.ActionID // callback_id names the function (steps.go)
		}
		for _, t := range []string{r.Event + strings.Join(r.Events, ""), r.Command, interaction} {
			if t != "" {
				triggers++
			}
		}
		if triggers != 1 {
			bad("%s: set exactly one of event (or events), command, or callback_id/action_id (callback_id goes with event only as event = \"function_executed\": the function's callback_id)", where)
		}
		c.validateStepRoute(r, where, bad)
		if r.AckText != "" && r.Command == "" {
			bad("%s: ack_text answers a slash command; this route matches no command", where)
		}
		if r.Description != "" && r.Command == "" && !r.FunctionRoute() {
			bad("%s: description describes a slash command in the app manifest; this route matches no command", where)
		}
		if n := len([]rune(r.Description)); n > 2000 {
			bad("%s: description is %d characters; Slack allows at most 2000", where, n)
		}
		// A key that the route's effect does not use is a mistake an
		// operator would not notice until the effect misbehaves.
		for key, use := range map[string]struct {
			set     bool
			effects []string
		}{
			"url":              {r.URL != "", []string{"forward", "redeliver", sweep.EffectStep, "stream"}},
			"reaction":         {r.Reaction != "", []string{"react"}},
			"thread":           {r.Thread, []string{"post"}},
			"ts":               {r.TS != "", []string{"update"}},
			"to_channel":       {r.ToChannel != "", []string{"post", "update"}},
			"text":             {r.Text != "", []string{"post", "update", "respond"}},
			"blocks":           {r.Blocks != "", []string{"post", "update", "respond"}},
			"response_type":    {r.ResponseType != "", []string{"respond"}},
			"replace_original": {r.ReplaceOriginal, []string{"respond"}},
		} {
			if use.set && !slices.Contains(use.effects, r.Effect) {
				bad("%s: %s is not used by effect %s (only by %s)", where, key, r.Effect, strings.Join(use.effects, ", "))
			}
		}
		if r.Command != "" && r.Command != "*" && !strings.HasPrefix(r.Command, "/") {
			bad("%s: command %q must start with / (or be \"*\" for every command)", where, r.Command)
		}
		switch r.Key {
		case "", "event":
			r.Key = "event"
		case "message":
			if r.Event == "" && len(r.Events) == 0 {
				bad("%s: key = \"message\" applies to Events API routes only", where)
			}
		default:
			bad("%s: key %q must be \"event\" or \"message\"", where, r.Key)
		}
		if !slices.Contains(knownEffects, r.Effect) {
			bad("%s: effect %q is not one of %s", where, r.Effect, strings.Join(knownEffects, ", "))
		}
		if r.Timeout.Duration == 0 {
			r.Timeout.Duration = 10 * time.Second
			if r.Effect == "stream" {
				// An agent's answer takes longer than a post: 5m, or half
				// a shorter lease.
				r.Timeout.Duration = min(sweep.DefaultStreamTimeout, c.Sweep.Lease.Duration/2)
			}
		}
		if r.Timeout.Duration < 0 {
			bad("%s: timeout %s must be positive", where, r.Timeout.Duration)
		}
		if r.Timeout.Duration >= c.Sweep.Lease.Duration {
			bad("%s: timeout %s must be shorter than sweep.lease %s, or a slow effect would run twice at once",
				where, r.Timeout.Duration, c.Sweep.Lease.Duration)
		}
		switch r.Effect {
		case "forward", "redeliver", sweep.EffectStep, "stream":
			if r.URL == "" {
				bad("%s: effect %s needs url", where, r.Effect)
			}
		case "react":
			if r.Reaction == "" {
				bad("%s: effect react needs reaction", where)
			}
		case "post", "update", "respond":
			if r.Text == "" && r.Blocks == "" {
				bad("%s: effect %s needs text or blocks", where, r.Effect)
			}
		}
		if r.Effect == "stream" {
			evs := append([]string{r.Event}, r.Events...)
			if r.Event == "" && len(r.Events) == 0 {
				evs = nil
			}
			if len(evs) == 0 || slices.ContainsFunc(evs, func(ev string) bool { return ev != "" && !slices.Contains(streamEvents, ev) }) {
				bad("%s: effect stream answers in a thread: use it with event or events among %s", where, strings.Join(streamEvents, ", "))
			}
		}
		if r.Effect == "respond" && (r.Event != "" || len(r.Events) > 0) {
			bad("%s: effect respond needs a response_url: use it with command or callback_id/action_id routes", where)
		}
		switch r.ResponseType {
		case "", "ephemeral", "in_channel":
		default:
			bad("%s: response_type %q must be \"ephemeral\" or \"in_channel\"", where, r.ResponseType)
		}
		if r.Blocks != "" && !jsonArray(r.Blocks) {
			bad("%s: blocks must be a JSON array of Block Kit blocks", where)
		}
		// Each template is executed once over sample data, so that a field
		// that does not exist stops startup instead of parking every row.
		for _, key := range []string{"text", "to_channel", "ts", "ack_text"} {
			src := map[string]string{"text": r.Text, "to_channel": r.ToChannel, "ts": r.TS, "ack_text": r.AckText}[key]
			if !strings.Contains(src, "{{") {
				continue
			}
			t, err := sweep.CheckTemplate(r.Name, key, src, r.source())
			var te *sweep.TemplateError
			switch {
			case errors.As(err, &te):
				bad("%s: %s: %s", where, key, te.Reason)
			case err != nil:
				bad("%s: %s: %v", where, key, err)
			case key == "ack_text":
				r.ackTmpl = t
			}
		}
	}
	// The example config's placeholders, each by its key (a warning:
	// a config that holds one starts, and does nothing with it).
	c.Warnings = append(c.Warnings, c.placeholderWarnings()...)
	return errors.Join(errs...)
}

// ApplyEnv overrides listen, db and the Slack API URL from the environment
// (ACKD_LISTEN, ACKD_DB, SLACK_API_URL). Flags are applied after this.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if v := getenv("ACKD_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := getenv("ACKD_DB"); v != "" {
		c.DB = v
	}
	if v := getenv("SLACK_API_URL"); v != "" {
		c.Slack.APIURL = v
	}
}

// CheckEnvDB holds ACKD_DB (env) to the config file's db. Either alone is
// fine, and so are both naming the same file. With both set ACKD_DB wins, as
// it did in ackd 0.1.0, whose unit set it: a config edited to
// db = "postgres://…" then left each replica on a SQLite file of its own,
// without a word (issue 29.8). So a disagreement that involves PostgreSQL is
// an error, naming both; two SQLite files is a warning (0.1.0 started such an
// install, on ACKD_DB's file, and an upgrade must still start it). --db and
// ACKD_DB_FILE are explicit choices and are not held to it (the caller skips
// the check).
func (c Config) CheckEnvDB(env string) (warning string, err error) {
	if env == "" || c.FileDB == "" || sameDB(env, c.FileDB) {
		return "", nil
	}
	both := fmt.Sprintf("ACKD_DB=%s and db = %q in %s name different databases", RedactDB(env), RedactDB(c.FileDB), c.Source)
	const fix = "Remove ACKD_DB from the environment (ackd 0.1.0's unit, a drop-in or your own unit may set it; `systemctl cat ackd` shows it), " +
		"or remove db from the config file; --db or ACKD_DB_FILE choose the database explicitly"
	if IsPostgres(env) || IsPostgres(c.FileDB) {
		return "", fmt.Errorf("%s, and ACKD_DB would win: keep one. %s", both, fix)
	}
	if exists(c.FileDB) && !exists(env) {
		// ACKD_DB would win and name a file that is not there: serve
		// would create an empty database beside the data and run on it.
		return "", fmt.Errorf("%s: db = %q exists, ACKD_DB=%s does not, and ACKD_DB would win: serve would start on a new, empty database beside your data. %s",
			both, c.FileDB, env, fix)
	}
	return fmt.Sprintf("%s: ACKD_DB wins, as in ackd 0.1.0, and this ackd uses %s. %s", both, env, fix), nil
}

// sameDB reports whether two db settings name the same database: the same
// URL, or SQLite paths that are the same file once made absolute (and, when
// they exist, once symlinks are followed).
func sameDB(a, b string) bool {
	if a == b {
		return true
	}
	if IsPostgres(a) || IsPostgres(b) {
		return false
	}
	abs := func(p string) string {
		p, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			return filepath.Join(dir, filepath.Base(p))
		}
		return p
	}
	return abs(a) == abs(b)
}

// Secret reads a secret that the command cannot do without (send's and
// bench's signing secret) from the environment variable name, or from the
// file named by name+"_FILE" (systemd credentials); surrounding whitespace
// is trimmed. It is an error to set both, and an empty file is an error
// naming it. serve and the other commands read theirs with ReadSecret, for
// which an empty file means "not set".
func Secret(name string, getenv func(string) string) (string, error) {
	v, empty, err := ReadSecret(name, getenv)
	if empty != "" {
		return "", fmt.Errorf("%s_FILE names %s, which is empty: write the secret into it", name, empty)
	}
	return v, err
}

// ReadSecret reads a secret as Secret does, except that a file that is
// empty (or only whitespace) means the secret is not set: v is "" and
// emptyFile names the file, so that a check can say so. The documented
// install writes an empty credential file for every feature it does not
// use (systemd refuses to start a unit whose LoadCredential= source is
// missing); whether an empty one is a mistake depends on the configuration,
// and Secrets.Needed decides it.
func ReadSecret(name string, getenv func(string) string) (v, emptyFile string, err error) {
	v, file := getenv(name), getenv(name+"_FILE")
	switch {
	case v != "" && file != "":
		return "", "", fmt.Errorf("set only one of %s and %s_FILE", name, name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", "", fmt.Errorf("%s_FILE: %w", name, err)
		}
		if v := strings.TrimSpace(string(b)); v != "" {
			return v, "", nil
		}
		return "", file, nil
	default:
		return strings.TrimSpace(v), "", nil
	}
}

func jsonArray(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "[") && json.Valid([]byte(s))
}

// Proxies is trusted_proxies, parsed by Validate.
func (c *Config) Proxies() []netip.Prefix { return c.proxies }

// RouteName is a route name as ackd compares and stores it: Unicode NFC, so
// that a name typed or pasted in another normal form (NFD, as some systems
// write accented letters) names the same route in the config, its rows'
// keys, pauses and every command's argument.
func RouteName(name string) string { return norm.NFC.String(name) }

// exists reports whether an SQLite database file is there (an error other
// than "not found", such as a permission problem, counts as there: the
// database is not judged missing on a guess).
func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
