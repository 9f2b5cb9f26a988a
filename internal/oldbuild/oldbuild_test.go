package oldbuild

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBuild builds the commit before the last SQLite migration and runs
// its `ackd version`, which names the commit it was built from; a second
// Build of the same commit returns the cached binary.
func TestBuild(t *testing.T) {
	rev := BeforeLastMigration(t, "schema.sql")
	bin := Build(t, rev)
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, out)
	}
	if !strings.Contains(string(out), "oldbuild-"+rev[:12]) {
		t.Fatalf("version = %q, want it to name %s", out, rev[:12])
	}
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if again := Build(t, rev); again != bin {
		t.Fatalf("second Build = %s, want the cached %s", again, bin)
	} else if st2, _ := os.Stat(again); !st2.ModTime().Equal(st.ModTime()) {
		t.Fatal("second Build rebuilt the binary")
	}
}
