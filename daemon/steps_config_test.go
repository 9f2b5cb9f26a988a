package daemon_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
)

const stepRoute = `
[[route]]
name        = "approve"
event       = "function_executed"
callback_id = "approve_request"
effect      = "step"
url         = "http://127.0.0.1:8080/steps"
`

func TestStepConfig(t *testing.T) {
	t.Parallel()
	t.Run("refused, each with what is wrong", func(t *testing.T) {
		for _, tc := range []struct{ name, toml, want string }{
			{"step on another event", "[[route]]\nname = \"s\"\nevent = \"app_mention\"\neffect = \"step\"\nurl = \"http://127.0.0.1:1\"\n",
				`line 1: route "s": effect step takes event = "function_executed" (one event, not a list), or an interaction inside a step`},
			{"step on a list of events", "[[route]]\nname = \"s\"\nevents = [\"function_executed\", \"app_mention\"]\neffect = \"step\"\nurl = \"http://127.0.0.1:1\"\n",
				`effect step takes event = "function_executed" (one event, not a list)`},
			{"step on a command", "[[route]]\nname = \"s\"\ncommand = \"/s\"\neffect = \"step\"\nurl = \"http://127.0.0.1:1\"\n",
				`effect step completes a workflow step: it takes event = "function_executed" or an interaction, not a slash command`},
			{"step without url", "[[route]]\nname = \"s\"\nevent = \"function_executed\"\neffect = \"step\"\n",
				`route "s": effect step needs url`},
			{"callback_id with another event", "[[route]]\nname = \"s\"\nevent = \"app_mention\"\ncallback_id = \"x\"\neffect = \"log\"\n",
				`set exactly one of event (or events), command, or callback_id/action_id (callback_id goes with event only as event = "function_executed"`},
			{"inputs without a function", "[[route]]\nname = \"s\"\nevent = \"app_mention\"\neffect = \"log\"\n[route.inputs.a]\ntype = \"string\"\n",
				`title, inputs and outputs declare a workflow step for the app manifest: they go with event = "function_executed"`},
			{"inputs for every function", "[[route]]\nname = \"s\"\nevent = \"function_executed\"\neffect = \"log\"\ntitle = \"T\"\n",
				`title, inputs and outputs declare one function: name it with callback_id`},
			{"a parameter without type", stepRoute + "[route.outputs.approver]\ntitle = \"Approver\"\n",
				`outputs.approver: type is required`},
			{"a typo in a parameter", stepRoute + "[route.inputs.who]\ntype = \"string\"\nrequried = true\n",
				`unknown key "route.inputs.who.requried": did you mean "required"?`},
			{"a bad callback_id", strings.Replace(stepRoute, "approve_request", "approve request", 1),
				`callback_id "approve request" is not a function's callback_id`},
			{"a deadline of zero", "[steps]\ndeadline = \"0s\"\n" + stepRoute, `steps.deadline: 0s must be positive`},
			{"a deadline past the longest backoff", "[steps]\ndeadline = \"2h\"\n" + stepRoute,
				`steps.deadline: 2h0m0s must not exceed sweep.max_backoff (1h0m0s)`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := config.Parse([]byte(tc.toml))
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
				}
			})
		}
	})

	t.Run("accepted: a declared function, an interaction step route, a deadline, and a long deadline without step routes", func(t *testing.T) {
		for _, toml := range []string{
			"[steps]\ndeadline = \"30m\"\n" + stepRoute + "title = \"Approve\"\ndescription = \"Asks\"\n[route.inputs.requester]\ntype = \"slack#/types/user_id\"\nrequired = true\n",
			"[[route]]\nname = \"b\"\naction_id = \"approve\"\neffect = \"step\"\nurl = \"http://127.0.0.1:1\"\n",
			"[[route]]\nname = \"fw\"\nevent = \"function_executed\"\neffect = \"forward\"\nurl = \"http://127.0.0.1:1\"\n",
			"[steps]\ndeadline = \"3h\"\n[[route]]\nname = \"l\"\nevent = \"*\"\neffect = \"log\"\n",
		} {
			if _, err := config.Parse([]byte(toml)); err != nil {
				t.Errorf("%s\n→ %v", toml, err)
			}
		}
	})

	t.Run("two step routes on one function warn", func(t *testing.T) {
		cfg, err := config.Parse([]byte(stepRoute + strings.Replace(stepRoute, `name        = "approve"`, `name        = "approve-again"`, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], `route "approve" also completes approve_request`) {
			t.Fatalf("warnings %q", cfg.Warnings)
		}
	})

	t.Run("the how-to page's config parses", func(t *testing.T) {
		b, err := os.ReadFile("../docs/howto/workflow-steps.md")
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllStringSubmatch(string(b), -1)
		if len(blocks) < 2 {
			t.Fatalf("%d toml blocks in docs/howto/workflow-steps.md", len(blocks))
		}
		cfg, err := config.Parse([]byte(blocks[0][1] + blocks[1][1]))
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Routes) != 2 || len(cfg.Routes[0].Inputs) != 2 || cfg.Routes[0].Outputs["approver"].Type != "slack#/types/user_id" {
			t.Fatalf("%+v", cfg.Routes)
		}
	})

	t.Run("serve refuses a step route without ACKD_TOKEN_KEY, and config check says so", func(t *testing.T) {
		cfg := configFor(t, stepRoute)
		want := `route "approve": effect step seals each workflow step's execution token with ACKD_TOKEN_KEY before it is stored: set ACKD_TOKEN_KEY or ACKD_TOKEN_KEY_FILE`
		_, err := daemon.New(cfg, daemon.Options{Schema: readSchema(t), Secrets: config.Secrets{SigningSecret: testSecret}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("New: %v", err)
		}
		checks := daemon.CheckConfig(context.Background(), cfg, config.Secrets{SigningSecret: testSecret}, readSchema(t))
		found := false
		for _, c := range checks {
			found = found || (c.Name == "secrets" && c.Status == config.CheckFail && strings.Contains(c.Detail, want))
		}
		if !found {
			t.Fatalf("config check: %+v", checks)
		}
		_, err = daemon.New(cfg, daemon.Options{Schema: readSchema(t), Secrets: config.Secrets{SigningSecret: testSecret, TokenKey: "c2hvcnQ="}})
		if err == nil || !strings.Contains(err.Error(), `route "approve": ACKD_TOKEN_KEY: 5 bytes once decoded, want 32`) {
			t.Fatalf("a short key: %v", err)
		}
		if _, err := daemon.New(cfg, daemon.Options{Schema: readSchema(t), Secrets: config.Secrets{SigningSecret: testSecret, TokenKey: stepKey}}); err != nil {
			t.Fatalf("with the key: %v", err)
		}
	})

	t.Run("a forward of function_executed without the key still starts, with a warning that the token is stored in clear", func(t *testing.T) {
		cfg := configFor(t, "[[route]]\nname = \"fw\"\nevent = \"function_executed\"\neffect = \"forward\"\nurl = \"http://127.0.0.1:1\"\n")
		checks := daemon.CheckConfig(context.Background(), cfg, config.Secrets{SigningSecret: testSecret}, readSchema(t))
		found := false
		for _, c := range checks {
			found = found || (c.Status == config.CheckWarn && strings.Contains(c.Detail, "routes fw store Slack's request") && strings.Contains(c.Detail, "stored in clear"))
		}
		if !found {
			t.Fatalf("config check: %+v", checks)
		}
		s := startServer(t, cfg, daemon.Options{})
		if s.Logs.Find("msg", "config: "+checksDetail(checks, "routes fw")) == nil {
			t.Errorf("serve did not warn; log:\n%s", s.Logs)
		}
	})
}

func checksDetail(checks []config.Check, prefix string) string {
	for _, c := range checks {
		if strings.HasPrefix(c.Detail, prefix) {
			return c.Detail
		}
	}
	return ""
}
