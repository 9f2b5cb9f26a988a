package oauth

import (
	"testing"
	"time"
)

// The README gives the refresh lease (51 s) and rekey's longest wait for
// it (56 s); a change to the bounds must change the README too.
func TestRefreshLeaseAsDocumented(t *testing.T) {
	if got := refreshLease.Round(time.Second); got != 51*time.Second {
		t.Errorf("refresh lease %s, the README says 51 s", got)
	}
	if got := leaseWait.Round(time.Second); got != 56*time.Second {
		t.Errorf("rekey waits at most %s, the README says 56 s", got)
	}
}
