package manifest

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/slackrate"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

const testURL = "https://ackd.example.com"

// exampleConfigs are every configuration the project ships or documents as
// a whole: the examples, the unit's config, and each block of the README
// and docs/ (```toml or a <<'TOML' here-document) that parses as a config
// with routes.
func exampleConfigs(t *testing.T) map[string]config.Config {
	t.Helper()
	out := map[string]config.Config{}
	for _, f := range []string{"../examples/ackd.toml", "../examples/bolt/ackd.toml", "../systemd/ackd.toml"} {
		cfg, err := config.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = cfg
	}
	pages := []string{"../README.md"}
	if err := filepath.WalkDir("../docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)(?:```toml\n(.*?)```|<<'TOML'\n(.*?)\nTOML\n)")
	found := 0
	for _, page := range pages {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatchIndex(doc, -1) {
			text := ""
			for g := 1; g <= 2; g++ {
				if m[2*g] >= 0 {
					text = string(doc[m[2*g]:m[2*g+1]])
				}
			}
			if !strings.Contains(text, "[[route]]") {
				continue
			}
			cfg, err := config.Parse([]byte(text))
			if err != nil {
				continue // a fragment (routes only, or keys of one section)
			}
			line := strings.Count(string(doc[:m[0]]), "\n") + 1
			out[strings.TrimPrefix(page, "../")+":"+strconv.Itoa(line)] = cfg
			found++
		}
	}
	if found < 2 {
		t.Fatalf("found %d whole configs in README.md and docs/; the tutorial's workspace and Socket Mode's local development each have one", found)
	}
	return out
}

// The test's own reading of Slack's documentation, written apart from
// scopes.go so that one checks the other: the scope each effect's calls
// need, and the scope of each event the shipped configs route.
var (
	wantEffectScopes = map[string][]string{
		"post":   {"chat:write"},      // chat.postMessage
		"update": {"chat:write"},      // chat.update
		"react":  {"reactions:write"}, // reactions.add
		"stream": {"chat:write"},      // assistant.threads.setStatus, chat.startStream…, chat.update, chat.delete
	}
	wantEventScopes = map[string][]string{
		"app_mention":    {"app_mentions:read"},
		"reaction_added": {"reactions:read"},
		// docs.slack.dev/reference/events/assistant_thread_started: assistant:write.
		"assistant_thread_started": {"assistant:write"},
		// docs.slack.dev/reference/events/agent_session_stopped: chat:write
		// (slack-ruby/slack-api-ref's mirror of Slack's event JSON).
		"agent_session_stopped": {"chat:write"},
		"message":               {"channels:history", "groups:history", "im:history", "mpim:history"},
	}
	wantMessageEvents = []string{"message.channels", "message.groups", "message.im", "message.mpim"}
	historyScopes     = []string{"channels:history", "groups:history", "im:history", "mpim:history"}
)

func TestShippedConfigsManifests(t *testing.T) {
	for name, cfg := range exampleConfigs(t) {
		t.Run(name, func(t *testing.T) {
			res, err := Build(&cfg, Options{URL: testURL})
			if err != nil {
				t.Fatal(err)
			}
			y, err := res.YAML()
			if err != nil {
				t.Fatal(err)
			}
			j, err := res.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var fromYAML, fromJSON map[string]any
			if err := yaml.Unmarshal(y, &fromYAML); err != nil {
				t.Fatalf("YAML does not parse: %v\n%s", err, y)
			}
			if err := json.Unmarshal(j, &fromJSON); err != nil {
				t.Fatalf("JSON does not parse: %v\n%s", err, j)
			}
			for form, doc := range map[string]map[string]any{"yaml": fromYAML, "json": fromJSON} {
				checkManifest(t, form, &cfg, doc)
			}
		})
	}
}

// checkManifest checks a parsed manifest against the config it was made
// for, from the document alone.
func checkManifest(t *testing.T, form string, cfg *config.Config, doc map[string]any) {
	t.Helper()
	get := func(path ...string) any {
		var v any = doc
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[p]
		}
		return v
	}
	strs := func(v any) []string {
		var out []string
		l, _ := v.([]any)
		for _, e := range l {
			s, _ := e.(string)
			out = append(out, s)
		}
		return out
	}
	errorf := func(format string, a ...any) { t.Helper(); t.Errorf(form+": "+format, a...) }
	if s, _ := get("display_information", "name").(string); s == "" || len(s) > 35 {
		errorf("display_information.name %q: required, at most 35 characters", s)
	}
	if s, _ := get("features", "bot_user", "display_name").(string); s == "" {
		errorf("features.bot_user.display_name is required")
	}
	socket := cfg.Socket.Enabled
	if b, ok := get("settings", "socket_mode_enabled").(bool); !ok || b != socket {
		errorf("settings.socket_mode_enabled = %v, want %v", get("settings", "socket_mode_enabled"), socket)
	}
	url := func(path string) string {
		if socket {
			return ""
		}
		return testURL + path
	}
	scopes := strs(get("oauth_config", "scopes", "bot"))
	events := strs(get("settings", "event_subscriptions", "bot_events"))
	needScope := func(why string, s ...string) {
		t.Helper()
		for _, v := range s {
			if !slices.Contains(scopes, v) {
				errorf("scopes %v lack %s (%s)", scopes, v, why)
			}
		}
	}
	needEvent := func(why string, e ...string) {
		t.Helper()
		for _, v := range e {
			if !slices.Contains(events, v) {
				errorf("bot_events %v lack %s (%s)", events, v, why)
			}
		}
	}
	if len(events) > 0 {
		if got, _ := get("settings", "event_subscriptions", "request_url").(string); got != url("/slack/events") {
			errorf("event_subscriptions.request_url = %q, want %q", got, url("/slack/events"))
		}
	}
	interactive, commands := false, map[string]bool{}
	for _, r := range cfg.Routes {
		why := "route " + r.Name
		source := sweep.SourceEvent
		switch {
		case r.Command != "":
			source = sweep.SourceCommand
			needScope(why, "commands")
			if r.Command != "*" {
				commands[r.Command] = true
			}
		case (r.CallbackID != "" || r.ActionID != "") && r.Event == "" && len(r.Events) == 0:
			// A function_executed route's callback_id is its function's,
			// not an interaction's.
			source = sweep.SourceInteraction
			interactive = true
		default:
			for _, ev := range append([]string{r.Event}, r.Events...) {
				switch ev {
				case "", "*":
				case "function_executed":
					// The step is declared under functions, by its
					// callback_id, with a description (Slack's schema
					// requires one); Slack's custom-step template
					// subscribes the event and runs it remotely
					// (SLACK_FACTS §12).
					if r.CallbackID != "" && r.CallbackID != "*" {
						if d, _ := get("functions", r.CallbackID, "description").(string); d == "" {
							errorf("functions lack %s with a description (route %s)", r.CallbackID, r.Name)
						}
					}
					needEvent(why, ev)
					if s, _ := get("settings", "function_runtime").(string); s != "remote" {
						errorf("settings.function_runtime = %q, want \"remote\" (%s)", s, why)
					}
				case "message":
					needEvent(why, wantMessageEvents...)
					needScope(why, wantEventScopes[ev]...)
				default:
					needEvent(why, ev)
					want, ok := wantEventScopes[ev]
					if !ok {
						errorf("%s routes %s: add its Required scopes to this test's wantEventScopes", why, ev)
					}
					needScope(why, want...)
				}
			}
		}
		if r.Effect == "stream" {
			// DESIGN §12: Slack's Stop button, the session's status, and
			// the agent feature (agent_view unless Options say otherwise).
			needEvent(why+" effect stream", "agent_session_stopped")
			needScope(why+" effect stream", "assistant:write")
			if get("features", "agent_view") == nil && get("features", "assistant_view") == nil {
				errorf("features declare neither agent_view nor assistant_view (%s effect stream)", why)
			}
		}
		effect := r.Effect
		if effect == "forward" && source == sweep.SourceEvent {
			effect = "post" // the handler's reply is posted in the event's thread
		}
		needScope(why+" effect "+r.Effect, wantEffectScopes[effect]...)
		if effect == "post" && cfg.Slack.ConfirmPosts {
			needScope(why+": post confirmation reads history", historyScopes...)
		}
	}
	if len(cfg.BackfillChannels()) > 0 {
		needScope("catch-up reads history", historyScopes...)
	}
	if cfg.OAuth != nil {
		needEvent("[oauth] acts on uninstalls", "app_uninstalled", "tokens_revoked")
		needScope("[oauth] scopes", cfg.OAuth.Scopes...)
		if got := strs(get("oauth_config", "redirect_urls")); !slices.Equal(got, []string{cfg.OAuth.RedirectURL}) {
			errorf("oauth_config.redirect_urls = %v, want [%s]", got, cfg.OAuth.RedirectURL)
		}
	}
	if interactive {
		if b, _ := get("settings", "interactivity", "is_enabled").(bool); !b {
			errorf("settings.interactivity.is_enabled must be true: interactions are routed")
		}
		if got, _ := get("settings", "interactivity", "request_url").(string); got != url("/slack/interactivity") {
			errorf("settings.interactivity.request_url = %q, want %q", got, url("/slack/interactivity"))
		}
	}
	listed := map[string]bool{}
	cmds, _ := get("features", "slash_commands").([]any)
	for _, c := range cmds {
		m := c.(map[string]any)
		name, _ := m["command"].(string)
		listed[name] = true
		if d, _ := m["description"].(string); d == "" {
			errorf("slash command %s has no description (Slack requires one)", name)
		}
		if u, _ := m["url"].(string); u != url("/slack/commands") {
			errorf("slash command %s url = %q, want %q", name, u, url("/slack/commands"))
		}
	}
	for c := range commands {
		if !listed[c] {
			errorf("slash command %s is routed but not in features.slash_commands", c)
		}
	}
}

// Every effect the sweep performs is performed here against the fake
// Slack, on a row whose earlier outcome is unknown (so a post looks for
// itself first), its follow-ups too; each Web API method it calls must be
// one whose scope the manifest for a route of that effect grants.
func TestEffectsCallOnlyWhatTheManifestGrants(t *testing.T) {
	fake := fakeslack.New(t, "xoxb-test")
	hook := fakeslack.NewHook(t)
	reg := sweep.Effects(sweep.EffectConfig{BotToken: "xoxb-test", APIURL: fake.URL(), RedeliverSecret: "s",
		History: slackrate.New(6000)})
	env := `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention","channel":"C1","ts":"1.000001","text":"hi"}}`
	for _, effect := range slices.Sorted(mapsKeys(reg)) {
		step := effect == sweep.EffectStep || effect == sweep.EffectStepDeadline
		stop := effect == sweep.EffectStreamStop
		for _, source := range []string{sweep.SourceEvent, sweep.SourceCommand} {
			if (step || stop) && source != sweep.SourceEvent {
				continue // a step takes function_executed, a stop agent_session_stopped
			}
			t.Run(effect+"/"+source, func(t *testing.T) {
				route := config.Route{Name: "r", Effect: effect, Text: "x", Reaction: "eyes", URL: hook.URL()}
				env := env
				switch {
				case step:
					route.Event, route.CallbackID = config.EventFunctionExecuted, "approve"
					fake.AddExecution("Fx"+effect, "xwfp-"+effect)
					env = `{"type":"event_callback","event_id":"Ev1","event":{"type":"function_executed","function_execution_id":"Fx` +
						effect + `","bot_access_token":"xwfp-` + effect + `","function":{"callback_id":"approve"}}}`
				case stop:
					route.Event = "agent_session_stopped"
					env = `{"type":"event_callback","event_id":"Ev1","event":{"type":"agent_session_stopped","channel":"C1","user":"U1","thread_ts":"1.000001","streaming_message_ts":["1.000002"],"event_ts":"1.000003"}}`
				case source == sweep.SourceEvent:
					route.Event = "app_mention"
				default:
					route.Command = "/x"
				}
				cfg := config.Default()
				cfg.Routes = []config.Route{route}
				res, err := Build(&cfg, Options{URL: testURL})
				if err != nil {
					t.Fatalf("the manifest does not know effect %s: %v", effect, err)
				}
				granted := res.Manifest.OAuthConfig.Scopes.Bot
				before := len(fake.Calls())
				reply := `{"text":"reply"}`
				if step {
					reply = `{"outputs":{}}`
				}
				hook.Script(fakeslack.Response{Body: reply})
				p := sweep.Payload{Route: "r", Source: source,
					Params: sweep.Params{Text: "x", Reaction: "eyes", URL: hook.URL(), ResponseURL: hook.URL(), Thread: true},
					Facts:  sweep.Facts{EventID: "Ev1", Team: "T1", User: "U1", Channel: "C1", TS: "1.000001", ResponseURL: hook.URL()}}
				if stop {
					p.Facts.ThreadTS = "1.000001"
				}
				if source == sweep.SourceEvent {
					p.Raw = json.RawMessage(env)
					p.Facts.ResponseURL = "" // events carry none
				} else {
					p.Raw = json.RawMessage(`{"command":"/x","channel_id":"C1"}`)
				}
				req := &store.Request{ContentType: "application/json", Body: []byte(env)}
				if source != sweep.SourceEvent {
					req = &store.Request{ContentType: "application/x-www-form-urlencoded", Body: []byte("command=%2Fx&channel_id=C1")}
				}
				jobs := []sweep.Job{{Row: store.Row{ID: 1, Key: "k", Effect: effect, OutcomeUnknown: true, RequestID: "Ev1", Request: req}, Payload: p, Attempt: 2,
					Stops: &memStops{}}}
				for len(jobs) > 0 {
					job := jobs[0]
					jobs = jobs[1:]
					out, err := reg[job.Row.Effect].Perform(context.Background(), job)
					if err != nil {
						t.Fatalf("%s: %v", job.Row.Effect, err)
					}
					for i, f := range out.FollowUps {
						fp, err := sweep.DecodePayload(f.Payload)
						if err != nil {
							t.Fatal(err)
						}
						jobs = append(jobs, sweep.Job{Row: store.Row{ID: int64(10 + i), Key: f.Key, Effect: f.Effect, OutcomeUnknown: true}, Payload: fp, Attempt: 2})
					}
				}
				for _, c := range fake.Calls()[before:] {
					s, ok := methodScopes[c.Method]
					if !ok {
						t.Errorf("effect %s called %s, which methodScopes does not list", effect, c.Method)
						continue
					}
					for _, sc := range s {
						if sc == historyScope {
							if !slices.Contains(granted, "channels:history") {
								t.Errorf("effect %s called %s; the manifest grants no *:history scope: %v", effect, c.Method, granted)
							}
						} else if !slices.Contains(granted, sc) {
							t.Errorf("effect %s called %s, which needs %s; the manifest grants %v", effect, c.Method, sc, granted)
						}
					}
				}
			})
		}
	}
}

func mapsKeys[M ~map[string]V, V any](m M) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestManifestShapes(t *testing.T) {
	parse := func(t *testing.T, toml string) *config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(toml))
		if err != nil {
			t.Fatal(err)
		}
		return &cfg
	}
	t.Run("socket mode has no request URLs and needs no --url", func(t *testing.T) {
		cfg := parse(t, "[socket_mode]\nenabled = true\n[[route]]\nname=\"d\"\ncommand=\"/d\"\ndescription=\"Deploy\"\neffect=\"log\"\n[[route]]\nname=\"a\"\naction_id=\"a\"\neffect=\"log\"\n[[route]]\nname=\"m\"\nevent=\"app_mention\"\neffect=\"log\"\n")
		res, err := Build(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		m := res.Manifest
		if !m.Settings.SocketModeEnabled || m.Settings.EventSubscriptions.RequestURL != "" || m.Settings.Interactivity.RequestURL != "" || m.Features.SlashCommands[0].URL != "" {
			t.Errorf("socket mode manifest: %+v", m)
		}
		if d := m.Features.SlashCommands[0].Description; d != "Deploy" {
			t.Errorf("description = %q, want the route's", d)
		}
		if !m.Settings.Interactivity.IsEnabled {
			t.Error("interactivity not enabled")
		}
	})
	t.Run("channel types narrow message and history", func(t *testing.T) {
		cfg := parse(t, "[[route]]\nname=\"e\"\nevent=\"message\"\neffect=\"post\"\ntext=\"x\"\n")
		res, err := Build(cfg, Options{URL: testURL, ChannelTypes: []string{Public}})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Manifest.Settings.EventSubscriptions.BotEvents; !slices.Equal(got, []string{"message.channels"}) {
			t.Errorf("bot_events = %v", got)
		}
		if got := res.Manifest.OAuthConfig.Scopes.Bot; !slices.Equal(got, []string{"channels:history", "chat:write"}) {
			t.Errorf("scopes = %v", got)
		}
		if res.Manifest.Features.AppHome != nil {
			t.Error("app_home without im")
		}
	})
	t.Run("oauth adds uninstall events, redirect url, and says which scopes it lacks", func(t *testing.T) {
		cfg := parse(t, "[oauth]\nclient_id=\"1.2\"\nscopes=[\"chat:write\"]\nredirect_url=\"https://a.example.com/slack/oauth_redirect\"\n[[route]]\nname=\"e\"\nevent=\"reaction_added\"\neffect=\"react\"\nreaction=\"eyes\"\n")
		res, err := Build(cfg, Options{URL: testURL})
		if err != nil {
			t.Fatal(err)
		}
		m := res.Manifest
		if got := m.Settings.EventSubscriptions.BotEvents; !slices.Equal(got, []string{"app_uninstalled", "reaction_added", "tokens_revoked"}) {
			t.Errorf("bot_events = %v", got)
		}
		if !slices.Equal(m.OAuthConfig.RedirectURLs, []string{"https://a.example.com/slack/oauth_redirect"}) {
			t.Errorf("redirect_urls = %v", m.OAuthConfig.RedirectURLs)
		}
		want := "[oauth] scopes lacks reactions:read, reactions:write, which the routes need: the install flow asks Slack for [oauth] scopes only, so add them there too"
		if !slices.Contains(res.Notes, want) {
			t.Errorf("notes = %q, want %q", res.Notes, want)
		}
	})
	t.Run("step routes declare their functions, with the inputs and outputs the config gives", func(t *testing.T) {
		cfg := parse(t, `
[[route]]
name        = "approve"
event       = "function_executed"
callback_id = "approve_request"
effect      = "step"
url         = "http://127.0.0.1:8080/steps/approve"
title       = "Approve a request"
description = "Asks a manager to approve"
[route.inputs.requester]
type     = "slack#/types/user_id"
title    = "Requester"
required = true
hint     = "Who asks"
[route.inputs.amount]
type = "integer"
[route.outputs.approver]
type        = "slack#/types/user_id"
description = "Who approved"
required    = true

[[route]]
name      = "approve-button"
action_id = "approve"
effect    = "step"
url       = "http://127.0.0.1:8080/steps/button"

[[route]]
name   = "any-step"
event  = "function_executed"
effect = "log"
`)
		res, err := Build(cfg, Options{URL: testURL})
		if err != nil {
			t.Fatal(err)
		}
		m := res.Manifest
		f, ok := m.Functions["approve_request"]
		if !ok || len(m.Functions) != 1 {
			t.Fatalf("functions = %+v", m.Functions)
		}
		want := Function{Title: "Approve a request", Description: "Asks a manager to approve",
			InputParameters: map[string]Param{
				"requester": {Type: "slack#/types/user_id", Title: "Requester", IsRequired: true, Hint: "Who asks", Name: "requester"},
				"amount":    {Type: "integer", Name: "amount"},
			},
			OutputParameters: map[string]Param{"approver": {Type: "slack#/types/user_id", Description: "Who approved", IsRequired: true, Name: "approver"}},
		}
		if fmt := fmtJSON(t, f); fmt != fmtJSON(t, want) {
			t.Errorf("function = %s, want %s", fmt, fmtJSON(t, want))
		}
		if !m.Settings.OrgDeployEnabled {
			t.Error("org_deploy_enabled is off: Workflow Builder shows an app's steps only when it is on")
		}
		if m.Settings.FunctionRuntime != "remote" {
			t.Errorf("function_runtime = %q: steps added through the manifest run on the app's server (\"remote\")", m.Settings.FunctionRuntime)
		}
		// Issue 39.5: Slack's custom-step template subscribes
		// function_executed (SLACK_FACTS §12), which §11 had said needs no
		// subscription; the request URL is the events one.
		es := m.Settings.EventSubscriptions
		if es == nil || es.RequestURL != testURL+"/slack/events" || !slices.Equal(es.BotEvents, []string{"function_executed"}) {
			t.Errorf("event_subscriptions = %+v, want function_executed at the events request URL", es)
		}
		if m.Settings.Interactivity == nil || !m.Settings.Interactivity.IsEnabled {
			t.Error("interactivity off with a step route on a button")
		}
		if len(m.OAuthConfig.Scopes.Bot) != 0 {
			t.Errorf("scopes %v: a step's calls use the execution's token", m.OAuthConfig.Scopes.Bot)
		}
		if note := `route "any-step" takes every function (no callback_id): declare each of your steps in functions by hand, or give each its route with callback_id, title, inputs and outputs`; !slices.Contains(res.Notes, note) {
			t.Errorf("notes %q", res.Notes)
		}
		y, err := res.YAML()
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := yaml.Unmarshal(y, &back); err != nil {
			t.Fatal(err)
		}
		fns, _ := back["functions"].(map[string]any)
		if _, ok := fns["approve_request"]; !ok {
			t.Errorf("YAML has no functions.approve_request:\n%s", y)
		}
	})
	t.Run("what the manifest cannot say is a note", func(t *testing.T) {
		res, err := Build(parse(t, "[[route]]\nname=\"all\"\nevent=\"*\"\neffect=\"redeliver\"\nurl=\"http://127.0.0.1:1/x\"\n[[route]]\nname=\"c\"\ncommand=\"*\"\neffect=\"log\"\n"), Options{URL: testURL})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`route "all" takes every event (event = "*"): add the events you want to settings.event_subscriptions.bot_events by hand, each with its scope`,
			`route "all" redelivers to your app (http://127.0.0.1:1/x): add the scopes and events your app's own code uses`,
			`route "c" takes every slash command (command = "*"): add each of your commands to features.slash_commands by hand`,
		} {
			if !slices.Contains(res.Notes, want) {
				t.Errorf("notes %q lack %q", res.Notes, want)
			}
		}
	})
}

func fmtJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckURL(t *testing.T) {
	for raw, want := range map[string]string{
		"":                           "--url is empty: give the public https:// address Slack reaches ackd at, e.g. --url https://ackd.example.com",
		"http://ackd.example.com":    `--url "http://ackd.example.com" must start with https://: Slack sends requests only to HTTPS URLs with a valid certificate`,
		"ackd.example.com":           `--url "ackd.example.com" is not an absolute URL: give the public https:// address Slack reaches ackd at, e.g. --url https://ackd.example.com`,
		"https://a.example.com/?x=1": `--url "https://a.example.com/?x=1" must be a plain https://host[/path], without user, query or fragment`,
	} {
		if _, err := CheckURL(raw); err == nil || err.Error() != want {
			t.Errorf("CheckURL(%q) = %v, want %q", raw, err, want)
		}
	}
	if got, err := CheckURL("https://a.example.com/ackd/"); err != nil || got != "https://a.example.com/ackd" {
		t.Errorf("CheckURL with a path = %q, %v", got, err)
	}
}

// memStops keeps users' stops in memory, for effects performed without a
// store (store.StreamStops).
type memStops struct {
	mu    sync.Mutex
	stops map[string]string
}

func (m *memStops) RecordStop(_ context.Context, st store.StreamStop) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stops == nil {
		m.stops = map[string]string{}
	}
	k := st.Channel + "/" + st.ThreadTS
	cur, _ := store.SlackTSMicros(m.stops[k])
	if n, ok := store.SlackTSMicros(st.StopTS); !ok || n <= cur {
		return false, nil
	}
	m.stops[k] = st.StopTS
	return true, nil
}

func (m *memStops) StreamStopped(_ context.Context, channel, threadTS string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stops[channel+"/"+threadTS], nil
}
