package daemon_test

import (
	"testing"
	"time"

	"github.com/ackd/ackd/catchup"
	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/oauth"
)

// config may not import catchup or oauth (they read the store, config is
// read by everyone), so the few values it shares with them are its own
// copies; these tests hold each copy equal to the package that applies it.
func TestConfigMirrorsWhatItMayNotImport(t *testing.T) {
	if config.DefaultInstallPath != oauth.DefaultInstallPath || config.DefaultRedirectPath != oauth.DefaultRedirectPath {
		t.Errorf("config's [oauth] default paths %q, %q differ from oauth's %q, %q",
			config.DefaultInstallPath, config.DefaultRedirectPath, oauth.DefaultInstallPath, oauth.DefaultRedirectPath)
	}
	if config.BackfillKeepMargin != catchup.KeepMargin {
		t.Errorf("config.BackfillKeepMargin = %s, catchup.KeepMargin = %s", config.BackfillKeepMargin, catchup.KeepMargin)
	}
	for _, c := range []struct{ maxAge, keepDone time.Duration }{
		{0, 0}, {time.Hour, 0}, {time.Hour, 168 * time.Hour}, {168 * time.Hour, 168 * time.Hour},
		{200 * time.Hour, 168 * time.Hour}, {time.Hour, 5 * time.Minute}, {30 * time.Minute, 40 * time.Minute},
	} {
		want, wantClamped := catchup.Config{MaxAge: c.maxAge, KeepDone: c.keepDone}.Reach()
		got, clamped := config.BackfillReach(c.maxAge, c.keepDone)
		if got != want || clamped != wantClamped {
			t.Errorf("BackfillReach(%s, %s) = %s, %v; catchup's Reach = %s, %v", c.maxAge, c.keepDone, got, clamped, want, wantClamped)
		}
	}
}
