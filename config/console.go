package config

import (
	"fmt"
	"strings"
)

// matchText says what a route matches, for the console's routes page.
func (r *Route) MatchText() string {
	var out string
	switch {
	case r.Command != "":
		out = "command " + r.Command
	case r.CallbackID != "" || r.ActionID != "":
		out = strings.TrimSpace(fmt.Sprintf("interaction %s %s", r.CallbackID, r.ActionID))
	case len(r.Events) > 0:
		out = "events " + strings.Join(r.Events, ", ")
	default:
		out = "event " + r.Event
	}
	if r.Channel != "" {
		out += " in " + r.Channel
	}
	return out
}
