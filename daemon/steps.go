package daemon

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ackd/ackd/internal/seal"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// Workflow steps: the routes that take function_executed (and interactions
// inside a step) and the rows they make. The effect itself is sweep's
// (sweep/step.go); this file is only the config and the matching.

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
func (r *Route) functionRoute() bool { return r.Event == EventFunctionExecuted }

// takesEvents reports whether the route matches Events API events.
func (r *Route) takesEvents() bool { return r.Event != "" || len(r.Events) > 0 }

// functionID is what Slack's manifest keys a function by (and what a
// callback_id may hold): letters, digits, _ and -, as Slack's examples.
var functionID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)

// validateStepRoute checks a route's step keys: effect step on
// function_executed or an interaction, callback_id with event only for
// function_executed, and the manifest's declaration of a function.
func (c *Config) validateStepRoute(r *Route, where string, bad func(string, ...any)) {
	fn := r.functionRoute()
	if r.Effect == sweep.EffectStep {
		switch {
		case slices.Contains(r.Events, EventFunctionExecuted) || (r.takesEvents() && !fn):
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
		if r.Effect != sweep.EffectStep || !r.functionRoute() {
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
	if _, err := TokenKeys(sec); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// clearTokenWarning says, without the key, which routes store a workflow
// step's execution token in clear: those that take function_executed (or
// every event) and are performed from the stored request.
func (c Config) clearTokenWarning(sec Secrets) string {
	if sec.TokenKey != "" {
		if _, err := TokenKeys(sec); err == nil {
			return ""
		}
	}
	var names []string
	for _, r := range c.Routes {
		if r.needsRequest() && (r.matchesEvent(EventFunctionExecuted) || (r.source() == sweep.SourceInteraction && r.Effect != "log")) {
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
	k, err := TokenKeys(sec)
	if err != nil {
		return nil
	}
	return k.Sealer()
}

// matchesFunction reports whether a function_executed route takes the
// function callbackID.
func (r *Route) matchesFunction(callbackID string) bool {
	return r.CallbackID == "" || r.CallbackID == "*" || r.CallbackID == callbackID
}

// stepRows are the rows of a function_executed route for one event. A
// route of another effect (a forward, say) keys by event as usual; a step
// route makes the step row keyed by the execution (so every delivery of it, Slack's retry
// an hour later and a Socket Mode re-send included, is one row) and its
// deadline row, due [steps] deadline later; both are performed from the
// stored event.
func (c *Config) stepRows(r *Route, env Envelope, facts sweep.Facts) ([]store.NewRow, error) {
	if r.Effect != sweep.EffectStep {
		row, err := r.row(env.EventID+":"+r.Name, sweep.SourceEvent, facts)
		return []store.NewRow{row}, err
	}
	key := cmp.Or(env.Inner.ExecutionID, env.EventID) + ":" + r.Name
	d := c.Steps.Deadline.Duration
	p := r.payload(sweep.SourceEvent, facts)
	p.Params.DeadlineMS = d.Milliseconds()
	row, err := r.rowOf(key, p)
	if err != nil {
		return nil, err
	}
	p = sweep.Payload{Route: r.Name, Source: sweep.SourceEvent, TimeoutMS: r.Timeout.Milliseconds(),
		Params: sweep.Params{DeadlineMS: d.Milliseconds(), StepKey: key}, Facts: facts}
	enc, err := p.Encode()
	if err != nil {
		return nil, err
	}
	deadline := store.NewRow{Key: key + ":deadline", Effect: sweep.EffectStepDeadline, Payload: enc,
		RequestID: row.RequestID, Delay: d}
	return []store.NewRow{row, deadline}, nil
}

// sealRequest seals the execution tokens in an intent's stored request
// (sweep.SealTokens): a workflow step's token never reaches the database in
// clear when the key is set. Without it the request is stored as it is,
// and the first one with a token is logged.
func (s *Server) sealRequest(in store.Intent) (store.Intent, error) {
	if in.Request == nil {
		return in, nil
	}
	body, n, err := sweep.SealTokens(s.sealer, in.EventID, in.Request.ContentType, in.Request.Body)
	if err != nil {
		return in, err
	}
	if n > 0 && s.sealer == nil && s.clearTokens.CompareAndSwap(false, true) {
		s.log.Warn("a stored Slack request carries a workflow step's execution token (bot_access_token) in clear: set ACKD_TOKEN_KEY to seal it (logged once)",
			"event_id", in.EventID)
	}
	r := *in.Request
	r.Body = body
	in.Request = &r
	return in, nil
}
