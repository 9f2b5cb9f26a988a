package daemon

import (
	"fmt"

	"github.com/ackd/ackd/catchup"
)

// backfillReachWarning says when backfill.max_age reaches past what ackd
// still knows: done rows are pruned after retention.done, and a message
// whose rows are gone would be recorded and performed again, so catch-up
// reads back no further than retention.done less catchup.KeepMargin. A
// warning, never a refusal: the previous release accepted such a config.
// Said only when catch-up has channels to read.
func (c *Config) backfillReachWarning() string {
	cc := catchup.Config{MaxAge: c.Backfill.MaxAge.Duration, KeepDone: c.Retention.Done.Duration}
	reach, clamped := cc.Reach()
	if !clamped || c.Backfill.MaxAge.Duration <= 0 || c.Retention.Done.Duration <= 0 || len(c.BackfillChannels()) == 0 {
		return ""
	}
	return fmt.Sprintf("backfill.max_age %s reaches past retention.done %s: done rows are pruned after retention.done, and a message whose rows are gone would be recorded and performed again, so catch-up reads back at most %s (retention.done less %s); shorten backfill.max_age or lengthen retention.done",
		c.Backfill.MaxAge.Duration, c.Retention.Done.Duration, reach, catchup.KeepMargin)
}
