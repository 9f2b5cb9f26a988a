package fakeslack

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/slack-go/slack"
)

// The fake's complete calls are checked against slack-go's own client, so
// that what ackd's step effect sends is what Slack's Go SDK sends.
func TestFunctionsAgainstSlackGo(t *testing.T) {
	t.Parallel()
	s := New(t, "xoxb-fake")
	s.AddExecution("Fx1", "xwfp-one")
	s.AddExecution("Fx2", "xwfp-two")
	api := func(token string) *slack.Client { return slack.New(token, slack.OptionAPIURL(s.URL())) }
	code := func(err error) string {
		var ser slack.SlackErrorResponse
		if errors.As(err, &ser) {
			return ser.Err
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}

	t.Run("completeSuccess with the execution's token ends it with the outputs", func(t *testing.T) {
		err := api("xwfp-one").FunctionCompleteSuccess("Fx1", slack.FunctionCompleteSuccessRequestOptionOutput(map[string]string{"approver": "U1"}))
		if err != nil {
			t.Fatal(err)
		}
		e, _ := s.Execution("Fx1")
		var out map[string]string
		if e.Outcome != "success" || json.Unmarshal(e.Outputs, &out) != nil || out["approver"] != "U1" || e.Tokens[0] != "xwfp-one" {
			t.Fatalf("%+v", e)
		}
		calls := s.CallsTo("functions.completeSuccess")
		if len(calls) != 1 || calls[0].Auth != "Bearer xwfp-one" || calls[0].Params.Get("function_execution_id") != "Fx1" {
			t.Fatalf("%+v", calls)
		}
	})
	t.Run("a second complete is execution_not_in_running_state", func(t *testing.T) {
		if got := code(api("xwfp-one").FunctionCompleteError("Fx1", "late")); got != "execution_not_in_running_state" {
			t.Fatalf("got %q", got)
		}
		if e, _ := s.Execution("Fx1"); e.Completes != 2 || e.Outcome != "success" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("completeError ends it with the message", func(t *testing.T) {
		if err := api("xwfp-two").FunctionCompleteError("Fx2", "no approver"); err != nil {
			t.Fatal(err)
		}
		if e, _ := s.Execution("Fx2"); e.Outcome != "error" || e.Error != "no approver" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("an unknown execution, another execution's token, the bot token", func(t *testing.T) {
		if got := code(api("xwfp-one").FunctionCompleteError("Fx9", "x")); got != "function_execution_not_found" {
			t.Fatalf("unknown: %q", got)
		}
		s.AddExecution("Fx3", "xwfp-three")
		if got := code(api("xwfp-one").FunctionCompleteError("Fx3", "x")); got != "invalid_auth" {
			t.Fatalf("other token: %q", got)
		}
		if got := code(api("xoxb-fake").FunctionCompleteError("Fx3", "x")); got != "invalid_auth" {
			t.Fatalf("bot token: %q", got)
		}
		if got := code(api("xwfp-nobody").FunctionCompleteError("Fx3", "x")); got != "invalid_auth" {
			t.Fatalf("unknown token: %q", got)
		}
		if e, _ := s.Execution("Fx3"); e.Outcome != "" {
			t.Fatalf("ended by a wrong token: %+v", e)
		}
	})
	t.Run("scripted answers come first", func(t *testing.T) {
		s.AddExecution("Fx4", "xwfp-four")
		s.Script("functions.completeSuccess", Status(500), RateLimited("7"))
		var sce slack.StatusCodeError
		if err := api("xwfp-four").FunctionCompleteSuccess("Fx4"); !errors.As(err, &sce) || sce.Code != 500 {
			t.Fatalf("want 500: %v", err)
		}
		var rl *slack.RateLimitedError
		if err := api("xwfp-four").FunctionCompleteSuccess("Fx4"); !errors.As(err, &rl) || rl.RetryAfter.Seconds() != 7 {
			t.Fatalf("want 429: %v", err)
		}
		if err := api("xwfp-four").FunctionCompleteSuccess("Fx4"); err != nil {
			t.Fatal(err)
		}
		if e, _ := s.Execution("Fx4"); e.Outcome != "success" || string(e.Outputs) != "{}" {
			t.Fatalf("%+v", e)
		}
	})
}
