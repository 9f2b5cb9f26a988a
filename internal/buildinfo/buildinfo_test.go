package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := func(main string, settings ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/ackd/ackd", Version: main}}
		for i := 0; i+1 < len(settings); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		stamped string
		commit  string
		bi      *debug.BuildInfo
		want    Info
	}{
		{"release build: the stamped version and commit win", "0.2.0", "feedbeef",
			bi("(devel)", "vcs.revision", "0123abcd", "vcs.modified", "false"),
			Info{"0.2.0", "feedbeef", "go1.26.8"}},
		{"stamped version, commit from the toolchain's VCS stamp", "0.2.0", "",
			bi("(devel)", "vcs.revision", "0123abcd", "vcs.modified", "false"),
			Info{"0.2.0", "0123abcd", "go1.26.8"}},
		{"a build from a changed tree says so", "", "",
			bi("(devel)", "vcs.revision", "0123abcd", "vcs.modified", "true"),
			Info{"(devel)", "0123abcd-dirty", "go1.26.8"}},
		{"go install of a version: the module's own version", "", "",
			bi("v0.0.0-20261201211500-0412ceb1234a", "vcs.revision", "0412ceb1234a"),
			Info{"v0.0.0-20261201211500-0412ceb1234a", "0412ceb1234a", "go1.26.8"}},
		{"no VCS stamping: unknown commit", "", "",
			bi(""),
			Info{"(devel)", "unknown", "go1.26.8"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuildInfo(tc.stamped, tc.commit, tc.bi); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
