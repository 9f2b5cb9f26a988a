package daemon

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"

	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Decisions about an authenticated request that ackd does not act on. Each
// is answered 200: a retry would carry the same payload to the same answer.
const (
	ignoredChannel  = "other_channel"
	ignoredSubtype  = "unhandled_subtype"
	ignoredBot      = "bot_message"
	ignoredOwn      = "own_message"
	ignoredUnrouted = "unrouted"
)

func messageLike(t string) bool { return t == "message" || t == "app_mention" }

// eventRows applies the filters and routes to an event_callback. It returns
// the outbox rows to enqueue, or the reason the event is ignored.
func (c *Config) eventRows(env Envelope) ([]store.NewRow, string, error) {
	in := env.Inner
	f := c.Filter
	if len(f.Channels) > 0 && in.Channel != "" && !slices.Contains(f.Channels, in.Channel) {
		return nil, ignoredChannel, nil
	}
	if messageLike(in.Type) {
		// Bots first: a bot's message (subtype bot_message, or any message
		// carrying bot_id) is ignored as one, whatever its subtype.
		if f.IgnoreBots && in.BotID != "" {
			return nil, ignoredBot, nil
		}
		if in.Type == "message" && !slices.Contains(f.Subtypes, in.Subtype) {
			return nil, ignoredSubtype, nil
		}
		if c.Slack.BotUserID != "" && in.User == c.Slack.BotUserID {
			return nil, ignoredOwn, nil
		}
	}
	var rows []store.NewRow
	facts := c.installFacts(env.Facts(), env.Enterprise, env.Install)
	for i := range c.Routes {
		r := &c.Routes[i]
		if !r.matchesEvent(in.Type) || (r.Channel != "" && r.Channel != in.Channel) {
			continue
		}
		if r.functionRoute() {
			if !r.matchesFunction(in.FunctionID) {
				continue
			}
			fr, err := c.stepRows(r, env, facts)
			if err != nil {
				return nil, "", err
			}
			rows = append(rows, fr...)
			continue
		}
		key := env.EventID + ":" + r.Name
		// The message fact identifies a message, not a reaction to it: only
		// message-like events share a row by it.
		if r.Key == "message" && messageLike(in.Type) && in.Channel != "" && in.TS != "" {
			key = in.Channel + ":" + in.TS + ":" + r.Name
		}
		row, err := r.row(key, sweep.SourceEvent, facts)
		if err != nil {
			return nil, "", err
		}
		rows = append(rows, row)
	}
	if in.Type == sweep.EventAgentSessionStopped {
		// A user's Stop cancels the thread's stream rows, whatever the
		// routes: ackd's own row records it (sweep/stop.go).
		row, err := sweep.StopRow(facts)
		if err != nil {
			return nil, "", err
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, ignoredUnrouted, nil
	}
	return rows, "", nil
}

// installFacts adds, with [oauth], the installation whose token performs
// the rows: without [oauth] rows stay as they were.
func (c *Config) installFacts(f sweep.Facts, enterprise, install string) sweep.Facts {
	if c.OAuth != nil {
		f.Enterprise, f.Install = enterprise, install
	}
	return f
}

// matchesEvent reports whether an Events API route takes an event type.
func (r *Route) matchesEvent(typ string) bool {
	return r.Event == "*" || (r.Event != "" && r.Event == typ) || slices.Contains(r.Events, typ)
}

// commandRoutes returns the routes matching a slash command in a channel.
func (c *Config) commandRoutes(cmd, channel string) []*Route {
	var out []*Route
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Command != "" && (r.Command == "*" || r.Command == cmd) && (r.Channel == "" || r.Channel == channel) {
			out = append(out, r)
		}
	}
	return out
}

// interactionRoutes returns the routes matching an interaction, each with
// the action that matched it (the first action when the route matches by
// callback_id alone).
func (c *Config) interactionRoutes(ix Interaction) ([]*Route, []Action) {
	var routes []*Route
	var actions []Action
	for i := range c.Routes {
		r := &c.Routes[i]
		if (r.CallbackID == "" && r.ActionID == "") || r.takesEvents() {
			continue
		}
		if r.Effect == sweep.EffectStep && ix.ExecutionID == "" {
			continue // a step route takes interactions inside a step only
		}
		if (r.CallbackID != "" && r.CallbackID != "*" && r.CallbackID != ix.CallbackID) || (r.Channel != "" && r.Channel != ix.ChannelID) {
			continue
		}
		var matched Action
		if len(ix.Actions) > 0 {
			matched = ix.Actions[0]
		}
		if r.ActionID != "" {
			j := slices.IndexFunc(ix.Actions, func(a Action) bool { return a.ActionID == r.ActionID })
			if j < 0 {
				continue
			}
			matched = ix.Actions[j]
		}
		routes = append(routes, r)
		actions = append(actions, matched)
	}
	return routes, actions
}

// row builds the outbox row a route makes for one request. No row carries a
// copy of the request: one whose effect needs it (redeliver, forward, a
// template over .Event) names the one stored with the intent
// (store.Intent.Request, keyed by facts.EventID, once however many routes
// need it), and the sweep gets it back with the claimed row. The others
// carry only the facts and parameters they are performed from.
func (r *Route) row(key, source string, facts sweep.Facts) (store.NewRow, error) {
	return r.rowOf(key, r.payload(source, facts))
}

// payload is the payload a route's row carries for one request.
func (r *Route) payload(source string, facts sweep.Facts) sweep.Payload {
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
func (r *Route) rowOf(key string, p sweep.Payload) (store.NewRow, error) {
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

// withRequest adds Slack's exact bytes to an intent when one of its rows
// is performed from them; it is stored once, whatever the number of rows.
func withRequest(in store.Intent, contentType string, body []byte) store.Intent {
	if slices.ContainsFunc(in.Rows, func(r store.NewRow) bool { return r.RequestID != "" }) {
		in.Request = &store.Request{ContentType: contentType, Body: body}
	}
	return in
}

// ackText renders the route's ack_text over the command's facts. It runs
// before the ack, so it must not fail it: a template that fails on this
// request answers the literal text, and the error is logged.
func (r *Route) ackText(facts sweep.Facts, log *slog.Logger) string {
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
