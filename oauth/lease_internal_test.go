package oauth

import (
	"testing"
	"time"
)

// docs/howto/oauth.md gives the refresh lease (51 s) and rekey's longest wait for
// it (56 s); a change to the bounds must change that page too.
func TestRefreshLeaseAsDocumented(t *testing.T) {
	if got := refreshLease.Round(time.Second); got != 51*time.Second {
		t.Errorf("refresh lease %s, docs/howto/oauth.md says 51 s", got)
	}
	if got := leaseWait.Round(time.Second); got != 56*time.Second {
		t.Errorf("rekey waits at most %s, docs/howto/oauth.md says 56 s", got)
	}
}
