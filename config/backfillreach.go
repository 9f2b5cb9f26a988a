package config

import (
	"fmt"

	"time"
)

// backfillReachWarning says when backfill.max_age reaches past what ackd
// still knows: done rows are pruned after retention.done, and a message
// whose rows are gone would be recorded and performed again, so catch-up
// reads back no further than retention.done less BackfillKeepMargin. A
// warning, never a refusal: the previous release accepted such a config.
// Said only when catch-up has channels to read.
func (c *Config) backfillReachWarning() string {
	reach, clamped := BackfillReach(c.Backfill.MaxAge.Duration, c.Retention.Done.Duration)
	if !clamped || c.Backfill.MaxAge.Duration <= 0 || c.Retention.Done.Duration <= 0 || len(c.BackfillChannels()) == 0 {
		return ""
	}
	return fmt.Sprintf("backfill.max_age %s reaches past retention.done %s: done rows are pruned after retention.done, and a message whose rows are gone would be recorded and performed again, so catch-up reads back at most %s (retention.done less %s); shorten backfill.max_age or lengthen retention.done",
		c.Backfill.MaxAge.Duration, c.Retention.Done.Duration, reach, BackfillKeepMargin)
}

// BackfillKeepMargin is catch-up's catchup.KeepMargin (the package that
// applies it; config may not import it): how much newer than retention.done
// the oldest message a run reads is. A daemon test holds the two equal.
const BackfillKeepMargin = 10 * time.Minute

// BackfillReach is catchup.Config.Reach over maxAge and keepDone: how far
// back a run may read, and whether retention.done clamped it.
func BackfillReach(maxAge, keepDone time.Duration) (reach time.Duration, clamped bool) {
	if keepDone > 0 && maxAge > keepDone-BackfillKeepMargin {
		return max(keepDone-BackfillKeepMargin, 0), true
	}
	return maxAge, false
}
