package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"

	"github.com/ackd/ackd/internal/buildinfo"

	"github.com/spf13/cobra"
)

// versionJSON prints the version as JSON for `ackd version --json`: what
// `ackd version` prints (internal/buildinfo), the revision and whether the
// tree had changes apart, and the platform.
func versionJSON(w io.Writer) error {
	bi := buildinfo.Read()
	rev, modified := strings.CutSuffix(bi.Commit, "-dirty")
	if rev == "unknown" {
		rev = ""
	}
	return json.NewEncoder(w).Encode(map[string]any{"version": bi.Version, "revision": rev, "modified": modified,
		"go": bi.GoVersion, "os": runtime.GOOS, "arch": runtime.GOARCH})
}

func versionCmd(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go version (also: ackd --version)",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			if asJSON {
				_ = versionJSON(g.stdout)
				return
			}
			fmt.Fprintln(g.stdout, buildinfo.Read())
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON: version, revision, modified, go, os, arch")
	return c
}
