package manifest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// schemaOrigin names the schema every manifest is checked against, for
// failure messages: where it came from and where its copy is.
const schemaOrigin = "Slack's published app manifest schema (github.com/slackapi/manifest-schema at c50cfa8, 2026-07-21, MIT; copy in manifest/testdata/slack-schema, see its README.md)"

// The schema's files by the URL each is known by: the top-level file's own
// $id, and the URLs its oneOf refers to (tag v0.5.0, the same files as
// c50cfa8). Nothing is fetched: a $ref to any other URL fails to compile.
const schemaTop = "https://github.com/slackapi/manifest-schema/blob/main/manifest.schema.json"

var schemaFiles = map[string]string{
	schemaTop: "manifest.schema.json",
	"https://raw.githubusercontent.com/slackapi/manifest-schema/v0.5.0/schemas/manifest.schema.1.0.0.json": "manifest.schema.1.0.0.json",
	"https://raw.githubusercontent.com/slackapi/manifest-schema/v0.5.0/schemas/manifest.schema.2.0.0.json": "manifest.schema.2.0.0.json",
}

var slackSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	// JSON Schema's patterns are ECMA-262 regular expressions, and Slack's
	// use a lookahead (unfurl_domains, outgoing_domains: "^(?![\\.\\-])…")
	// that Go's regexp refuses.
	c.UseRegexpEngine(ecmaRegexp)
	for url, file := range schemaFiles {
		f, err := os.Open(filepath.Join("testdata", "slack-schema", file))
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		if err := c.AddResource(url, doc); err != nil {
			return nil, err
		}
	}
	return c.Compile(schemaTop)
})

// ecmaRegexp compiles a schema's pattern as ECMAScript (dlclark/regexp2),
// as the validator's own example does.
func ecmaRegexp(s string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(s, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	return ecma{re}, nil
}

type ecma struct{ re *regexp2.Regexp }

func (e ecma) MatchString(s string) bool {
	ok, err := e.re.MatchString(s)
	return err == nil && ok // a match that errs (a timeout) is no match
}

func (e ecma) String() string { return e.re.String() }

// schemaErr validates one manifest document (JSON or YAML) against Slack's
// schema; nil when it holds.
func schemaErr(t *testing.T, doc []byte, isYAML bool) error {
	t.Helper()
	sch, err := slackSchema()
	if err != nil {
		t.Fatalf("compile %s: %v", schemaOrigin, err)
	}
	if isYAML {
		var v any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			t.Fatalf("YAML does not parse: %v\n%s", err, doc)
		}
		if doc, err = json.Marshal(v); err != nil {
			t.Fatalf("YAML as JSON: %v", err)
		}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("JSON does not parse: %v\n%s", err, doc)
	}
	return sch.Validate(v)
}

// checkAgainstSlackSchema renders a Build result in both forms ackd prints
// and fails the test, naming the schema's origin, if either is invalid.
func checkAgainstSlackSchema(t *testing.T, name string, res Result) {
	t.Helper()
	y, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	j, err := res.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for form, doc := range map[string][]byte{"YAML": y, "JSON": j} {
		if err := schemaErr(t, doc, form == "YAML"); err != nil {
			t.Errorf("%s: the %s manifest `ackd manifest` prints is invalid against %s:\n%v\n%s", name, form, schemaOrigin, err, doc)
		}
	}
}

// The validator is real: it takes Slack's own valid example and refuses
// Slack's invalid one (slackapi/manifest-schema tests/manifests/v1, same
// commit), and refuses the mistakes issue 39 found in ackd's manifests.
func TestSlackSchemaValidator(t *testing.T) {
	read := func(t *testing.T, name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("testdata", "slack-schema", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Run("Slack's valid example validates, with and without _metadata", func(t *testing.T) {
		valid := read(t, "v1.manifest.valid.json")
		if err := schemaErr(t, valid, false); err != nil {
			t.Errorf("%s refuses Slack's own valid example: %v", schemaOrigin, err)
		}
		var m map[string]any
		if err := json.Unmarshal(valid, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "_metadata")
		b, _ := json.Marshal(m)
		if err := schemaErr(t, b, false); err != nil {
			t.Errorf("without _metadata: %v", err)
		}
	})
	t.Run("Slack's invalid example is refused", func(t *testing.T) {
		if err := schemaErr(t, read(t, "v1.manifest.invalid.json"), false); err == nil {
			t.Errorf("%s takes Slack's invalid example", schemaOrigin)
		}
	})
	base := `{"display_information":{"name":"ackd"},"features":{"bot_user":{"display_name":"ackd"}%s},"settings":{"socket_mode_enabled":true}%s}`
	for _, c := range []struct{ name, features, top string }{
		{"a function without description", "", `,"functions":{"f":{"title":"F","input_parameters":{},"output_parameters":{}}}`},
		{"a function without output_parameters", "", `,"functions":{"f":{"title":"F","description":"d","input_parameters":{}}}`},
		{"assistant_view without assistant_description", `,"assistant_view":{}`, ""},
		{"agent_view with an unknown key", `,"agent_view":{"description":"x"}`, ""},
		{"agent_view's description over 300 characters", `,"agent_view":{"agent_description":"` + strings.Repeat("x", 301) + `"}`, ""},
		{"an unknown feature", `,"agent":{}`, ""},
	} {
		t.Run("refuses "+c.name, func(t *testing.T) {
			doc := []byte(strings.Replace(strings.Replace(base, "%s", c.features, 1), "%s", c.top, 1))
			if err := schemaErr(t, doc, false); err == nil {
				t.Errorf("%s takes %s:\n%s", schemaOrigin, c.name, doc)
			}
		})
	}
}

// Issue 39.5: every manifest ackd prints validates against Slack's
// published schema: that of every config the project ships or documents
// (exampleConfigs), in both views, and of synthetic configs covering each
// part of a manifest.
func TestManifestsValidateAgainstSlackSchema(t *testing.T) {
	type variant struct {
		name string
		cfg  config.Config
		o    Options
	}
	var all []variant
	for name, cfg := range exampleConfigs(t) {
		for _, view := range []string{AgentViewNew, AssistantViewLegacy} {
			all = append(all, variant{name + " (" + view + ")", cfg, Options{URL: testURL, AgentView: view}})
		}
	}
	shipped := len(all)
	parse := func(toml string) config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte(toml))
		if err != nil {
			t.Fatalf("%v\n%s", err, toml)
		}
		return cfg
	}
	stream := `
[[route]]
name   = "agent"
events = ["app_mention", "message"]
key    = "message"
effect = "stream"
url    = "http://127.0.0.1:1/agent"

[[route]]
name   = "assistant"
event  = "assistant_thread_started"
effect = "stream"
url    = "http://127.0.0.1:1/agent"
`
	step := `
[[route]]
name        = "approve"
event       = "function_executed"
callback_id = "approve_request"
effect      = "step"
url         = "http://127.0.0.1:1/steps/approve"
title       = "Approve a request"
description = "Asks a manager to approve"
[route.inputs.requester]
type     = "slack#/types/user_id"
title    = "Requester"
required = true
hint     = "Who asks"
[route.outputs.approver]
type = "slack#/types/user_id"

[[route]]
name        = "bare"
event       = "function_executed"
callback_id = "bare_step"
effect      = "step"
url         = "http://127.0.0.1:1/steps/bare"

[[route]]
name      = "approve-button"
action_id = "approve"
effect    = "step"
url       = "http://127.0.0.1:1/steps/button"

[[route]]
name   = "any-step"
event  = "function_executed"
effect = "log"
`
	commands := `
[[route]]
name        = "deploy"
command     = "/deploy"
description = "Deploy a service"
effect      = "respond"
text        = "deploying"

[[route]]
name    = "status"
command = "/status"
effect  = "log"

[[route]]
name    = "all"
command = "*"
effect  = "log"
`
	interactivity := `
[[route]]
name      = "button"
action_id = "approve"
effect    = "respond"
text      = "ok"

[[route]]
name        = "modal"
callback_id = "feedback"
effect      = "forward"
url         = "http://127.0.0.1:1/modal"
`
	oauth := `
[oauth]
client_id    = "1.2"
scopes       = ["chat:write", "commands"]
user_scopes  = ["search:read"]
redirect_url = "https://ackd.example.com/slack/oauth_redirect"

[[route]]
name     = "eyes"
event    = "reaction_added"
effect   = "react"
reaction = "eyes"
`
	socket := "[socket_mode]\nenabled = true\n"
	events := `
[[route]]
name   = "mentions"
event  = "app_mention"
effect = "post"
text   = "hi"
thread = true

[[route]]
name   = "everything"
event  = "*"
effect = "redeliver"
url    = "http://127.0.0.1:1/bolt"

[[route]]
name   = "joins"
event  = "member_joined_channel"
effect = "log"

[[route]]
name   = "limited"
event  = "app_rate_limited"
effect = "log"
`
	synthetic := []struct {
		name string
		toml string
		o    Options
	}{
		{"no routes", "", Options{URL: testURL}},
		{"stream, agent_view (the default)", stream, Options{URL: testURL}},
		{"stream, agent_view with a description", stream, Options{URL: testURL, AgentView: AgentViewNew, AgentDescription: strings.Repeat("d", maxAgentDescription)}},
		{"stream, assistant_view", stream, Options{URL: testURL, AgentView: AssistantViewLegacy}},
		{"stream over socket mode, assistant_view", socket + stream, Options{AgentView: AssistantViewLegacy}},
		{"step", step, Options{URL: testURL}},
		{"step over socket mode", socket + step, Options{}},
		{"commands", commands, Options{URL: testURL}},
		{"commands over socket mode", socket + commands, Options{}},
		{"interactivity", interactivity, Options{URL: testURL}},
		{"interactivity over socket mode", socket + interactivity, Options{}},
		{"oauth", oauth, Options{URL: testURL}},
		{"events, one channel type", events, Options{URL: testURL, ChannelTypes: []string{Public}}},
		{"everything at once", oauth + stream + step + commands + interactivity + events, Options{URL: testURL, Name: strings.Repeat("n", 35)}},
		{"everything at once over socket mode", socket + stream + step + commands + interactivity + events, Options{AgentView: AssistantViewLegacy, Name: "Ackd Agent (staging)"}},
	}
	for _, s := range synthetic {
		all = append(all, variant{"synthetic: " + s.name, parse(s.toml), s.o})
	}
	for _, v := range all {
		t.Run(v.name, func(t *testing.T) {
			res, err := Build(&v.cfg, v.o)
			if err != nil {
				t.Fatal(err)
			}
			checkAgainstSlackSchema(t, v.name, res)
			// The schema takes an empty description; Slack's Workflow
			// Builder shows it, and issue 39 asks for one on every function.
			for id, f := range res.Manifest.Functions {
				if strings.TrimSpace(f.Description) == "" {
					t.Errorf("function %s has an empty description", id)
				}
			}
		})
	}
	t.Logf("%d manifests (%d of shipped and documented configs, each in both views; %d synthetic) validated in YAML and JSON against %s",
		len(all), shipped, len(all)-shipped, schemaOrigin)
	if shipped < 2*5 {
		t.Errorf("only %d shipped manifests: exampleConfigs finds the examples, the unit's config and at least two documented configs", shipped)
	}
}

// The manifests for stream and step routes carry what Slack's own
// templates carry for the same app. The excerpts are from:
//   - agent_view: slack-samples/bolt-js-starter-agent
//     claude-agent-sdk/manifest.json at fe9f306 (2026-08-20; agent_view
//     since 956598e, 2026-06-30);
//   - assistant_view: slack-samples/bolt-js-assistant-template
//     manifest.json at 4b5bec7 (2026-07-23);
//   - steps: slack-samples/bolt-js-custom-step-template manifest.json at
//     38b69c6 (2026-07-22).
//
// Those templates predate agent_session_stopped (2026-08-20), which ackd
// adds as DESIGN §12 says; what else differs is the templates' own choice
// (their bot's other scopes, home_tab_enabled, always_online).
func TestManifestsMatchSlackTemplates(t *testing.T) {
	cfgStream, err := config.Parse([]byte("[[route]]\nname=\"agent\"\nevents=[\"app_mention\",\"message\"]\nkey=\"message\"\neffect=\"stream\"\nurl=\"http://127.0.0.1:1/a\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfgStep, err := config.Parse([]byte("[[route]]\nname=\"sample\"\nevent=\"function_executed\"\ncallback_id=\"sample_step\"\neffect=\"step\"\nurl=\"http://127.0.0.1:1/s\"\ntitle=\"Sample step\"\n" +
		"[route.inputs.user_id]\ntype=\"slack#/types/user_id\"\ntitle=\"User\"\ndescription=\"Message recipient\"\nrequired=true\nhint=\"Select a user in the workspace\"\n" +
		"[route.outputs.user_id]\ntype=\"slack#/types/user_id\"\ntitle=\"User\"\ndescription=\"User that completed the step\"\nrequired=true\n"))
	if err != nil {
		t.Fatal(err)
	}
	doc := func(t *testing.T, cfg config.Config, o Options) map[string]any {
		t.Helper()
		res, err := Build(&cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		j, err := res.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	at := func(m map[string]any, path string) any {
		var v any = m
		for _, p := range strings.Split(path, ".") {
			o, _ := v.(map[string]any)
			v = o[p]
		}
		return v
	}
	strs := func(v any) []string {
		var out []string
		for _, e := range v.([]any) {
			out = append(out, e.(string))
		}
		return out
	}
	has := func(t *testing.T, m map[string]any, path string, want ...string) {
		t.Helper()
		got, _ := at(m, path).([]any)
		for _, w := range want {
			if !slices.Contains(strs(got), w) {
				t.Errorf("%s = %v lacks %s, which Slack's template has", path, got, w)
			}
		}
	}
	equal := func(t *testing.T, m map[string]any, path string, want any) {
		t.Helper()
		if got := at(m, path); got != want {
			t.Errorf("%s = %#v; Slack's template has %#v", path, got, want)
		}
	}
	t.Run("agent_view as bolt-js-starter-agent", func(t *testing.T) {
		m := doc(t, cfgStream, Options{URL: testURL})
		if _, ok := at(m, "features.agent_view.agent_description").(string); !ok {
			t.Errorf("features.agent_view = %v; the template has an agent_description", at(m, "features.agent_view"))
		}
		if at(m, "features.assistant_view") != nil {
			t.Error("features.assistant_view beside agent_view: the template has one view")
		}
		equal(t, m, "features.app_home.messages_tab_enabled", true)
		equal(t, m, "features.app_home.messages_tab_read_only_enabled", false)
		has(t, m, "oauth_config.scopes.bot", "app_mentions:read", "assistant:write", "channels:history", "chat:write", "groups:history", "im:history")
		has(t, m, "settings.event_subscriptions.bot_events", "app_mention", "message.channels", "message.groups", "message.im")
		has(t, m, "settings.event_subscriptions.bot_events", agentSessionStopped) // DESIGN §12, newer than the template
	})
	t.Run("assistant_view as bolt-js-assistant-template", func(t *testing.T) {
		m := doc(t, cfgStream, Options{URL: testURL, AgentView: AssistantViewLegacy})
		if _, ok := at(m, "features.assistant_view.assistant_description").(string); !ok {
			t.Errorf("features.assistant_view = %v; the template has an assistant_description", at(m, "features.assistant_view"))
		}
		if at(m, "features.agent_view") != nil {
			t.Error("features.agent_view beside assistant_view")
		}
		equal(t, m, "features.app_home.messages_tab_enabled", true)
		has(t, m, "oauth_config.scopes.bot", "app_mentions:read", "assistant:write", "channels:history", "chat:write", "im:history", "groups:history")
		has(t, m, "settings.event_subscriptions.bot_events", "app_mention", "message.im", agentSessionStopped)
	})
	t.Run("steps as bolt-js-custom-step-template", func(t *testing.T) {
		m := doc(t, cfgStep, Options{URL: testURL})
		equal(t, m, "settings.function_runtime", "remote")
		equal(t, m, "settings.org_deploy_enabled", true)
		has(t, m, "settings.event_subscriptions.bot_events", "function_executed")
		template := `{"sample_step": {
      "title": "Sample step",
      "input_parameters": {"user_id": {"type": "slack#/types/user_id", "title": "User", "description": "Message recipient",
          "is_required": true, "hint": "Select a user in the workspace", "name": "user_id"}},
      "output_parameters": {"user_id": {"type": "slack#/types/user_id", "title": "User", "description": "User that completed the step",
          "is_required": true, "name": "user_id"}}}}`
		var want map[string]any
		if err := json.Unmarshal([]byte(template), &want); err != nil {
			t.Fatal(err)
		}
		got, _ := at(m, "functions").(map[string]any)
		fn, _ := got["sample_step"].(map[string]any)
		if d, _ := fn["description"].(string); d == "" {
			t.Errorf("functions.sample_step has no description (the template's: \"Runs sample step\")")
		}
		delete(fn, "description") // the route gives none: ackd's default
		if a, b := fmtJSON(t, got), fmtJSON(t, want); a != b {
			t.Errorf("functions = %s\nthe template's (its description aside) = %s", a, b)
		}
	})
}
