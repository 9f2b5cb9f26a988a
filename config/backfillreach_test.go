package config_test

import (
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
)

// Issue 29.6: a backfill.max_age past retention.done is a warning (the
// previous release accepted it), never a refusal.
func TestBackfillReachPastRetentionWarns(t *testing.T) {
	const route = "\n[[route]]\nname = \"eyes\"\nevent = \"message\"\nkey = \"message\"\nchannel = \"C1\"\neffect = \"react\"\nreaction = \"eyes\"\n"
	for _, tc := range []struct {
		name, toml string
		want       string
	}{
		{"max_age past done, catch-up on: warned, and the config loads",
			"[retention]\ndone = \"12h\"\n[backfill]\nchannels = [\"C1\"]\nmax_age = \"24h\"\n" + route,
			"backfill.max_age 24h0m0s reaches past retention.done 12h0m0s: done rows are pruned after retention.done, and a message whose rows are gone would be recorded and performed again, so catch-up reads back at most 11h50m0s (retention.done less 10m0s); shorten backfill.max_age or lengthen retention.done"},
		{"the defaults: nothing said", "[backfill]\nchannels = [\"C1\"]\n" + route, ""},
		{"max_age within done less the margin: nothing said", "[retention]\ndone = \"24h\"\n[backfill]\nchannels = [\"C1\"]\nmax_age = \"23h50m\"\n" + route, ""},
		{"no channel to catch up: nothing said", "[retention]\ndone = \"12h\"\n[[route]]\nname = \"eyes\"\nevent = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.toml))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			var got []string
			for _, w := range cfg.Warnings {
				if strings.Contains(w, "backfill.max_age") {
					got = append(got, w)
				}
			}
			switch {
			case tc.want == "" && len(got) != 0:
				t.Fatalf("warnings %q, want none", got)
			case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
				t.Fatalf("warnings %q, want %q", got, tc.want)
			}
		})
	}
}
