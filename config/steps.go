package config

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ackd/ackd/internal/seal"
	"github.com/ackd/ackd/sweep"
)

// EventFunctionExecuted is the event Slack sends when a workflow runs one of
// the app's steps (custom functions).
const EventFunctionExecuted = "function_executed"

// DefaultStepDeadline is [steps] deadline's default.
const DefaultStepDeadline = 5 * time.Minute

// StepsConfig is [steps]: workflow steps (routes with effect = "step").
type StepsConfig struct {
	// Deadline: a step not completed this long after ackd recorded its
	// function_executed is ended with functions.completeError ("timed
	// out"), so a workflow never waits for a dead handler.
	Deadline Duration `toml:"deadline"`
}

// FunctionParam is one input or output parameter of a workflow step, as
// the app manifest declares it (functions.<callback_id>.input_parameters).
type FunctionParam struct {
	Type        string `toml:"type"` // "string", "integer", "boolean", "slack#/types/user_id" …
	Title       string `toml:"title"`
	Description string `toml:"description"`
	Required    bool   `toml:"required"` // is_required
	Hint        string `toml:"hint"`
}

// functionRoute reports whether the route takes function_executed events
// (its callback_id, if any, names the function).
func (r *Route) FunctionRoute() bool { return r.Event == EventFunctionExecuted }

// takesEvents reports whether the route matches Events API events.
func (r *Route) TakesEvents() bool { return r.Event != "" || len(r.Events) > 0 }

// functionID is what Slack's manifest keys a function by (and what a
// callback_id may hold): letters, digits, _ and -, as Slack's examples.
var functionID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)

// validateStepRoute checks a route's step keys: effect step on
// function_executed or an interaction, callback_id with event only for
// function_executed, and the manifest's declaration of a function.
func (c *Config) validateStepRoute(r *Route, where string, bad func(string, ...any)) {
	fn := r.FunctionRoute()
	if r.Effect == sweep.EffectStep {
		switch {
		case slices.Contains(r.Events, EventFunctionExecuted) || (r.TakesEvents() && !fn):
			bad("%s: effect step takes event = %q (one event, not a list), or an interaction inside a step (callback_id/action_id)", where, EventFunctionExecuted)
		case r.Command != "":
			bad("%s: effect step completes a workflow step: it takes event = %q or an interaction, not a slash command", where, EventFunctionExecuted)
		case r.Key == "message":
			bad("%s: a step route keys by the function execution: remove key = \"message\"", where)
		}
	}
	if fn && r.CallbackID != "" && r.CallbackID != "*" && !functionID.MatchString(r.CallbackID) {
		bad("%s: callback_id %q is not a function's callback_id (letters, digits, _ and -)", where, r.CallbackID)
	}
	declares := r.Title != "" || len(r.Inputs) > 0 || len(r.Outputs) > 0
	switch {
	case declares && !fn:
		bad("%s: title, inputs and outputs declare a workflow step for the app manifest: they go with event = %q", where, EventFunctionExecuted)
	case declares && (r.CallbackID == "" || r.CallbackID == "*"):
		bad("%s: title, inputs and outputs declare one function: name it with callback_id", where)
	}
	if n := len([]rune(r.Title)); n > 255 {
		bad("%s: title is %d characters; keep it under 255", where, n)
	}
	for kind, params := range map[string]map[string]FunctionParam{"inputs": r.Inputs, "outputs": r.Outputs} {
		for _, name := range sortedNames(params) {
			p := params[name]
			if !functionID.MatchString(name) {
				bad("%s: %s.%s: a parameter name is letters, digits, _ and -", where, kind, name)
			}
			if strings.TrimSpace(p.Type) == "" {
				bad("%s: %s.%s: type is required (e.g. \"string\", \"integer\", \"boolean\", \"slack#/types/user_id\")", where, kind, name)
			}
		}
	}
}

func sortedNames(m map[string]FunctionParam) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// validateSteps checks [steps], and warns about two step routes that take
// the same function: each would ask its handler and complete the step, and
// Slack answers the second execution_not_in_running_state.
func (c *Config) validateSteps(bad, warn func(string, ...any)) {
	seen := map[string]string{}
	for i := range c.Routes {
		r := &c.Routes[i]
		if r.Effect != sweep.EffectStep || !r.FunctionRoute() {
			continue
		}
		id := r.CallbackID
		if id == "*" {
			id = ""
		}
		for other, name := range seen {
			if other == "" || id == "" || other == id {
				warn("%s: route %q also completes %s: both handlers are asked, and Slack keeps the first completion", c.routeWhere(i), name, cmp.Or(id, other, "every function"))
				break
			}
		}
		if _, dup := seen[id]; !dup {
			seen[id] = r.Name
		}
	}
	d := c.Steps.Deadline.Duration
	switch {
	case d <= 0:
		bad("steps.deadline: %s must be positive: a step nobody completes would keep its workflow waiting", d)
	case d > c.Sweep.MaxBackoff.Duration && c.HasStepRoutes():
		// The deadline row is due this far ahead; a claim takes a due time
		// beyond the longest backoff for one set by a clock that was ahead.
		bad("steps.deadline: %s must not exceed sweep.max_backoff (%s)", d, c.Sweep.MaxBackoff.Duration)
	}
}

// HasStepRoutes reports whether a route has effect step (they need
// ACKD_TOKEN_KEY).
func (c Config) HasStepRoutes() bool {
	return slices.ContainsFunc(c.Routes, func(r Route) bool { return r.Effect == sweep.EffectStep })
}

// stepSecretProblem is why serve cannot start step routes: their execution
// tokens are sealed with ACKD_TOKEN_KEY.
func (c Config) stepSecretProblem(sec Secrets) error {
	if !c.HasStepRoutes() {
		return nil
	}
	var names []string
	for _, r := range c.Routes {
		if r.Effect == sweep.EffectStep {
			names = append(names, fmt.Sprintf("%q", r.Name))
		}
	}
	what := "route " + names[0]
	if len(names) > 1 {
		what = "routes " + strings.Join(names, ", ")
	}
	if sec.TokenKey == "" {
		return fmt.Errorf("%s: effect step seals each workflow step's execution token with ACKD_TOKEN_KEY before it is stored: set ACKD_TOKEN_KEY or ACKD_TOKEN_KEY_FILE (32 random bytes, base64: head -c 32 /dev/urandom | base64)", what)
	}
	if _, err := sealKeys(sec); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// clearTokenWarning says, without the key, which routes store a workflow
// step's execution token in clear: those that take function_executed (or
// every event) and are performed from the stored request.
func (c Config) ClearTokenWarning(sec Secrets) string {
	if sec.TokenKey != "" {
		if _, err := sealKeys(sec); err == nil {
			return ""
		}
	}
	var names []string
	for _, r := range c.Routes {
		if r.needsRequest() && (r.MatchesEvent(EventFunctionExecuted) || (r.source() == sweep.SourceInteraction && r.Effect != "log")) {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("routes %s store Slack's request, and a workflow step's (function_executed, or an interaction inside a step) carries its execution token (xwfp-…): without a usable ACKD_TOKEN_KEY it is stored in clear; set ACKD_TOKEN_KEY to seal it",
		strings.Join(names, ", "))
}

// StepSealer is the cipher that seals execution tokens: ACKD_TOKEN_KEY's
// (and _OLD's), or nil when the key is unset or unusable (serve refuses
// step routes without it: stepSecretProblem).
func StepSealer(sec Secrets) *seal.Keys {
	if sec.TokenKey == "" {
		return nil
	}
	k, err := sealKeys(sec)
	if err != nil {
		return nil
	}
	return k
}

// matchesFunction reports whether a function_executed route takes the
// function callbackID.
func (r *Route) MatchesFunction(callbackID string) bool {
	return r.CallbackID == "" || r.CallbackID == "*" || r.CallbackID == callbackID
}

// sealKeys parses ACKD_TOKEN_KEY (and ACKD_TOKEN_KEY_OLD) into the cipher
// that seals installation and execution tokens, with the errors the daemon's
// TokenKeys gives (the same parsing: seal.ParseKey, seal.New).
func sealKeys(sec Secrets) (*seal.Keys, error) {
	if sec.TokenKey == "" {
		return nil, sec.Needs("ACKD_TOKEN_KEY",
			ErrMissing("ACKD_TOKEN_KEY", "[oauth] seals every installation's tokens with it (32 random bytes, base64: head -c 32 /dev/urandom | base64)"),
			"[oauth] seals every installation's tokens with it", "the key (32 random bytes, base64: head -c 32 /dev/urandom | base64)",
			"remove the [oauth] section from the config")
	}
	cur, err := seal.ParseKey("ACKD_TOKEN_KEY", sec.TokenKey)
	if err != nil {
		return nil, err
	}
	var old []byte
	if sec.TokenKeyOld != "" {
		if old, err = seal.ParseKey("ACKD_TOKEN_KEY_OLD", sec.TokenKeyOld); err != nil {
			return nil, err
		}
	}
	return seal.New(cur, old)
}
