package sweep

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"text/template"
)

// TemplateError is a route template that does not parse or does not run,
// said in one line: the route, the key (text, to_channel, ts, ack_text) and
// what is wrong, e.g. `route "deploy": text: {{.Txt}}: no field Txt (the
// fields are .Text, .User, …)`.
type TemplateError struct {
	Route, Key string
	Reason     string // without the route and key
}

func (e *TemplateError) Error() string {
	return fmt.Sprintf("route %q: %s: %s", e.Route, e.Key, e.Reason)
}

// ParseTemplate parses a route's template. Map keys that an event lacks
// render as Go's "<no value>" rather than failing the row; a struct field
// that does not exist fails (CheckTemplate catches that at startup).
func ParseTemplate(route, key, src string) (*template.Template, error) {
	t, err := template.New(route).Option("missingkey=zero").Parse(src)
	if err != nil {
		return nil, templateError(route, key, err)
	}
	return t, nil
}

// Execute runs a parsed template over d.
func Execute(t *template.Template, route, key string, d Data) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", templateError(route, key, err)
	}
	return b.String(), nil
}

// CheckTemplate parses src and executes it over sample data shaped like what
// the route will see (source: SourceEvent, SourceCommand or
// SourceInteraction), so that a field typo such as {{.Txt}} stops startup
// instead of parking every row. .Event is the raw inner event of an Events
// API request, whose keys vary by event: for event routes a failure inside
// .Event is not checked; for commands and interactions .Event is never set
// and using it fails (missingkey=error).
func CheckTemplate(route, key, src, source string) (*template.Template, error) {
	t, err := ParseTemplate(route, key, src)
	if err != nil {
		return nil, err
	}
	d := Data{Text: "sample text", User: "U0SAMPLE", Channel: "C0SAMPLE", TS: "1700000000.000100",
		Team: "T0SAMPLE", EventID: "Ev0SAMPLE"}
	check := t
	switch source {
	case SourceEvent:
		d.Event = map[string]any{"type": "message", "user": d.User, "text": d.Text, "ts": d.TS, "channel": d.Channel}
	default:
		d.Command, d.ActionID, d.Value, d.EventID = "/sample", "sample_action", "sample value", "cmd:sample"
		if check, err = t.Clone(); err != nil {
			return nil, templateError(route, key, err)
		}
		check.Option("missingkey=error")
	}
	var b strings.Builder
	err = check.Execute(&b, d)
	if err == nil {
		return t, nil
	}
	te := templateError(route, key, err)
	var ee template.ExecError
	if source == SourceEvent && errors.As(err, &ee) && strings.Contains(err.Error(), "at <.Event.") {
		return t, nil // the event's own keys: known only when it arrives
	}
	if source != SourceEvent && strings.Contains(err.Error(), "at <.Event") {
		te.Reason = ".Event is set only for Events API routes (this route matches " + source + "s): " + te.Reason
	}
	return nil, te
}

var (
	// template: NAME:LINE:COL: executing "NAME" at <NODE>: REASON
	execMsg = regexp.MustCompile(`^template: .*?:\d+:\d+: executing ".*?" at <(.*?)>: (.*)$`)
	// template: NAME:LINE: REASON
	parseMsg   = regexp.MustCompile(`^template: .*?:(\d+): (.*)$`)
	noField    = regexp.MustCompile(`^can't evaluate field (\w+) in type .*$`)
	dataFields = func() string {
		var names []string
		t := reflect.TypeFor[Data]()
		for i := range t.NumField() {
			names = append(names, "."+t.Field(i).Name)
		}
		return strings.Join(names, ", ")
	}()
)

// templateError rewrites text/template's nested message as one line.
func templateError(route, key string, err error) *TemplateError {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	reason := msg
	if m := execMsg.FindStringSubmatch(msg); m != nil {
		why := m[2]
		if f := noField.FindStringSubmatch(why); f != nil {
			why = fmt.Sprintf("no field %s (the fields are %s)", f[1], dataFields)
		}
		reason = fmt.Sprintf("{{%s}}: %s", m[1], why)
	} else if m := parseMsg.FindStringSubmatch(msg); m != nil {
		reason = fmt.Sprintf("line %s: %s", m[1], m[2])
	}
	return &TemplateError{Route: route, Key: key, Reason: reason}
}
