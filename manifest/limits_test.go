package manifest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
)

// A config the daemon accepts can ask for more than a Slack app holds:
// Build refuses it, naming the limit, and Slack's schema refuses the
// manifest it would have printed (so each limit is the schema's).
func TestSlackLimits(t *testing.T) {
	route := func(i int, body string) string { return fmt.Sprintf("[[route]]\nname = \"r%d\"\n%s\n", i, body) }
	many := func(n int, f func(i int) string) string {
		var sb strings.Builder
		for i := range n {
			sb.WriteString(f(i))
		}
		return sb.String()
	}
	events := func(n int) string {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("%q", fmt.Sprintf("custom_event_%d", i)))
		}
		return route(0, "events = ["+strings.Join(names, ", ")+"]\neffect = \"log\"")
	}
	oauth := func(scopes, userScopes []string, redirect string) string {
		q := func(l []string) string {
			var out []string
			for _, s := range l {
				out = append(out, fmt.Sprintf("%q", s))
			}
			return "[" + strings.Join(out, ", ") + "]"
		}
		return "[oauth]\nclient_id = \"1.2\"\nscopes = " + q(scopes) + "\nuser_scopes = " + q(userScopes) + "\nredirect_url = \"" + redirect + "\"\n"
	}
	inputs := func(n int) string {
		return many(n, func(i int) string { return fmt.Sprintf("[route.inputs.in%d]\ntype = \"string\"\n", i) })
	}
	manyScopes := make([]string, maxScopes+1)
	for i := range manyScopes {
		manyScopes[i] = fmt.Sprintf("scope:%d", i)
	}
	for _, c := range []struct {
		name, toml, want string
	}{
		{"51 slash commands", many(maxCommands+1, func(i int) string { return route(i, fmt.Sprintf("command = \"/c%d\"\neffect = \"log\"", i)) }),
			"the routes take 51 slash commands; a Slack app has at most 50"},
		{"a command of one character", route(0, "command = \"/\"\neffect = \"log\""),
			`slash command "/": Slack takes a command of 2 to 32 characters, its / included`},
		{"a command of 33 characters", route(0, "command = \"/"+strings.Repeat("d", 32)+"\"\neffect = \"log\""),
			`slash command "/` + strings.Repeat("d", 32) + `": Slack takes a command of 2 to 32 characters, its / included`},
		{"101 bot events", events(maxBotEvents + 1), "the manifest subscribes to 101 bot events; Slack allows at most 100"},
		{"an event name of 51 characters", route(0, "event = \""+strings.Repeat("e", 51)+"\"\neffect = \"log\""),
			`event "` + strings.Repeat("e", 51) + `" is longer than any Slack event type (at most 50 characters)`},
		{"256 bot scopes", oauth(manyScopes, nil, "https://a.example.com/r") + route(0, "event = \"app_home_opened\"\neffect = \"log\""),
			"256 bot scopes; Slack allows at most 255"},
		{"a user scope of 51 characters", oauth([]string{"commands"}, []string{strings.Repeat("s", 51)}, "https://a.example.com/r") + route(0, "command = \"/d\"\neffect = \"log\""),
			`user scope "` + strings.Repeat("s", 51) + `" is longer than any Slack scope (at most 50 characters)`},
		{"a redirect URL of 2501 characters", oauth([]string{"commands"}, nil, "https://a.example.com/"+strings.Repeat("r", 2501-len("https://a.example.com/"))) + route(0, "command = \"/d\"\neffect = \"log\""),
			"[oauth] redirect_url is 2501 characters; Slack allows at most 2500"},
		{"51 functions", many(maxFunctions+1, func(i int) string {
			return route(i, fmt.Sprintf("event = \"function_executed\"\ncallback_id = \"f%d\"\neffect = \"step\"\nurl = \"http://127.0.0.1:1/s\"", i))
		}), "the routes declare 51 workflow steps; a Slack app has at most 50 functions"},
		{"a function with 51 inputs", route(0, "event = \"function_executed\"\ncallback_id = \"f\"\neffect = \"step\"\nurl = \"http://127.0.0.1:1/s\"\n"+inputs(maxFunctionArgs+1)),
			"function f has 51 inputs; Slack allows at most 50"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(c.toml))
			if err != nil {
				t.Fatalf("the daemon refuses the config, so the limit needs no check here: %v", err)
			}
			if _, err := Build(&cfg, Options{URL: testURL}); err == nil || err.Error() != c.want {
				t.Errorf("Build: %v, want %q", err, c.want)
			}
			unchecked, err := build(&cfg, Options{URL: testURL})
			if err != nil {
				t.Fatal(err)
			}
			j, err := unchecked.JSON()
			if err != nil {
				t.Fatal(err)
			}
			if err := schemaErr(t, j, false); err == nil {
				t.Errorf("%s takes the manifest past the limit: the limit is not Slack's", schemaOrigin)
			}
		})
	}
}
