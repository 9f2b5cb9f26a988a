// Package manifest builds the Slack app manifest a configuration needs
// (`ackd manifest`): the events its routes take, their slash commands and
// interactivity, and the bot scopes its effects, post confirmation,
// catch-up and [oauth] use; for stream routes the agent feature
// (agent_view, or assistant_view) and agent_session_stopped; for step
// routes the functions, run remotely. Slack's own facts (which method and
// which subscription needs which scope) are the tables in scopes.go; every
// manifest validates against Slack's published schema (schema_test.go,
// testdata/slack-schema).
//
// Limits: a route that takes every event (event = "*") or every command
// (command = "*") names none, so the manifest cannot list them; the scopes
// of an app behind redeliver routes are that app's own. Both are said in
// the notes Build returns.
package manifest

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/sweep"
)

const sourceEvent = sweep.SourceEvent

// Manifest is Slack's app manifest, the fields ackd fills
// (docs.slack.dev/reference/app-manifest; the field rules quoted are those
// of slackapi/node-slack-sdk packages/web-api/src/types/request/manifest.ts).
type Manifest struct {
	DisplayInformation DisplayInformation `json:"display_information" yaml:"display_information"`
	Features           Features           `json:"features" yaml:"features"`
	OAuthConfig        OAuthConfig        `json:"oauth_config" yaml:"oauth_config"`
	Settings           Settings           `json:"settings" yaml:"settings"`
	// Functions are the workflow steps the routes complete, by callback_id.
	Functions map[string]Function `json:"functions,omitempty" yaml:"functions,omitempty"`
}

// Function is one workflow step (custom function) as the manifest
// declares it: title, description, input_parameters and output_parameters
// are required (Slack's manifest schema, app-manifests.v1.hermes.functions);
// each parameter's key is its name
// (slack-samples/bolt-js-custom-step-template manifest.json).
type Function struct {
	Title            string           `json:"title" yaml:"title"`
	Description      string           `json:"description" yaml:"description"`
	InputParameters  map[string]Param `json:"input_parameters" yaml:"input_parameters"`
	OutputParameters map[string]Param `json:"output_parameters" yaml:"output_parameters"`
}

// Param is one input or output parameter of a function.
type Param struct {
	Type        string `json:"type" yaml:"type"`
	Title       string `json:"title,omitempty" yaml:"title,omitempty"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	IsRequired  bool   `json:"is_required" yaml:"is_required"`
	Hint        string `json:"hint,omitempty" yaml:"hint,omitempty"`
	Name        string `json:"name" yaml:"name"`
}

// DisplayInformation: name is required, "Maximum length is 35 characters".
type DisplayInformation struct {
	Name        string `json:"name" yaml:"name"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
}

// Features holds the bot user (without one there is no bot token), the App
// Home's Messages tab (direct messages to the app), the slash commands, and
// the agent feature of an app with stream routes: agent_view, or the
// legacy assistant_view (one of the two, Options.AgentView).
type Features struct {
	AppHome       *AppHome       `json:"app_home,omitempty" yaml:"app_home,omitempty"`
	BotUser       BotUser        `json:"bot_user" yaml:"bot_user"`
	SlashCommands []SlashCommand `json:"slash_commands,omitempty" yaml:"slash_commands,omitempty"`
	AgentView     *AgentView     `json:"agent_view,omitempty" yaml:"agent_view,omitempty"`
	AssistantView *AssistantView `json:"assistant_view,omitempty" yaml:"assistant_view,omitempty"`
}

// AgentView is features.agent_view, the agent experience of new apps
// (Slack changelog 2026-06-30, SLACK_FACTS §12): every field is optional,
// agent_description at most 300 characters (Slack's manifest schema,
// app-manifests.v1.features.agent_view).
type AgentView struct {
	AgentDescription string `json:"agent_description,omitempty" yaml:"agent_description,omitempty"`
}

// AssistantView is features.assistant_view, the experience agent_view
// replaces (deprecated from February 2027): assistant_description is
// required (app-manifests.v1.features.assistant_view).
type AssistantView struct {
	AssistantDescription string `json:"assistant_description" yaml:"assistant_description"`
}

// AppHome: the Messages tab, on when the app takes direct messages.
type AppHome struct {
	MessagesTabEnabled         bool `json:"messages_tab_enabled" yaml:"messages_tab_enabled"`
	MessagesTabReadOnlyEnabled bool `json:"messages_tab_read_only_enabled" yaml:"messages_tab_read_only_enabled"`
}

// BotUser: display_name is required, at most 80 characters of a-z, 0-9, -, _ and ".".
type BotUser struct {
	DisplayName  string `json:"display_name" yaml:"display_name"`
	AlwaysOnline bool   `json:"always_online" yaml:"always_online"`
}

// SlashCommand: command (at most 32 characters, with its /) and description
// are required; url is absent in Socket Mode.
type SlashCommand struct {
	Command      string `json:"command" yaml:"command"`
	URL          string `json:"url,omitempty" yaml:"url,omitempty"`
	Description  string `json:"description" yaml:"description"`
	ShouldEscape bool   `json:"should_escape" yaml:"should_escape"`
}

// OAuthConfig holds the redirect URLs ([oauth]) and the scopes.
type OAuthConfig struct {
	RedirectURLs []string `json:"redirect_urls,omitempty" yaml:"redirect_urls,omitempty"`
	Scopes       Scopes   `json:"scopes" yaml:"scopes"`
}

// Scopes are the bot scopes, and [oauth] user_scopes if any.
type Scopes struct {
	Bot  []string `json:"bot" yaml:"bot"`
	User []string `json:"user,omitempty" yaml:"user,omitempty"`
}

// Settings: the Events API subscriptions, interactivity and Socket Mode.
type Settings struct {
	EventSubscriptions *EventSubscriptions `json:"event_subscriptions,omitempty" yaml:"event_subscriptions,omitempty"`
	Interactivity      *Interactivity      `json:"interactivity,omitempty" yaml:"interactivity,omitempty"`
	// OrgDeployEnabled: an app's functions appear in Workflow Builder only
	// when it opts in to org-wide deployment and is installed at the org
	// level (docs.slack.dev, "Custom functions for Bolt").
	OrgDeployEnabled  bool `json:"org_deploy_enabled,omitempty" yaml:"org_deploy_enabled,omitempty"`
	SocketModeEnabled bool `json:"socket_mode_enabled" yaml:"socket_mode_enabled"`
	// FunctionRuntime "remote": the app's functions run on its own server
	// (here, the step routes' handlers), not on Slack's; an app that adds
	// steps through its manifest needs it (Bolt docs, custom steps;
	// SLACK_FACTS §12).
	FunctionRuntime string `json:"function_runtime,omitempty" yaml:"function_runtime,omitempty"`
}

// EventSubscriptions: request_url is absent in Socket Mode.
type EventSubscriptions struct {
	RequestURL string   `json:"request_url,omitempty" yaml:"request_url,omitempty"`
	BotEvents  []string `json:"bot_events" yaml:"bot_events"`
}

// Interactivity: is_enabled is required; request_url is absent in Socket Mode.
type Interactivity struct {
	IsEnabled  bool   `json:"is_enabled" yaml:"is_enabled"`
	RequestURL string `json:"request_url,omitempty" yaml:"request_url,omitempty"`
}

// Options are what the configuration does not say.
type Options struct {
	// URL is the public https:// base Slack reaches ackd at (its proxy);
	// the request URLs are URL+"/slack/events" and so on. Not needed in
	// Socket Mode.
	URL string
	// Name is the app's name (display_information.name, the bot's display
	// name); default "ackd".
	Name string
	// ChannelTypes are the conversation types the app works in (Public,
	// Private, IM, MPIM): which message.* it subscribes to and which
	// *:history scopes it asks for. Default: all four.
	ChannelTypes []string
	// AgentView is the agent feature an app with stream routes declares:
	// AgentViewNew ("agent_view", the default: the only one Slack gives
	// new apps since 2026-06-30) or AssistantViewLegacy ("assistant_view",
	// for an app created before that which still uses it; deprecated from
	// February 2027). Without stream routes it is not used.
	AgentView string
	// AgentDescription tells users what the agent does
	// (agent_description or assistant_description); default
	// DefaultAgentDescription. At most 300 characters.
	AgentDescription string
}

// The two agent features a manifest can declare (Options.AgentView).
const (
	AgentViewNew        = "agent_view"
	AssistantViewLegacy = "assistant_view"
)

// DefaultAgentDescription describes the agent when Options say nothing.
// Slack shows it to the workspace's users, so it speaks to them, not to
// the operator.
const DefaultAgentDescription = "Ask a question and the agent answers in the thread"

// maxAgentDescription is agent_view's agent_description limit (Slack's
// manifest schema); assistant_description gets the same.
const maxAgentDescription = 300

// Result is a manifest and what a person must know about it: a route the
// manifest cannot express, a scope ackd does not know, an [oauth] scopes
// list that asks for less than the routes need.
type Result struct {
	Manifest Manifest
	Notes    []string
}

// CheckURL says what is wrong with a --url value: Slack sends requests
// only to https URLs on a public host.
func CheckURL(raw string) (string, error) {
	if raw == "" {
		return "", errors.New("--url is empty: give the public https:// address Slack reaches ackd at, e.g. --url https://ackd.example.com")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("--url %q is not an absolute URL: give the public https:// address Slack reaches ackd at, e.g. --url https://ackd.example.com", raw)
	case u.Scheme != "https":
		return "", fmt.Errorf("--url %q must start with https://: Slack sends requests only to HTTPS URLs with a valid certificate", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("--url %q must be a plain https://host[/path], without user, query or fragment", raw)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Build returns the manifest cfg needs. A manifest past one of Slack's
// limits (slackLimits) is an error, not a manifest Slack would refuse.
func Build(cfg *config.Config, o Options) (Result, error) {
	res, err := build(cfg, o)
	if err != nil {
		return Result{}, err
	}
	if err := slackLimits(&res.Manifest); err != nil {
		return Result{}, err
	}
	return res, nil
}

// build is Build without the check of Slack's limits.
func build(cfg *config.Config, o Options) (Result, error) {
	b := &builder{cfg: cfg, scopes: map[string]bool{}, events: map[string]bool{}}
	if o.Name == "" {
		o.Name = "ackd"
	}
	if n := len([]rune(o.Name)); n > 35 {
		return Result{}, fmt.Errorf("--name %q is %d characters; Slack allows at most 35", o.Name, n)
	}
	if len(o.ChannelTypes) == 0 {
		o.ChannelTypes = ChannelTypes
	}
	for _, t := range o.ChannelTypes {
		if _, ok := perType[t]; !ok {
			return Result{}, fmt.Errorf("--channel-types: %q is not one of %s", t, strings.Join(ChannelTypes, ", "))
		}
	}
	b.types = o.ChannelTypes
	switch o.AgentView {
	case "":
		o.AgentView = AgentViewNew
	case AgentViewNew, AssistantViewLegacy:
	default:
		return Result{}, fmt.Errorf("agent view %q is not %q (new apps) or %q (an app that still uses the assistant view)", o.AgentView, AgentViewNew, AssistantViewLegacy)
	}
	if o.AgentDescription == "" {
		o.AgentDescription = DefaultAgentDescription
	}
	if n := len([]rune(o.AgentDescription)); n > maxAgentDescription {
		return Result{}, fmt.Errorf("agent description is %d characters; Slack allows at most %d", n, maxAgentDescription)
	}
	b.view = o.AgentView
	socket := cfg.Socket.Enabled
	base := ""
	if o.URL != "" || !socket {
		var err error
		if base, err = CheckURL(o.URL); err != nil {
			if o.URL == "" {
				err = errors.New("--url is required: the public https:// address Slack reaches ackd at, e.g. --url https://ackd.example.com (with [socket_mode] enabled none is needed)")
			}
			return Result{}, err
		}
	}
	endpoint := func(path string) string {
		if socket {
			return "" // Socket Mode: Slack sends over the connection
		}
		return base + path
	}

	for i := range cfg.Routes {
		if err := b.route(&cfg.Routes[i]); err != nil {
			return Result{}, err
		}
	}
	// Catch-up reads channel history: conversations.history and .replies.
	if ch := cfg.BackfillChannels(); len(ch) > 0 {
		b.methods("catch-up", []string{"conversations.history", "conversations.replies"})
	}
	m := Manifest{
		DisplayInformation: DisplayInformation{Name: o.Name, Description: "Slack requests answered within 3 seconds, durably, and acted on afterwards (ackd)"},
		Features:           Features{BotUser: BotUser{DisplayName: displayName(o.Name)}},
		Settings:           Settings{SocketModeEnabled: socket},
	}
	if cfg.OAuth != nil {
		// The uninstall and revocation events ackd acts on with [oauth]
		// (daemon/oauth.go); they need no scope.
		b.event("app_uninstalled")
		b.event("tokens_revoked")
		m.OAuthConfig.RedirectURLs = []string{cfg.OAuth.RedirectURL}
		var missing []string
		for _, s := range b.sortedScopes() {
			if !slices.Contains(cfg.OAuth.Scopes, s) {
				missing = append(missing, s)
			}
		}
		if len(missing) > 0 {
			b.note("[oauth] scopes lacks %s, which the routes need: the install flow asks Slack for [oauth] scopes only, so add them there too", strings.Join(missing, ", "))
		}
		for _, s := range cfg.OAuth.Scopes {
			b.scopes[s] = true
		}
		m.OAuthConfig.Scopes.User = slices.Clone(cfg.OAuth.UserScopes)
	}
	m.OAuthConfig.Scopes.Bot = b.sortedScopes()
	if len(b.events) > 0 {
		m.Settings.EventSubscriptions = &EventSubscriptions{RequestURL: endpoint("/slack/events"), BotEvents: sortedKeys(b.events)}
	}
	if b.steps {
		// Steps added through the manifest run on the app's server
		// (function_runtime "remote"), and Workflow Builder lists them only
		// for an org-ready app (Slack's custom-step template sets both).
		m.Settings.FunctionRuntime = "remote"
		m.Settings.OrgDeployEnabled = true
	}
	if len(b.functions) > 0 {
		m.Functions = b.functions
	}
	if b.interactive {
		m.Settings.Interactivity = &Interactivity{IsEnabled: true, RequestURL: endpoint("/slack/interactivity")}
	}
	for _, c := range b.commands {
		c.URL = endpoint("/slack/commands")
		m.Features.SlashCommands = append(m.Features.SlashCommands, c)
	}
	if b.events[perType[IM].subscription] || b.agent {
		// Direct messages to the app arrive through its Messages tab, and
		// an agent's conversations live there (Slack's agent templates
		// enable it with agent_view or assistant_view).
		m.Features.AppHome = &AppHome{MessagesTabEnabled: true}
	}
	if b.agent {
		if o.AgentView == AssistantViewLegacy {
			m.Features.AssistantView = &AssistantView{AssistantDescription: o.AgentDescription}
		} else {
			m.Features.AgentView = &AgentView{AgentDescription: o.AgentDescription}
		}
	}
	return Result{Manifest: m, Notes: b.notes}, nil
}

type builder struct {
	cfg         *config.Config
	types       []string
	scopes      map[string]bool
	events      map[string]bool
	commands    []SlashCommand
	interactive bool
	notes       []string
	// functions are the workflow steps the routes declare; steps: a route
	// takes function_executed or completes a step (effect step).
	functions map[string]Function
	declared  map[string]bool
	steps     bool
	// agent: a route streams an agent's answer (effect stream); view is
	// the agent feature the manifest declares for it (Options.AgentView).
	agent bool
	view  string
}

func (b *builder) note(format string, a ...any) { b.notes = append(b.notes, fmt.Sprintf(format, a...)) }

func (b *builder) event(ev string) { b.events[ev] = true }

func (b *builder) scope(s ...string) {
	for _, v := range s {
		if v == historyScope {
			for _, t := range b.types {
				b.scopes[perType[t].history] = true
			}
			continue
		}
		b.scopes[v] = true
	}
}

// methods adds the scopes of Web API methods that what calls.
func (b *builder) methods(what string, ms []string) {
	for _, m := range ms {
		s, ok := methodScopes[m]
		if !ok {
			b.note("%s calls %s, whose scope ackd does not know: add it by hand (docs.slack.dev/reference/methods/%s)", what, m, m)
			continue
		}
		b.scope(s...)
	}
}

// route adds what one route needs: its subscription, command or
// interactivity, and its effect's scopes.
func (b *builder) route(r *config.Route) error {
	source := sourceEvent
	switch {
	case r.Command != "":
		source = sweep.SourceCommand
		b.scope(commandsScope)
		if r.Command == "*" {
			b.note("route %q takes every slash command (command = \"*\"): add each of your commands to features.slash_commands by hand", r.Name)
			break
		}
		i := slices.IndexFunc(b.commands, func(c SlashCommand) bool { return c.Command == r.Command })
		if i < 0 {
			b.commands = append(b.commands, SlashCommand{Command: r.Command})
			i = len(b.commands) - 1
		}
		if b.commands[i].Description == "" {
			b.commands[i].Description = r.Description
		}
		if b.commands[i].Description == "" {
			// Slack requires one; a route's description key sets it.
			b.commands[i].Description = "Runs " + r.Command + " (ackd route " + r.Name + ")"
		}
	case r.Event == config.EventFunctionExecuted:
		b.function(r)
	case r.CallbackID != "" || r.ActionID != "":
		source = sweep.SourceInteraction
		b.interactive = true
	default:
		for _, ev := range append([]string{r.Event}, r.Events...) {
			if ev != "" {
				b.eventType(r, ev)
			}
		}
	}
	methods, known := effectMethods(r.Effect, source, b.cfg.Slack.ConfirmPosts)
	if !known {
		return fmt.Errorf("route %q: ackd manifest does not know which Slack methods effect %q calls (manifest/scopes.go effectMethods)", r.Name, r.Effect)
	}
	b.methods(fmt.Sprintf("route %q (effect %s)", r.Name, r.Effect), methods)
	switch r.Effect {
	case "stream":
		b.agentRoute(r)
	case sweep.EffectStep:
		// A step, or an interaction inside one: the app runs workflow
		// steps (its functions come from the function_executed routes).
		b.steps = true
		b.event(config.EventFunctionExecuted)
	}
	if r.Effect == "redeliver" {
		b.note("route %q redelivers to your app (%s): add the scopes and events your app's own code uses", r.Name, r.URL)
	}
	return nil
}

// eventType subscribes to one routed event type with its scopes.
func (b *builder) eventType(r *config.Route, ev string) {
	switch {
	case ev == "*":
		b.note("route %q takes every event (event = \"*\"): add the events you want to settings.event_subscriptions.bot_events by hand, each with its scope", r.Name)
	case ev == "message":
		for _, t := range b.types {
			b.event(perType[t].subscription)
			b.scope(perType[t].history)
		}
	case ev == "member_joined_channel" || ev == "member_left_channel":
		b.event(ev)
		for _, t := range b.types {
			if t == Public || t == Private {
				b.scope(perType[t].read)
			}
		}
	case notBotEvents[ev] != "":
		b.note("route %q takes %s, which a manifest cannot subscribe a bot to: %s", r.Name, ev, notBotEvents[ev])
	default:
		b.event(ev)
		s, ok := eventScopes[ev]
		if !ok {
			b.note("route %q takes %s, whose scope ackd does not know: add its Required scopes by hand (docs.slack.dev/reference/events/%s)", r.Name, ev, ev)
		}
		b.scope(s...)
	}
}

// agentRoute adds what a stream route needs beyond its methods' scopes:
// the agent feature (Build declares agent_view or assistant_view) and the
// agent_session_stopped subscription. Slack shows a streamed answer's Stop
// button only to an app subscribed to it, and "All apps that manage agent
// sessions must handle this event" (SLACK_FACTS §12); ackd does, whatever
// route takes it.
func (b *builder) agentRoute(r *config.Route) {
	if !b.agent && b.view == AssistantViewLegacy {
		b.note("the manifest declares assistant_view, which Slack deprecates from February 2027 and does not give new apps: use agent_view for a new app (docs.slack.dev/ai/migrating-to-agent-messaging)")
	}
	b.agent = true
	b.event(agentSessionStopped)
	b.scope(eventScopes[agentSessionStopped]...)
	if b.view == AgentViewNew && (r.Event == assistantThreadStarted || slices.Contains(r.Events, assistantThreadStarted)) {
		b.note("route %q takes %s, which agent_view replaces with app_home_opened (tab = \"messages\"): with agent_view, the only view of new apps, the route may never run; an app that still uses assistant threads declares assistant_view (docs.slack.dev/changelog/2026/06/30/agent-messages-tab)", r.Name, assistantThreadStarted)
	}
}

// The agent events the manifest knows by name.
const (
	agentSessionStopped    = "agent_session_stopped"
	assistantThreadStarted = "assistant_thread_started"
)

// function declares the workflow step a function_executed route names.
// Slack sends the event to an app that declares the function (SLACK_FACTS
// §11); its custom-step template subscribes it as well (§12), and so does
// the manifest.
func (b *builder) function(r *config.Route) {
	b.steps = true
	b.event(config.EventFunctionExecuted)
	if r.CallbackID == "" || r.CallbackID == "*" {
		b.note("route %q takes every function (no callback_id): declare each of your steps in functions by hand, or give each its route with callback_id, title, inputs and outputs", r.Name)
		return
	}
	f := Function{Title: r.Title, Description: r.Description, InputParameters: params(r.Inputs), OutputParameters: params(r.Outputs)}
	if f.Title == "" {
		f.Title = r.CallbackID
	}
	if f.Description == "" {
		// Slack's schema requires one; the route's description key sets it.
		f.Description = "Workflow step " + r.CallbackID + ", run by ackd route " + r.Name
	}
	if b.functions == nil {
		b.functions, b.declared = map[string]Function{}, map[string]bool{}
	}
	declares := r.Title != "" || r.Description != "" || len(r.Inputs)+len(r.Outputs) > 0
	_, seen := b.functions[r.CallbackID]
	switch {
	case !seen || (declares && !b.declared[r.CallbackID]):
		b.functions[r.CallbackID] = f
		if declares {
			b.declared[r.CallbackID] = true
		}
	case declares:
		b.note("route %q declares function %s again: the manifest keeps the first declaration's title, inputs and outputs", r.Name, r.CallbackID)
	}
}

func params(in map[string]config.FunctionParam) map[string]Param {
	out := make(map[string]Param, len(in))
	for name, p := range in {
		out[name] = Param{Type: p.Type, Title: p.Title, Description: p.Description, IsRequired: p.Required, Hint: p.Hint, Name: name}
	}
	return out
}

func (b *builder) sortedScopes() []string { return sortedKeys(b.scopes) }

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// displayName makes a bot display name of name: lowercase a-z, 0-9, -, _
// and ".", at most 80 characters.
func displayName(name string) string {
	var sb strings.Builder
	for _, c := range strings.ToLower(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			sb.WriteRune(c)
		default:
			sb.WriteByte('-')
		}
	}
	s := strings.Trim(sb.String(), "-")
	if s == "" {
		s = "ackd"
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
