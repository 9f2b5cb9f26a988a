package ingress

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/sweep"
)

// ErrMalformed marks a request body that is not a Slack request ackd can
// read (answered 400).
var ErrMalformed = errors.New("malformed request")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
}

// Envelope is the part of an Events API request ackd reads itself. It does
// not use slackevents.ParseEvent, which rejects inner event types slack-go
// does not know: an authenticated event of any type must still get its 200.
type Envelope struct {
	Type      string
	Challenge string
	TeamID    string
	EventID   string
	// Enterprise is the Enterprise Grid org's id, when the envelope names
	// one; Install is the key of the installation that serves the event
	// ([oauth]): see installKey.
	Enterprise string
	Install    string

	Inner InnerEvent
}

// InnerEvent is the fields of the inner event that filters and routes use.
type InnerEvent struct {
	Type     string `json:"type"`
	Subtype  string `json:"subtype"`
	Channel  string `json:"-"` // event.channel, or event.item.channel for reactions
	User     string `json:"-"`
	BotID    string `json:"bot_id"`
	Text     string `json:"text"`
	TS       string `json:"-"` // event.ts, or event.item.ts for reactions
	ThreadTS string `json:"thread_ts"`
	// ExecutionID and FunctionID are a function_executed event's
	// function_execution_id and function.callback_id (a workflow step).
	ExecutionID string `json:"function_execution_id"`
	FunctionID  string `json:"-"`
	// AgentChannel and AgentThreadTS are where an assistant thread's events
	// (assistant_thread_started, assistant_thread_context_changed, and
	// app_context_changed in that shape) name their conversation:
	// event.assistant_thread.channel_id and thread_ts, not event.channel.
	// The effects' facts take them when the event has no channel of its
	// own; filters do not (a [filter] channels list never named the
	// agent's DMs, and such events passed it before).
	AgentChannel  string `json:"-"`
	AgentThreadTS string `json:"-"`
}

// envelopeJSON is the wire shape ParseEnvelope decodes in one pass: the
// envelope and the inner event's fields together, never the body twice.
type envelopeJSON struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
	TeamID    string `json:"team_id"`
	EventID   string `json:"event_id"`
	// Who the event is for (slack-go's structs lack some of these).
	EnterpriseID        string `json:"enterprise_id"`
	IsEnterpriseInstall bool   `json:"is_enterprise_install"`
	ContextTeamID       string `json:"context_team_id"`
	ContextEnterpriseID string `json:"context_enterprise_id"`
	Authorizations      []struct {
		EnterpriseID        string `json:"enterprise_id"`
		TeamID              string `json:"team_id"`
		IsEnterpriseInstall bool   `json:"is_enterprise_install"`
	} `json:"authorizations"`
	Event *struct {
		InnerEvent
		// channel and user are strings in message-like events and
		// objects in others (channel_created, user_change).
		Channel json.RawMessage `json:"channel"`
		User    json.RawMessage `json:"user"`
		TS      string          `json:"ts"`
		Item    struct {
			Channel string `json:"channel"`
			TS      string `json:"ts"`
		} `json:"item"`
		Function struct {
			CallbackID string `json:"callback_id"`
		} `json:"function"`
		AssistantThread struct {
			ChannelID string `json:"channel_id"`
			ThreadTS  string `json:"thread_ts"`
		} `json:"assistant_thread"`
	} `json:"event"`
}

// ParseEnvelope decodes an Events API body. Only the outer shape is required;
// an event_callback must carry an event_id and an event with a type.
func ParseEnvelope(body []byte) (Envelope, error) {
	var raw envelopeJSON
	if err := json.Unmarshal(body, &raw); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && strings.HasPrefix(ute.Field, "event") {
			return Envelope{}, malformed("event is not an object: %v", err)
		}
		return Envelope{}, malformed("body is not a JSON object: %v", err)
	}
	env := Envelope{Type: raw.Type, Challenge: raw.Challenge, TeamID: raw.TeamID, EventID: raw.EventID}
	env.Enterprise, env.Install = installKey(raw)
	if env.Type == "" {
		return Envelope{}, malformed("no envelope type")
	}
	if env.Type != "event_callback" {
		return env, nil
	}
	if env.EventID == "" {
		return Envelope{}, malformed("event_callback without event_id")
	}
	if err := checkID("event_id", env.EventID, rawIDInvalid(body, "event_id")); err != nil {
		return Envelope{}, err
	}
	if raw.Event == nil {
		return Envelope{}, malformed("event_callback without event")
	}
	ev := raw.Event
	if ev.Type == "" {
		return Envelope{}, malformed("event without type")
	}
	in := ev.InnerEvent
	// Only the string form of channel and user is a fact.
	in.Channel = jsonString(ev.Channel)
	in.User = jsonString(ev.User)
	in.TS = ev.TS
	in.FunctionID = ev.Function.CallbackID
	in.AgentChannel, in.AgentThreadTS = ev.AssistantThread.ChannelID, ev.AssistantThread.ThreadTS
	if in.Channel == "" {
		in.Channel = ev.Item.Channel
	}
	if ev.Item.TS != "" && in.TS == "" {
		in.TS = ev.Item.TS
	}
	if config.MessageLike(in.Type) {
		// A route may key a message by {channel}:{ts}.
		if err := checkID("event.channel", in.Channel, false); err != nil {
			return Envelope{}, err
		}
		if err := checkID("event.ts", in.TS, false); err != nil {
			return Envelope{}, err
		}
	}
	if in.ExecutionID != "" {
		// A step route keys its row by it.
		if err := checkID("event.function_execution_id", in.ExecutionID, false); err != nil {
			return Envelope{}, err
		}
	}
	env.Inner = in
	return env, nil
}

// installKey names the installation an event is for: the first
// authorization's (the installation that sees the event) — its enterprise
// for an org-wide install, else its team — and without authorizations the
// envelope's own team_id (or context_team_id), or its enterprise_id when
// it says is_enterprise_install.
func installKey(raw envelopeJSON) (enterprise, key string) {
	enterprise = cmp.Or(raw.EnterpriseID, raw.ContextEnterpriseID)
	if len(raw.Authorizations) > 0 {
		a := raw.Authorizations[0]
		enterprise = cmp.Or(a.EnterpriseID, enterprise)
		if a.IsEnterpriseInstall && a.EnterpriseID != "" {
			return enterprise, a.EnterpriseID
		}
		if a.TeamID != "" {
			return enterprise, a.TeamID
		}
	}
	if raw.IsEnterpriseInstall && enterprise != "" {
		return enterprise, enterprise
	}
	return enterprise, cmp.Or(raw.TeamID, raw.ContextTeamID)
}

func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// Facts are what templates and effects see of an event.
func (e Envelope) Facts() sweep.Facts {
	f := sweep.Facts{
		EventID: e.EventID, Team: e.TeamID, User: e.Inner.User, Channel: e.Inner.Channel,
		TS: e.Inner.TS, ThreadTS: e.Inner.ThreadTS, Text: e.Inner.Text,
		ExecutionID: e.Inner.ExecutionID, CallbackID: e.Inner.FunctionID,
	}
	if f.Channel == "" && e.Inner.AgentChannel != "" {
		// An assistant thread's event: its conversation is the thread.
		f.Channel, f.ThreadTS = e.Inner.AgentChannel, cmp.Or(f.ThreadTS, e.Inner.AgentThreadTS)
	}
	return f
}

// Command is a slash command request.
type Command struct {
	Form    url.Values
	Command string
	Text    string
	Trigger string
}

// ParseCommand decodes a slash command's form body.
func ParseCommand(body []byte) (Command, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return Command{}, malformed("form body: %v", err)
	}
	c := Command{Form: form, Command: form.Get("command"), Text: form.Get("text"), Trigger: form.Get("trigger_id")}
	if form.Get("ssl_check") == "" && c.Command == "" {
		return Command{}, malformed("no command field")
	}
	if err := checkID("trigger_id", c.Trigger, false); err != nil {
		return Command{}, err
	}
	return c, nil
}

// OperationID is the receipt key of a command: commands have no event_id,
// and two identical commands are two intentional runs, so the key is the
// per-invocation trigger_id (or, lacking one, a hash of the whole body).
func (c Command) OperationID(body []byte) string {
	if c.Trigger != "" {
		return "cmd:" + c.Trigger
	}
	sum := sha256.Sum256(body)
	return "cmd:h:" + hex.EncodeToString(sum[:12])
}

// Facts are what templates and effects see of a command.
func (c Command) Facts(opID string) sweep.Facts {
	f := c.Form
	return sweep.Facts{
		EventID: opID, Team: f.Get("team_id"), User: f.Get("user_id"), Channel: f.Get("channel_id"),
		Text: c.Text, Command: c.Command, TriggerID: c.Trigger, ResponseURL: f.Get("response_url"),
	}
}

// Install is the key of the installation a command is for ([oauth]).
func (c Command) Install() (enterprise, key string) {
	f := c.Form
	enterprise = f.Get("enterprise_id")
	if f.Get("is_enterprise_install") == "true" && enterprise != "" {
		return enterprise, enterprise
	}
	return enterprise, f.Get("team_id")
}

// RawJSON is the form as a JSON object of strings (first value of each
// field), the shape forwarded to a team's handler.
func (c Command) RawJSON() json.RawMessage { return sweep.FormJSON(c.Form) }

// Interaction is an interactivity request: the form field "payload" holding JSON.
type Interaction struct {
	Raw         json.RawMessage
	Type        string
	TriggerID   string
	CallbackID  string
	ResponseURL string
	TeamID      string
	UserID      string
	ChannelID   string
	MessageTS   string
	ThreadTS    string
	ActionTS    string
	Actions     []Action
	// EnterpriseID and EnterpriseInstall say which installation the
	// interaction is for ([oauth]): see Install.
	EnterpriseID      string
	EnterpriseInstall bool
	// ExecutionID is function_data.execution_id: the interaction happened
	// inside a workflow step (its payload carries that step's token).
	ExecutionID string

	// identity holds what else tells two genuine interactions apart when
	// there is no trigger_id (view_closed, block_suggestion): the view's id
	// and hash, and the like. It feeds OperationID's fallback only.
	identity []string
}

// Action is one element of a block_actions payload's actions.
type Action struct {
	ActionID string
	BlockID  string
	Value    string
}

// ParseInteraction decodes an interactivity form body.
func ParseInteraction(body []byte) (Interaction, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return Interaction{}, malformed("form body: %v", err)
	}
	payload := form.Get("payload")
	if payload == "" {
		return Interaction{}, malformed("no payload field")
	}
	var p struct {
		Type        string `json:"type"`
		TriggerID   string `json:"trigger_id"`
		CallbackID  string `json:"callback_id"`
		ResponseURL string `json:"response_url"`
		ActionTS    string `json:"action_ts"`
		Team        struct {
			ID string `json:"id"`
		} `json:"team"`
		User struct {
			ID string `json:"id"`
		} `json:"user"`
		Channel struct {
			ID string `json:"id"`
		} `json:"channel"`
		Message struct {
			TS       string `json:"ts"`
			ThreadTS string `json:"thread_ts"`
		} `json:"message"`
		Container struct {
			MessageTS string `json:"message_ts"`
			ChannelID string `json:"channel_id"`
		} `json:"container"`
		View struct {
			ID             string `json:"id"`
			Hash           string `json:"hash"`
			CallbackID     string `json:"callback_id"`
			RootViewID     string `json:"root_view_id"`
			PreviousViewID string `json:"previous_view_id"`
		} `json:"view"`
		IsCleared           bool   `json:"is_cleared"`
		IsEnterpriseInstall bool   `json:"is_enterprise_install"`
		APIAppID            string `json:"api_app_id"`
		Enterprise          struct {
			ID string `json:"id"`
		} `json:"enterprise"`
		// block_suggestion: the element and what the user has typed so far.
		ActionID     string `json:"action_id"`
		BlockID      string `json:"block_id"`
		Value        string `json:"value"`
		ResponseURLs []struct {
			ResponseURL string `json:"response_url"`
		} `json:"response_urls"`
		Actions []struct {
			ActionID string `json:"action_id"`
			BlockID  string `json:"block_id"`
			Value    string `json:"value"`
			ActionTS string `json:"action_ts"`
		} `json:"actions"`
		FunctionData struct {
			ExecutionID string `json:"execution_id"`
		} `json:"function_data"`
	}
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		return Interaction{}, malformed("payload is not a JSON object: %v", err)
	}
	if p.Type == "" {
		return Interaction{}, malformed("payload without type")
	}
	if err := checkID("trigger_id", p.TriggerID, rawIDInvalid([]byte(payload), "trigger_id")); err != nil {
		return Interaction{}, err
	}
	ix := Interaction{
		Raw: json.RawMessage(payload), Type: p.Type, TriggerID: p.TriggerID, CallbackID: p.CallbackID,
		ResponseURL: p.ResponseURL, TeamID: p.Team.ID, UserID: p.User.ID, ChannelID: p.Channel.ID,
		MessageTS: p.Message.TS, ThreadTS: p.Message.ThreadTS, ActionTS: p.ActionTS,
		EnterpriseID: p.Enterprise.ID, EnterpriseInstall: p.IsEnterpriseInstall,
		ExecutionID: p.FunctionData.ExecutionID,
		identity: []string{p.View.ID, p.View.Hash, p.View.RootViewID, p.View.PreviousViewID,
			strconv.FormatBool(p.IsCleared), p.APIAppID, p.Enterprise.ID, p.Channel.ID, p.Container.ChannelID,
			p.ActionID, p.BlockID, p.Value},
	}
	if ix.CallbackID == "" {
		ix.CallbackID = p.View.CallbackID
	}
	if ix.ResponseURL == "" && len(p.ResponseURLs) > 0 {
		ix.ResponseURL = p.ResponseURLs[0].ResponseURL
	}
	if ix.ChannelID == "" {
		ix.ChannelID = p.Container.ChannelID
	}
	if ix.MessageTS == "" {
		ix.MessageTS = p.Container.MessageTS
	}
	for _, a := range p.Actions {
		ix.Actions = append(ix.Actions, Action{ActionID: a.ActionID, BlockID: a.BlockID, Value: a.Value})
		if ix.ActionTS == "" {
			ix.ActionTS = a.ActionTS
		}
	}
	if p.Type == "block_suggestion" && len(p.Actions) == 0 {
		// An external select's keystroke names its element at top level:
		// it is the action, so action_id routes match it and templates see
		// its .ActionID and .Value.
		ix.Actions = []Action{{ActionID: p.ActionID, BlockID: p.BlockID, Value: p.Value}}
	}
	return ix, nil
}

// OperationID is the receipt key of an interaction: "ix:" + trigger_id, or,
// for payloads without one (view_closed, block_suggestion), a hash of the
// fields that identify one user action: type, team, user, callback, action
// ids, values and action_ts, and the view's id and hash — a modal gets a new
// view id each time it is opened and a new hash each time it is updated, so
// two closes of modals with one callback_id by one user are two operations,
// while the same payload delivered twice is one. The fields are decoded
// values, so a re-encoding of the same payload keeps its id.
func (ix Interaction) OperationID() string {
	if ix.TriggerID != "" {
		return "ix:" + ix.TriggerID
	}
	parts := []string{ix.Type, ix.TeamID, ix.UserID, ix.CallbackID, ix.ActionTS, ix.MessageTS}
	parts = append(parts, ix.identity...)
	for _, a := range ix.Actions {
		parts = append(parts, a.ActionID, a.BlockID, a.Value)
	}
	// Each part is length-prefixed, so no value can shift into its neighbour.
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "ix:h:" + hex.EncodeToString(sum[:12])
}

// Install is the key of the installation an interaction is for ([oauth]).
func (ix Interaction) Install() (enterprise, key string) {
	if ix.EnterpriseInstall && ix.EnterpriseID != "" {
		return ix.EnterpriseID, ix.EnterpriseID
	}
	return ix.EnterpriseID, ix.TeamID
}

// Facts are what templates and effects see of an interaction; ActionID and
// Value are those of the action that matched the route (or the first).
func (ix Interaction) Facts(opID string, a Action) sweep.Facts {
	return sweep.Facts{
		EventID: opID, Type: ix.Type, Team: ix.TeamID, User: ix.UserID, Channel: ix.ChannelID, TS: ix.MessageTS,
		ThreadTS: ix.ThreadTS, CallbackID: ix.CallbackID, ActionID: a.ActionID, Value: a.Value,
		TriggerID: ix.TriggerID, ResponseURL: ix.ResponseURL, ExecutionID: ix.ExecutionID,
	}
}
