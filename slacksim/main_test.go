package slacksim

import (
	"testing"

	"go.uber.org/goleak"
)

// Every Bench and Send must leave no goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
