package config

import (
	"slices"
	"testing"

	"github.com/slack-go/slack/slackevents"
)

// Issue 29.1: ackd's list of event types holds every inner event type of
// the slack-go in go.mod, so that a go.mod bump that brings new types
// fails here until they are added (a route naming a type the list lacks
// is only warned about, but the warning should be rare and true).
func TestEventTypesCoverSlackGo(t *testing.T) {
	if len(slackevents.EventsAPIInnerEventMapping) < 80 {
		t.Fatalf("slack-go's EventsAPIInnerEventMapping has %d types: not the list this test means", len(slackevents.EventsAPIInnerEventMapping))
	}
	for typ := range slackevents.EventsAPIInnerEventMapping {
		if !slices.Contains(slackEventTypes, string(typ)) {
			t.Errorf("slack-go knows event type %q; add it to slackEventTypes (daemon/slackevents.go)", typ)
		}
	}
	// Slack's own newer types that issue 29 names.
	for _, typ := range []string{"app_installed", "app_context_changed", "function_executed", "assistant_thread_started", "assistant_thread_context_changed"} {
		if !slices.Contains(slackEventTypes, typ) {
			t.Errorf("%q is missing", typ)
		}
	}
	if !slices.IsSorted(slackEventTypes) || len(slices.Compact(slices.Clone(slackEventTypes))) != len(slackEventTypes) {
		t.Errorf("slackEventTypes is not sorted, or holds a type twice")
	}
}
