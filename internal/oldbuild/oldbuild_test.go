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

func TestBeforeLastMigrationKnowsFewerMigrations(t *testing.T) {
	rev := BeforeLastMigration(t, "schema.sql")
	head, err := git(".", "show", "HEAD:schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	old, err := git(".", "show", rev+":schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := migrations(head)
	o, ok := migrations(old)
	if !ok || o == 0 || o >= h {
		t.Fatalf("%s has %d migrations (well numbered: %v), HEAD %d", rev, o, ok, h)
	}
	if pg := BeforeLastMigration(t, "store/postgres/schema.sql"); pg == "" {
		t.Fatal("no PostgreSQL revision")
	}
}

func TestMigrations(t *testing.T) {
	for _, tc := range []struct {
		schema string
		n      int
		ok     bool
	}{
		{"", 0, true},
		{"-- migrate: 1\nx\n-- migrate: 2\ny\n", 2, true},
		{"-- migrate: 1\n-- migrate: 3\n", 0, false},
		{"-- migrate: 1\n-- migrate: 2\n-- migrate: 2\n", 0, false},
	} {
		if n, ok := migrations(tc.schema); n != tc.n || ok != tc.ok {
			t.Errorf("migrations(%q) = %d, %v; want %d, %v", tc.schema, n, ok, tc.n, tc.ok)
		}
	}
}
