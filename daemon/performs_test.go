package daemon_test

import (
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/sweep"
)

// Issue 21.7: a daemon records in ackd_instances what it can perform, so
// that a sweep without the forward secret does not park a signed forward
// this daemon is still retrying (sweep.HandBackLimit).
func TestDaemonRecordsWhatItPerforms(t *testing.T) {
	for _, tc := range []struct {
		name string
		sec  config.Secrets
		want string
	}{
		{"with the bot token and forward secret", config.Secrets{BotToken: "xoxb-1", ForwardSecret: "fwd"},
			"forward " + sweep.CapForwardSigned + " log post react redeliver respond stream stream_stop update"},
		{"without them", config.Secrets{}, "forward log redeliver respond stream_stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, configFor(t, ""), daemon.Options{Secrets: tc.sec})
			var got string
			if err := srv.db().QueryRow(`SELECT effects FROM ackd_instances`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("ackd_instances.effects = %q, want %q", got, tc.want)
			}
		})
	}
}
