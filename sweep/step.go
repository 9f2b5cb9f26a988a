package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/ackd/ackd/internal/redact"
	"github.com/ackd/ackd/store"
)

// Workflow steps (Slack's custom functions, used in Workflow Builder).
//
// A step ends only when the app calls functions.completeSuccess or
// functions.completeError; until then the workflow waits. A step route
// records, for each function_executed, one row keyed by the execution
// (function_execution_id), whatever the deliveries, and beside it a
// step_deadline row due [steps] deadline later. Both are performed from the
// stored event, whose execution token is sealed (steptoken.go).
//
// The step row forwards the event to the handler as forward does (signed,
// Idempotency-Key, attempt number). A 2xx reply {"outputs": {…}} becomes
// functions.completeSuccess, {"error": "…"} functions.completeError, both
// called with the execution's own token (bot_access_token), never a bot
// token; any other 2xx reply completes nothing and leaves the step open
// (the handler may complete it itself with the token, or an interaction
// inside the step may). Before Slack is told, the reply is saved in the row
// under the claim's fence (StepStore.SaveStepReply), so that an attempt
// after a failed or lost complete call — or after a crash — repeats only
// that call: the handler is asked again only when its reply was never
// saved (at least once: its Idempotency-Key is the same every time).
// Slack's own rule makes the completion idempotent: a second complete is
// answered execution_not_in_running_state, and that, like
// function_execution_not_found, means the step is over: the row is done,
// with a note.
//
// A row that is going to park (a permanent failure, or its last attempt)
// first ends the step with functions.completeError naming the failure, so
// the workflow shows an error instead of waiting.
//
// The deadline is a row of its own rather than a timer in a process: it is
// in the database from the moment the event is acked, so any sweeper (the
// daemon, a replica, a hand-run `ackd sweep --once`) performs it, a dead
// handler or a stopped daemon still ends the step once one runs, and it
// needs no scan of pending steps. It is judged on the store's clock only —
// the time the rows were recorded and the times the store stamped since
// (elapsed) — never on Slack's and never on a process's own, so clocks that
// disagree with Slack's (or with each other, across replicas) do not move
// it. At the deadline it calls functions.completeError("… timed out …")
// unless the step row is done with a completion already; Slack answering
// execution_not_in_running_state means the step ended first. A step row
// attempted after its deadline does not ask the handler: it ends the step
// the same way. The cost: one Web API call at the deadline of a step the
// step row left open, none for a step it completed.

// Effects of a workflow step.
const (
	EffectStep = "step"
	// EffectStepDeadline is the store's name: no route pause holds its
	// rows (a workflow never hangs on a paused handler).
	EffectStepDeadline = store.EffectStepDeadline
)

// StepStore is what the step effects need from the store.
type StepStore interface {
	SaveStepReply(ctx context.Context, id int64, token, reply string) (held bool, err error)
	GetByKey(ctx context.Context, key string) (store.Row, error)
}

// What a step row did, in its result's "step".
const (
	stepSuccess  = "success"   // functions.completeSuccess with the handler's outputs
	stepError    = "error"     // functions.completeError with the handler's error
	stepOpen     = "open"      // the handler's reply completed nothing
	stepOver     = "over"      // Slack: the step was already over
	stepTimedOut = "timed_out" // functions.completeError at the deadline
	stepParked   = "parked"    // functions.completeError naming the failure, as the row parked
)

// stepOverCodes are the complete calls' answers that mean the step is over.
var stepOverCodes = map[string]bool{"execution_not_in_running_state": true, "function_execution_not_found": true}

// Slack's methods that end a step.
const (
	methodCompleteSuccess = "functions.completeSuccess"
	methodCompleteError   = "functions.completeError"
)

// stepReply is a handler's answer that completes the step.
type stepReply struct {
	Outputs json.RawMessage `json:"outputs,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// stepResult is a step row's result: while it is pending, the reply an
// attempt saved; once done, what became of the step.
type stepResult struct {
	Status int        `json:"status,omitempty"` // the handler's HTTP status
	Step   string     `json:"step,omitempty"`
	Reply  *stepReply `json:"step_reply,omitempty"`
}

// completeReserve is the share of a step attempt's timeout kept from the
// handler for telling Slack (at most completeReserveMax), so that the
// complete call, and the completeError of a row about to park, fit in the
// effect's deadline even when the handler takes all of its time.
const (
	completeReserveShare = 5
	completeReserveMax   = 5 * time.Second
)

// stepCall is one attempt of a step row or deadline row: the execution and
// its token, taken from the stored request.
type stepCall struct {
	e     *effects
	job   Job
	exec  string
	token string
}

// step performs a step row (package comment above).
func (e *effects) step(ctx context.Context, job Job) (Outcome, error) {
	p := job.Payload
	if p.Params.URL == "" {
		return Outcome{}, permanent("no_url", "step: the route names no url")
	}
	if p.Params.Signed && e.cfg.ForwardSecret == "" {
		return Outcome{}, &Failure{Class: Unavailable, Code: "no_forward_secret", Needs: CapForwardSigned,
			Err: errors.New(CredForwardSecret + " is not set; this row was recorded by a daemon that signs forwards")}
	}
	s, env, err := e.stepContext(job)
	if err != nil {
		return Outcome{}, err
	}
	if saved, ok := savedReply(job.Row.Result); ok {
		return s.complete(ctx, saved.Status, *saved.Reply, "the handler's reply was kept by an earlier attempt: only Slack was told again, the handler was not asked")
	}
	deadline := time.Duration(p.Params.DeadlineMS) * time.Millisecond
	if p.Source == SourceEvent && deadline > 0 && elapsed(job) >= deadline {
		if o, ok := e.endedByDeadline(ctx, job); ok {
			return o, nil
		}
		return s.timeout(ctx, deadline, "the step's deadline had passed before this attempt, so the handler was not asked: ")
	}

	hctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		reserve := min(time.Until(dl)/completeReserveShare, completeReserveMax)
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
	}
	resp, err := e.toHandler(hctx, job, env)
	if err != nil {
		return Outcome{}, s.fail(ctx, AsFailure(err))
	}
	if resp.status < 200 || resp.status > 299 {
		return Outcome{}, s.fail(ctx, resp.failure(e.cfg.Now()))
	}
	reply, kind, err := parseStepReply(resp.body)
	if err != nil {
		return Outcome{}, s.fail(ctx, permanent("invalid_reply", "step: the handler's reply: %v", err))
	}
	// What the workflow shows and ackd keeps of the reply (its error, its
	// outputs) never holds a token the handler echoed: its own execution
	// token, the bot token, or anything shaped like one. The masks are
	// plain text, so outputs stay the JSON they were.
	reply.Error = redact.Text(reply.Error, s.token, e.cfg.BotToken)
	if reply.Outputs != nil {
		reply.Outputs = json.RawMessage(redact.Text(string(reply.Outputs), s.token, e.cfg.BotToken))
	}
	if kind == stepOpen {
		o := result(stepResult{Status: resp.status, Step: stepOpen})
		if p.Source == SourceEvent {
			o.Note = fmt.Sprintf("the handler's reply had neither outputs nor error: the step stays open until the handler or an interaction completes it, or its deadline (%s) ends it", deadline)
		}
		return o, nil
	}
	if e.cfg.Steps != nil {
		b, _ := json.Marshal(stepResult{Status: resp.status, Reply: &reply}) // a RawMessage that parsed, and a string
		held, err := e.cfg.Steps.SaveStepReply(ctx, job.Row.ID, job.Row.ClaimToken, string(b))
		switch {
		case err != nil:
			// Slack is told all the same: the workflow gets its answer, and
			// if the completion is not recorded either, the handler is asked
			// again (at least once).
			e.log.WarnContext(ctx, "step: the handler's reply was not saved before Slack is told; if this attempt is not recorded, the handler is asked again",
				"key", job.Row.Key, "err", err)
		case !held:
			return Outcome{}, &Failure{Class: Retryable, Code: "lease_lost",
				Err: errors.New("step: the lease was lost before the handler's reply was saved: the holder tells Slack")}
		}
	}
	return s.complete(ctx, resp.status, reply, "")
}

// stepContext reads the execution and its token from the row's request.
func (e *effects) stepContext(job Job) (stepCall, json.RawMessage, error) {
	p := job.Payload
	env, err := e.openRaw(job, p.Raw)
	if err != nil {
		return stepCall{}, nil, err
	}
	if !present(env) {
		return stepCall{}, nil, permanent("no_request", "%s: Slack's stored request (%q) is missing or unreadable; the step cannot be completed from it", job.Row.Effect, job.Row.RequestID)
	}
	var doc struct {
		Event struct {
			ExecutionID string `json:"function_execution_id"`
			Token       string `json:"bot_access_token"`
		} `json:"event"`
		FunctionData struct {
			ExecutionID string `json:"execution_id"`
		} `json:"function_data"`
		Token string `json:"bot_access_token"`
	}
	_ = json.Unmarshal(env, &doc) // what is missing is told below
	s := stepCall{e: e, job: job, exec: doc.Event.ExecutionID, token: doc.Event.Token}
	if p.Source == SourceInteraction {
		s.exec, s.token = doc.FunctionData.ExecutionID, doc.Token
	}
	if s.exec == "" {
		s.exec = p.Facts.ExecutionID
	}
	if s.exec == "" || s.token == "" {
		return stepCall{}, nil, permanent("no_execution", "%s: the request carries no function execution id or no bot_access_token: nothing to complete", job.Row.Effect)
	}
	return s, env, nil
}

// elapsed is how long job's row has existed at least, on the store's
// clock only: this attempt's claim (and its first claim, and the due time
// the store stamped) came no earlier than the times it stands for, all
// stamped by the clock that stamped its creation.
func elapsed(job Job) time.Duration {
	row := job.Row
	seen := row.NextAttemptAt
	for _, t := range []time.Time{row.FirstClaimedAt, job.ClaimedAt} {
		if t.After(seen) {
			seen = t
		}
	}
	return seen.Sub(row.CreatedAt)
}

// savedReply is the reply an earlier attempt saved in the pending row.
func savedReply(result string) (stepResult, bool) {
	var r stepResult
	if result == "" || json.Unmarshal([]byte(result), &r) != nil || r.Reply == nil {
		return stepResult{}, false
	}
	return r, true
}

// stepEnded reports whether a done step row's result says the step is
// over: completed, timed out, or found over.
func stepEnded(result string) bool {
	var r stepResult
	if json.Unmarshal([]byte(result), &r) != nil {
		return false
	}
	switch r.Step {
	case stepSuccess, stepError, stepOver, stepTimedOut, stepParked:
		return true
	}
	return false
}

// parseStepReply reads a handler's 2xx body: {"outputs": {…}} completes
// the step, {"error": "…"} fails it, and anything else — an empty body,
// text, a JSON object with neither — completes nothing (stepOpen). Both
// at once, outputs that are not an object, or an error that is not a
// non-empty string, are a mistake.
func parseStepReply(body []byte) (stepReply, string, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return stepReply{}, stepOpen, nil
	}
	outputs, hasOut := fields["outputs"]
	errRaw, hasErr := fields["error"]
	hasOut, hasErr = hasOut && present(outputs), hasErr && present(errRaw)
	switch {
	case hasOut && hasErr:
		return stepReply{}, "", errors.New(`it has both "outputs" and "error": send one`)
	case hasOut:
		if t := bytes.TrimSpace(outputs); len(t) == 0 || t[0] != '{' {
			return stepReply{}, "", fmt.Errorf(`"outputs" must be an object of the step's output parameters, not %s`, snippet(outputs))
		}
		var c bytes.Buffer
		if err := json.Compact(&c, outputs); err != nil {
			return stepReply{}, "", err
		}
		return stepReply{Outputs: c.Bytes()}, stepSuccess, nil
	case hasErr:
		var msg string
		if json.Unmarshal(errRaw, &msg) != nil || strings.TrimSpace(msg) == "" {
			return stepReply{}, "", fmt.Errorf(`"error" must be a non-empty string (the message the workflow shows), not %s`, snippet(errRaw))
		}
		return stepReply{Error: msg}, stepError, nil
	}
	return stepReply{}, stepOpen, nil
}

// complete tells Slack the handler's reply: completeSuccess with its
// outputs, or completeError with its error. note says how this attempt got
// there, when it is worth an operator's reading.
func (s stepCall) complete(ctx context.Context, status int, reply stepReply, note string) (Outcome, error) {
	// Masked again: a reply an older ackd saved was not.
	msg := redact.Text(reply.Error, s.token, s.e.cfg.BotToken)
	method, body, kind := methodCompleteError, map[string]any{"function_execution_id": s.exec, "error": msg}, stepError
	if reply.Outputs != nil {
		method, body, kind = methodCompleteSuccess, map[string]any{"function_execution_id": s.exec, "outputs": reply.Outputs}, stepSuccess
	}
	err := s.e.callFunctions(ctx, s.job, s.token, method, body)
	if code, over := overCode(err); over {
		o := result(stepResult{Status: status, Step: stepOver})
		o.Note = joinNote(note, fmt.Sprintf("%s answered %s: the step was already over (its deadline, the handler itself or an interaction ended it)", method, code))
		return o, nil
	}
	if err != nil {
		return Outcome{}, s.fail(ctx, slackFailure(method, s.exec, err))
	}
	o := result(stepResult{Status: status, Step: kind})
	o.Note = note
	return o, nil
}

// timeout ends the step with functions.completeError for its deadline.
func (s stepCall) timeout(ctx context.Context, deadline time.Duration, why string) (Outcome, error) {
	msg := fmt.Sprintf("timed out: the step was not completed within %s of ackd receiving it", deadline)
	err := s.e.callFunctions(ctx, s.job, s.token, methodCompleteError, map[string]any{"function_execution_id": s.exec, "error": msg})
	if code, over := overCode(err); over {
		o := result(stepResult{Step: stepOver})
		o.Note = why + fmt.Sprintf("%s answered %s: the step was already over", methodCompleteError, code)
		return o, nil
	}
	if err != nil {
		return Outcome{}, slackFailure(methodCompleteError, s.exec, err)
	}
	o := result(stepResult{Step: stepTimedOut})
	o.Note = why + fmt.Sprintf("the step was ended with %s (timed out after %s)", methodCompleteError, deadline)
	return o, nil
}

// fail returns f as the attempt's failure. When the row is going to park
// (a permanent failure, or its last attempt) the step is first ended with
// functions.completeError naming the failure, and the row parks now
// whatever the store's attempt budget says: nothing is left to do for it.
func (s stepCall) fail(ctx context.Context, f *Failure) error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return f // shutdown: the row is left to its lease
	}
	last := f.Class == Retryable && s.job.Row.Attempts+1 >= s.e.cfg.MaxAttempts
	if f.Class != Permanent && !last {
		return f
	}
	what := "failed"
	if last {
		what = fmt.Sprintf("failed on its last attempt (%d)", s.job.Row.Attempts+1)
	}
	msg := redact.Text(fmt.Sprintf("ackd could not complete this step: its handler %s (%s); an operator can read why with `ackd outbox show %d`",
		what, f.Code, s.job.Row.ID), s.token, s.e.cfg.BotToken)
	cctx, cancel := completeCtx(ctx)
	defer cancel()
	err := s.e.callFunctions(cctx, s.job, s.token, methodCompleteError, map[string]any{"function_execution_id": s.exec, "error": msg})
	var told, ended string
	switch code, over := overCode(err); {
	case err == nil:
		told, ended = "; the step was ended with "+methodCompleteError, stepParked
	case over:
		told, ended = "; the step was already over ("+code+")", stepOver
	default:
		told = "; " + methodCompleteError + " failed too: " + err.Error()
	}
	if ended != "" {
		s.retireDeadline(cctx, ended)
	}
	return &Failure{Class: Permanent, Code: f.Code, Err: fmt.Errorf("%w%s", f.Err, told)}
}

// retireDeadline records in the row about to park that the step is over
// (its result's "step": ended), before the failure parks it (Fail keeps
// the result). The step's deadline row reads it and ends without a
// second completeError, which Slack would only answer
// execution_not_in_running_state (issue 38 §5). Not recorded (a lost
// lease, the database away): the deadline row calls Slack as before, and
// Slack's answer says the step was over.
func (s stepCall) retireDeadline(ctx context.Context, ended string) {
	if s.e.cfg.Steps == nil || s.job.Payload.Source != SourceEvent {
		return
	}
	b, _ := json.Marshal(stepResult{Step: ended})
	if _, err := s.e.cfg.Steps.SaveStepReply(ctx, s.job.Row.ID, s.job.Row.ClaimToken, string(b)); err != nil {
		s.e.log.WarnContext(ctx, "step: that the step ended was not recorded before the row parks; its deadline row will ask Slack again",
			"key", s.job.Row.Key, "err", err)
	}
}

// completeCtx is the context of a completeError sent because the attempt
// failed: the attempt's own while it has time left, else a short one of
// its own (the handler's part of the timeout ends completeReserve early,
// so this is rare: a complete call that itself timed out).
func completeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) > time.Second {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// overCode reports whether err is Slack saying the step is over, and the
// code it said.
func overCode(err error) (string, bool) {
	var ser slack.SlackErrorResponse
	if errors.As(err, &ser) && stepOverCodes[ser.Err] {
		return ser.Err, true
	}
	return "", false
}

// DeadlineKey is the key of the deadline row of the step row keyed
// stepKey.
func DeadlineKey(stepKey string) string { return stepKey + ":deadline" }

// endedByDeadline reports whether job's step row, attempted after its
// deadline (a paused route resumed late, every sweeper down), finds the
// step already ended by its deadline row: then neither the handler nor
// Slack is asked, and the row is done with a note.
func (e *effects) endedByDeadline(ctx context.Context, job Job) (Outcome, bool) {
	if e.cfg.Steps == nil {
		return Outcome{}, false
	}
	r, err := e.cfg.Steps.GetByKey(ctx, DeadlineKey(job.Row.Key))
	if err != nil || r.Status != store.StatusDone || !stepEnded(r.Result) {
		return Outcome{}, false
	}
	o := result(stepResult{Step: stepOver})
	o.Note = "the step's deadline had passed before this attempt, and its deadline row had ended the step: the handler was not asked, Slack was not called"
	return o, true
}

// stepDeadline performs a step_deadline row: at the step's deadline,
// functions.completeError unless the step row has ended the step.
func (e *effects) stepDeadline(ctx context.Context, job Job) (Outcome, error) {
	p := job.Payload
	deadline := time.Duration(p.Params.DeadlineMS) * time.Millisecond
	if left := deadline - elapsed(job); left > 0 {
		// Due early: a claim took the row's due time for one set by a
		// clock that was ahead. Its own times say when it is due.
		return Outcome{}, &Failure{Class: RateLimited, RetryAfter: left, Code: "not_due",
			Err: fmt.Errorf("step deadline: %s still to go by the row's own times; it was made due early (a clock step?)", left.Round(time.Millisecond))}
	}
	if e.cfg.Steps != nil && p.Params.StepKey != "" {
		r, err := e.cfg.Steps.GetByKey(ctx, p.Params.StepKey)
		if err == nil && r.Status != store.StatusPending && stepEnded(r.Result) {
			// Done, or parked (or since discarded) after its completeError:
			// Slack is not asked again.
			o := result(stepResult{Step: stepOver})
			o.Note = "the step row had already ended the step (" + r.Status + "): nothing to time out, Slack was not called"
			return o, nil
		}
	}
	s, _, err := e.stepContext(job)
	if err != nil {
		return Outcome{}, err
	}
	return s.timeout(ctx, deadline, "deadline: ")
}

// callFunctions calls a functions.* method with the execution's token:
// JSON, as slack-go v0.35.0's FunctionCompleteSuccess does, but with the
// outputs as the handler sent them (slack-go takes them as a
// map[string]string, which cannot carry a number, a boolean or a list).
// Its errors are slack-go's (RateLimitedError, StatusCodeError,
// SlackErrorResponse), so Classify reads them as any Web API call's.
func (e *effects) callFunctions(ctx context.Context, job Job, token, method string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return permanent("bad_payload", "%s: %v", method, err)
	}
	e.log.DebugContext(ctx, "slack call", "method", method, "key", job.Row.Key, "attempt", job.Attempt)
	return e.callRaw(ctx, token, method, "application/json", bytes.NewReader(b))
}
