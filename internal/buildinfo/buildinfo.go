// Package buildinfo says which ackd this is: the release version stamped by
// scripts/dist.sh, the VCS commit the Go toolchain records in every build
// from a git checkout, and the Go version that built it. `ackd version`
// prints it and /metrics exposes it as ackd_build_info.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// version and commit are stamped by scripts/dist.sh with -ldflags "-X
// github.com/ackd/ackd/internal/buildinfo.version=VERSION -X ….commit=REV".
// Empty in any other build: the module version (a pseudo-version in a
// `go install …@v` build, else "(devel)") and the toolchain's vcs.revision
// are used instead. dist.sh stamps the commit itself because the toolchain
// records VCS information only where .git is a directory, not in a git
// worktree.
var version, commit string

// Info identifies a build.
type Info struct {
	Version   string // "0.2.0", a module pseudo-version, or "(devel)"
	Commit    string // vcs.revision, "-dirty" appended when the tree had changes; "unknown" without VCS stamping
	GoVersion string // runtime.Version(), e.g. "go1.26.8"
}

// Read returns the running binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(version, commit, bi)
}

func fromBuildInfo(stampedVersion, stampedCommit string, bi *debug.BuildInfo) Info {
	in := Info{Version: stampedVersion, Commit: stampedCommit, GoVersion: runtime.Version()}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	if in.Version == "" {
		in.Version = bi.Main.Version
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if in.Commit == "" && rev != "" {
		in.Commit = rev
		if dirty {
			in.Commit += "-dirty"
		}
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	return in
}

// String is the one line `ackd version` prints.
func (in Info) String() string {
	return "ackd " + in.Version + " commit " + in.Commit + " " + in.GoVersion
}
