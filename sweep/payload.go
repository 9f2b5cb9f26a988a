package sweep

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ackd/ackd/store"
)

// Payload is the JSON stored in outbox.payload. With the stored request its
// row names (store.Row.Request), it carries everything needed to perform the
// effect, so `ackd sweep --once` needs no routes: the route's effect
// parameters and the facts of the Slack request that produced it. Raw, the
// request as forward sends it (envelope, command form or interaction
// payload), is not stored in the row: the sweep fills it in from the stored
// request (RequestRaw). Only a follow-up's reply and rows recorded by older
// versions of ackd carry it in the payload.
type Payload struct {
	Route     string          `json:"route"`
	Source    string          `json:"source"` // SourceEvent, SourceCommand, SourceInteraction, SourceReply
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
	Params    Params          `json:"params"`
	Facts     Facts           `json:"facts"`
	Raw       json.RawMessage `json:"raw,omitempty"`
}

// Sources of a payload.
const (
	SourceEvent       = "event"       // Events API event_callback; Raw is the whole envelope
	SourceCommand     = "command"     // slash command; Raw is the form as a JSON object of strings
	SourceInteraction = "interaction" // interactivity; Raw is the payload JSON
	SourceReply       = "reply"       // follow-up enqueued from a forward reply; Raw is the reply JSON
)

// Params are a route's effect parameters. Fields marked "template" are Go
// text/template sources rendered over Data at perform time, unless Literal.
type Params struct {
	Channel         string          `json:"channel,omitempty"`   // post/update: template; default the event's channel
	Text            string          `json:"text,omitempty"`      // post/update/respond: template
	Blocks          json.RawMessage `json:"blocks,omitempty"`    // post/update/respond: Block Kit JSON, sent as is
	Thread          bool            `json:"thread,omitempty"`    // post: reply in the event's thread
	ThreadTS        string          `json:"thread_ts,omitempty"` // post: explicit thread ts (follow-ups)
	Reaction        string          `json:"reaction,omitempty"`  // react
	TS              string          `json:"ts,omitempty"`        // update: template; default the event's ts
	URL             string          `json:"url,omitempty"`       // forward
	Signed          bool            `json:"signed,omitempty"`    // forward: recorded by a daemon that signs; needs ACKD_FORWARD_SECRET
	ResponseURL     string          `json:"response_url,omitempty"`
	ResponseType    string          `json:"response_type,omitempty"` // respond: "ephemeral" | "in_channel"
	ReplaceOriginal bool            `json:"replace_original,omitempty"`
	Literal         bool            `json:"literal,omitempty"` // Text/Channel/TS are plain strings, not templates
	// DeadlineMS (step, step_deadline): [steps] deadline when the row was
	// recorded; the step ends with functions.completeError once this long
	// has passed since then, on the store's clock.
	DeadlineMS int64 `json:"deadline_ms,omitempty"`
	// StepKey (step_deadline): the key of the step row whose deadline this is.
	StepKey string `json:"step_key,omitempty"`
}

// Facts are what ackd extracted from the Slack request at ack time.
type Facts struct {
	EventID string `json:"event_id,omitempty"` // event_id, or the operation id for commands/interactions
	Type    string `json:"type,omitempty"`     // interactions: the payload type (block_actions, view_submission…)
	Team    string `json:"team,omitempty"`
	// Enterprise is the Enterprise Grid org's id, when the request names one.
	Enterprise string `json:"enterprise,omitempty"`
	// Install names the installation whose token performs the row ([oauth]):
	// the team id, or the enterprise id for an org-wide install. Empty
	// without [oauth].
	Install     string          `json:"install,omitempty"`
	User        string          `json:"user,omitempty"`
	Channel     string          `json:"channel,omitempty"`
	TS          string          `json:"ts,omitempty"`
	ThreadTS    string          `json:"thread_ts,omitempty"`
	Text        string          `json:"text,omitempty"`
	Command     string          `json:"command,omitempty"`
	CallbackID  string          `json:"callback_id,omitempty"`
	ActionID    string          `json:"action_id,omitempty"`
	Value       string          `json:"value,omitempty"`
	TriggerID   string          `json:"trigger_id,omitempty"`
	ResponseURL string          `json:"response_url,omitempty"`
	Event       json.RawMessage `json:"event,omitempty"` // the raw inner event (Events API)
	// ExecutionID is a workflow step's function_execution_id: the event's,
	// or an interaction's function_data.execution_id (step.go).
	ExecutionID string `json:"execution_id,omitempty"`
}

// RequestRaw is Payload.Raw of a row performed from Slack's stored request
// (store.Row.Request): an event's envelope is the body itself, a command's
// form becomes a JSON object of strings (FormJSON), an interaction is its
// payload field. It is nil when req is nil or does not parse. The sweep
// fills Payload.Raw with it for a row that carries no copy: rows recorded
// by older versions of ackd carry their own, which is used as it is.
func RequestRaw(source string, req *store.Request) json.RawMessage {
	if req == nil {
		return nil
	}
	switch source {
	case SourceEvent:
		return json.RawMessage(req.Body)
	case SourceCommand, SourceInteraction:
		form, err := url.ParseQuery(string(req.Body))
		if err != nil {
			return nil
		}
		if source == SourceCommand {
			return FormJSON(form)
		}
		if p := form.Get("payload"); p != "" {
			return json.RawMessage(p)
		}
	}
	return nil
}

// FormJSON is a form as a JSON object of strings (the first value of each
// field): the shape a slash command is forwarded in.
func FormJSON(form url.Values) json.RawMessage {
	m := make(map[string]string, len(form))
	for k, v := range form {
		if len(v) > 0 {
			m[k] = v[0]
		}
	}
	b, _ := json.Marshal(m) // a map of strings always marshals
	return b
}

// Timeout is the effect's deadline, or def when the payload names none.
func (p Payload) Timeout(def time.Duration) time.Duration {
	if p.TimeoutMS > 0 {
		return time.Duration(p.TimeoutMS) * time.Millisecond
	}
	return def
}

// DecodePayload parses an outbox payload.
func DecodePayload(s string) (Payload, error) {
	var p Payload
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return Payload{}, fmt.Errorf("decode payload: %w", err)
	}
	return p, nil
}

// Encode returns the payload as the JSON string stored in the outbox.
func (p Payload) Encode() (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode payload: %w", err)
	}
	return string(b), nil
}

// Data is the value templates are executed over.
type Data struct {
	Text, User, Channel, TS, ThreadTS, Team string
	Command                                 string
	ActionID, Value                         string
	EventID                                 string
	Event                                   map[string]any
}

// Data builds the template value from the facts.
func (f Facts) Data() Data {
	d := Data{
		Text: f.Text, User: f.User, Channel: f.Channel, TS: f.TS, ThreadTS: f.ThreadTS,
		Team: f.Team, Command: f.Command, ActionID: f.ActionID, Value: f.Value, EventID: f.EventID,
	}
	if len(f.Event) > 0 {
		_ = json.Unmarshal(f.Event, &d.Event) // best effort: .Event stays nil if it is not an object
	}
	return d
}

// Data builds the template value of a payload: its facts, with .Event taken
// from the stored envelope when the facts do not carry the inner event.
func (p Payload) Data() Data {
	d := p.Facts.Data()
	if d.Event == nil && p.Source == SourceEvent && len(p.Raw) > 0 {
		var env struct {
			Event map[string]any `json:"event"`
		}
		if json.Unmarshal(p.Raw, &env) == nil {
			d.Event = env.Event
		}
	}
	return d
}

// Render executes the route's template key (text, to_channel, ts) over the
// payload's facts, or returns src unchanged when the payload is Literal. Its
// error is one line naming the route, the key and the field.
func (p Payload) Render(key, src string) (string, error) {
	if p.Params.Literal || !strings.Contains(src, "{{") {
		return src, nil
	}
	t, err := ParseTemplate(p.Route, key, src)
	if err != nil {
		return "", err
	}
	return Execute(t, p.Route, key, p.Data())
}
