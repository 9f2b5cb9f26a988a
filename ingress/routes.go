package ingress

import (
	"slices"

	"github.com/ackd/ackd/config"
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

// eventRows applies the filters and routes to an event_callback. It returns
// the outbox rows to enqueue, or the reason the event is ignored.
func eventRows(c *config.Config, env Envelope) ([]store.NewRow, string, error) {
	in := env.Inner
	f := c.Filter
	if len(f.Channels) > 0 && in.Channel != "" && !slices.Contains(f.Channels, in.Channel) {
		return nil, ignoredChannel, nil
	}
	if config.MessageLike(in.Type) {
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
	facts := c.InstallFacts(env.Facts(), env.Enterprise, env.Install)
	for i := range c.Routes {
		r := &c.Routes[i]
		if !r.MatchesEvent(in.Type) || (r.Channel != "" && r.Channel != in.Channel) {
			continue
		}
		if r.FunctionRoute() {
			if !r.MatchesFunction(in.FunctionID) {
				continue
			}
			fr, err := stepRows(c, r, env, facts)
			if err != nil {
				return nil, "", err
			}
			rows = append(rows, fr...)
			continue
		}
		key := env.EventID + ":" + r.Name
		// The message fact identifies a message, not a reaction to it: only
		// message-like events share a row by it.
		if r.Key == "message" && config.MessageLike(in.Type) && in.Channel != "" && in.TS != "" {
			key = in.Channel + ":" + in.TS + ":" + r.Name
		}
		row, err := r.RowFor(key, sweep.SourceEvent, facts)
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

// interactionRoutes returns the routes matching an interaction, each with
// the action that matched it (the first action when the route matches by
// callback_id alone).
func interactionRoutes(c *config.Config, ix Interaction) ([]*config.Route, []Action) {
	var routes []*config.Route
	var actions []Action
	for i := range c.Routes {
		r := &c.Routes[i]
		if (r.CallbackID == "" && r.ActionID == "") || r.TakesEvents() {
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

// withRequest adds Slack's exact bytes to an intent when one of its rows
// is performed from them; it is stored once, whatever the number of rows.
func withRequest(in store.Intent, contentType string, body []byte) store.Intent {
	if slices.ContainsFunc(in.Rows, func(r store.NewRow) bool { return r.RequestID != "" }) {
		in.Request = &store.Request{ContentType: contentType, Body: body}
	}
	return in
}
