package config

import (
	"strings"
	"testing"
)

// Issue 30.2: a route's description describes its slash command in the
// app manifest; elsewhere it is a mistake, refused with the route's line.
func TestRouteDescription(t *testing.T) {
	cfg, err := Parse([]byte("[[route]]\nname = \"d\"\ncommand = \"/deploy\"\ndescription = \"Deploy a service\"\neffect = \"log\"\n"))
	if err != nil || cfg.Routes[0].Description != "Deploy a service" {
		t.Fatalf("description on a command route: %v, %+v", err, cfg.Routes)
	}
	_, err = Parse([]byte("[[route]]\nname = \"m\"\nevent = \"app_mention\"\ndescription = \"x\"\neffect = \"log\"\n"))
	want := `line 1: route "m": description describes a slash command in the app manifest; this route matches no command`
	if err == nil || err.Error() != want {
		t.Errorf("description on an event route: %v, want %q", err, want)
	}
	_, err = Parse([]byte("[[route]]\nname = \"d\"\ncommand = \"/d\"\ndescription = \"" + strings.Repeat("x", 2001) + "\"\neffect = \"log\"\n"))
	want = `line 1: route "d": description is 2001 characters; Slack allows at most 2000`
	if err == nil || err.Error() != want {
		t.Errorf("long description: %v, want %q", err, want)
	}
}
