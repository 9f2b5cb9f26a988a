package fakeslack

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Workflow steps: functions.completeSuccess and functions.completeError.
//
// AddExecution starts an execution with its own token (the xwfp- token of
// the function_executed event). Its first complete call, with that token,
// ends it and answers ok; every later one answers
// execution_not_in_running_state, as Slack does; an execution the fake does
// not know answers function_execution_not_found, and another token
// invalid_auth. The calls are JSON (as slack-go's FunctionCompleteSuccess
// sends them: Authorization: Bearer and a JSON body); Call.Params holds the
// body's fields, "outputs" as its JSON text.

// Execution is one function execution as the fake saw it.
type Execution struct {
	ID    string
	Token string // the token it was started with
	// Others are more tokens valid for it (AddExecutionToken): an
	// interaction inside the step carries one of its own.
	Others []string
	// Outcome is "" while it runs, then "success" or "error".
	Outcome string
	Outputs json.RawMessage // completeSuccess's outputs, as sent
	Error   string          // completeError's message
	// Completes counts every complete call for it the fake answered itself
	// (ok or not; a scripted answer is not counted);
	// Tokens lists the token each one carried.
	Completes int
	Tokens    []string
	EndedAt   time.Time
}

// AddExecution starts execution id, whose token is token.
func (s *Server) AddExecution(id, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.execs == nil {
		s.execs = map[string]*Execution{}
	}
	s.execs[id] = &Execution{ID: id, Token: token}
}

// AddExecutionToken makes token valid for execution id too.
func (s *Server) AddExecutionToken(id, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.execs[id]; e != nil {
		e.Others = append(e.Others, token)
	}
}

// Execution returns what the fake knows of execution id.
func (s *Server) Execution(id string) (Execution, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[id]
	if !ok {
		return Execution{}, false
	}
	c := *e
	c.Tokens = append([]string(nil), e.Tokens...)
	c.Others = append([]string(nil), e.Others...)
	return c, true
}

// execToken reports whether token belongs to an execution; s.mu is held.
func (s *Server) execToken(token string) bool {
	for _, e := range s.execs {
		if e.Token == token || slices.Contains(e.Others, token) {
			return true
		}
	}
	return false
}

// functionsMethod reports whether method is one of the complete calls.
func functionsMethod(method string) bool {
	return method == "functions.completeSuccess" || method == "functions.completeError"
}

// readJSONParams puts a JSON body's top-level fields into params: strings
// as they are, anything else as its JSON text.
func readJSONParams(r *http.Request, params url.Values) {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil {
		return
	}
	for k, raw := range fields {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			params.Set(k, s)
			continue
		}
		params.Set(k, string(raw))
	}
}

// completeFunction performs a complete call; s.mu is held.
func (s *Server) completeFunction(c Call) map[string]any {
	fail := func(code string) map[string]any { return map[string]any{"ok": false, "error": code} }
	id := c.Params.Get("function_execution_id")
	if id == "" {
		return fail("invalid_arguments")
	}
	e, ok := s.execs[id]
	if !ok {
		return fail("function_execution_not_found")
	}
	e.Completes++
	e.Tokens = append(e.Tokens, c.Token)
	if c.Token != e.Token && !slices.Contains(e.Others, c.Token) {
		return fail("invalid_auth")
	}
	if e.Outcome != "" {
		return fail("execution_not_in_running_state")
	}
	switch c.Method {
	case "functions.completeSuccess":
		out := c.Params.Get("outputs")
		if out == "" || out == "null" {
			out = "{}"
		}
		if !strings.HasPrefix(out, "{") {
			return fail("invalid_arguments")
		}
		e.Outcome, e.Outputs = "success", json.RawMessage(out)
	default:
		if c.Params.Get("error") == "" {
			return fail("invalid_arguments")
		}
		e.Outcome, e.Error = "error", c.Params.Get("error")
	}
	e.EndedAt = time.Now()
	return map[string]any{"ok": true}
}
