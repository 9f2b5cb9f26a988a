package config

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

func MessageLike(t string) bool { return t == "message" || t == "app_mention" }

// installFacts adds, with [oauth], the installation whose token performs
// the rows: without [oauth] rows stay as they were.
func (c *Config) InstallFacts(f sweep.Facts, enterprise, install string) sweep.Facts {
	if c.OAuth != nil {
		f.Enterprise, f.Install = enterprise, install
	}
	return f
}

// matchesEvent reports whether an Events API route takes an event type.
func (r *Route) MatchesEvent(typ string) bool {
	return r.Event == "*" || (r.Event != "" && r.Event == typ) || slices.Contains(r.Events, typ)
}

// commandRoutes returns the routes matching a slash command in a channel.
func (c *Config) CommandRoutes(cmd, channel string) []*Route {
	var out []*Route
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Command != "" && (r.Command == "*" || r.Command == cmd) && (r.Channel == "" || r.Channel == channel) {
			out = append(out, r)
		}
	}
	return out
}

// row builds the outbox row a route makes for one request. No row carries a
// copy of the request: one whose effect needs it (redeliver, forward, a
// template over .Event) names the one stored with the intent
// (store.Intent.Request, keyed by facts.EventID, once however many routes
// need it), and the sweep gets it back with the claimed row. The others
// carry only the facts and parameters they are performed from.
func (r *Route) RowFor(key, source string, facts sweep.Facts) (store.NewRow, error) {
	return r.RowOf(key, r.PayloadFor(source, facts))
}

// payload is the payload a route's row carries for one request.
func (r *Route) PayloadFor(source string, facts sweep.Facts) sweep.Payload {
	p := sweep.Payload{
		Route:     r.Name,
		Source:    source,
		TimeoutMS: r.Timeout.Milliseconds(),
		Params: sweep.Params{
			Channel: r.ToChannel, Text: r.Text, Thread: r.Thread, Reaction: r.Reaction, TS: r.TS,
			URL: r.URL, Signed: r.signed, ResponseType: r.ResponseType, ReplaceOriginal: r.ReplaceOriginal,
		},
		Facts: facts,
	}
	if r.Blocks != "" {
		p.Params.Blocks = json.RawMessage(r.Blocks)
	}
	return p
}

// rowOf is the route's row with payload p.
func (r *Route) RowOf(key string, p sweep.Payload) (store.NewRow, error) {
	reqID := ""
	if r.fromRequest {
		reqID = p.Facts.EventID
	}
	s, err := p.Encode()
	if err != nil {
		return store.NewRow{}, err
	}
	return store.NewRow{Key: key, Effect: r.Effect, Payload: s, RequestID: reqID}, nil
}

// needsRequest reports whether the route's rows are performed from Slack's
// request itself: redeliver sends its bytes, forward and stream its envelope, and a
// template naming .Event reads the inner event.
func (r *Route) needsRequest() bool {
	if r.Effect == "redeliver" || r.Effect == "forward" || r.Effect == sweep.EffectStep || r.Effect == "stream" {
		return true
	}
	for _, t := range []string{r.Text, r.ToChannel, r.TS} {
		if strings.Contains(t, ".Event") {
			return true
		}
	}
	return false
}

// RenderAckText renders the route's ack_text over the command's facts. It runs
// before the ack, so it must not fail it: a template that fails on this
// request answers the literal text, and the error is logged.
func (r *Route) RenderAckText(facts sweep.Facts, log *slog.Logger) string {
	if r.ackTmpl == nil {
		return r.AckText
	}
	s, err := sweep.Execute(r.ackTmpl, r.Name, "ack_text", facts.Data())
	if err != nil {
		log.Warn("ack_text did not render; answered the literal text", "route", r.Name, "err", err)
		return r.AckText
	}
	return s
}
