package daemon

import (
	"time"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/sweep"
)

// SweepConfig maps the configuration onto the sweep's.
func SweepConfig(c config.Config) sweep.Config {
	return sweep.Config{Batch: c.Sweep.Batch, Workers: c.Sweep.Workers, Lease: c.Sweep.Lease.Duration,
		DefaultTimeout: 10 * time.Second, InstanceFresh: InstanceStale}
}
