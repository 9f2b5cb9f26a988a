package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ackd/ackd/sweep"
	"github.com/pelletier/go-toml/v2"
)

// Bounds of [backfill] rate and limit.
const (
	maxBackfillRate  = 6000 // calls a minute; Slack's busiest tier allows 100+
	maxBackfillLimit = 999  // Slack's maximum page size
)

var channelID = regexp.MustCompile(`^[CGD][A-Z0-9]+$`)

// BackfillChannels is the channels catch-up reads: backfill.channels and
// nothing else. Catch-up is opt-in: with none listed it is off (no marks,
// no catch-up at start), whatever the routes' channel filters say.
func (c *Config) BackfillChannels() []string {
	return c.Backfill.Channels
}

// takesMessages reports whether an Events API route takes message or
// app_mention events, the ones catch-up recovers.
func (r *Route) takesMessages() bool {
	return r.Command == "" && r.CallbackID == "" && r.ActionID == "" &&
		(r.MatchesEvent("message") || r.MatchesEvent("app_mention"))
}

// catchUpFeeds reports whether catch-up of channels would hand r
// recovered messages.
func (r *Route) catchUpFeeds(channels []string) bool {
	return r.takesMessages() && (r.Channel == "" || slices.Contains(channels, r.Channel))
}

// recoverable reports whether catch-up hands r recovered messages at all: a
// route keyed by event_id is left out (see validateBackfill).
func (r *Route) Recoverable() bool {
	return r.Key == "message" && r.takesMessages()
}

// validateBackfill refuses [backfill] values that cannot work (the section
// is newer than 0.1.0, so no config that started before has one) and warns
// about a route catch-up cannot serve: one on a caught-up channel that keys
// by event_id. A recovered message has no event_id, and its live delivery
// (or a Delayed Events redelivery with a new event_id) would be keyed apart
// from it, so both would act: catch-up leaves such a route out, and the
// warning says how to bring it in.
func (c *Config) validateBackfill(warn func(format string, a ...any)) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	b := c.Backfill
	if b.MaxAge.Duration <= 0 {
		bad("backfill.max_age: %s must be positive (how far back catch-up may read, e.g. \"24h\")", b.MaxAge.Duration)
	}
	if b.Rate < 1 || b.Rate > maxBackfillRate {
		bad("backfill.rate: %d must be between 1 and %d calls a minute (Slack: internal apps Tier 3, 50+ a minute; new installs of apps distributed outside the Marketplace 1 a minute)", b.Rate, maxBackfillRate)
	}
	if b.Limit < 1 || b.Limit > maxBackfillLimit {
		bad("backfill.limit: %d must be between 1 and %d messages a page", b.Limit, maxBackfillLimit)
	}
	for _, ch := range b.Channels {
		if !channelID.MatchString(ch) {
			bad("backfill.channels: %q is not a Slack channel ID (C…, G… or D…; channel details → About)", ch)
		}
	}
	channels := c.BackfillChannels()
	if len(channels) == 0 {
		if len(c.backfillSet) > 0 {
			// Catch-up is opt-in by its channels: these keys alone
			// turn nothing on, which an operator who set them expects.
			warn("backfill: %s set, but backfill.channels lists no channel, so catch-up is off and %s nothing; list the channels to recover in backfill.channels (channel IDs, e.g. [\"C0123456789\"]), or remove the keys",
				strings.Join(c.backfillSet, ", "), plural(len(c.backfillSet), "it changes", "they change"))
		}
		return errs
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Key != "message" && r.catchUpFeeds(channels) {
			warn("%s: catch-up ([backfill] channels %s) does not hand this route recovered messages: it keys rows by event_id, which a recovered message lacks, so a recovered message and its live delivery would both act. Set key = \"message\" (one row per {channel}:{ts}) to have catch-up recover its messages",
				c.routeWhere(i), strings.Join(channels, ", "))
		}
	}
	return errs
}

// prepareRoutes decides once what each route's rows carry: whether a
// forward (or a stream's question to its agent) is signed (ACKD_FORWARD_SECRET is set) and whether the row is
// performed from the stored request.
func PrepareRoutes(routes []Route, sec Secrets) []Route {
	routes = slices.Clone(routes)
	for i := range routes {
		r := &routes[i]
		r.signed = (r.Effect == "forward" || r.Effect == sweep.EffectStep || r.Effect == "stream") && sec.ForwardSecret != ""
		r.fromRequest = r.needsRequest()
	}
	return routes
}

// backfillKeysSet names the [backfill] keys the TOML document sets that
// mean something only when backfill.channels lists channels, when it does
// not set backfill.channels at all.
func backfillKeysSet(doc []byte) []string {
	var probe struct {
		Backfill map[string]any `toml:"backfill"`
	}
	if err := toml.Unmarshal(doc, &probe); err != nil {
		return nil
	}
	if _, ok := probe.Backfill["channels"]; ok {
		// channels = [] says it: catch-up is off on purpose (the shipped
		// systemd/ackd.toml keeps its settings beside an empty list).
		return nil
	}
	var set []string
	for _, k := range []string{"on_start", "replies", "max_age", "rate", "limit"} {
		if _, ok := probe.Backfill[k]; ok {
			set = append(set, "backfill."+k)
		}
	}
	return set
}
