package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/internal/testreq"
)

// unitValues returns the values of key in a unit file, in order.
func unitValues(tb testing.TB, text, key string) []string {
	tb.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(key)+`=(.*)$`).FindAllStringSubmatch(text, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// Issue 25.10: the Litestream sidecar works with the shipped ackd.service:
// `systemd-analyze verify` of both units together is clean (their binaries
// replaced by ones that exist, as .ci/systemd-check.sh does), and the
// sidecar runs as ackd's dynamic user (same name, DynamicUser=yes), in
// ackd's state directory, on the database ackd.service places there.
func TestLitestreamUnitFitsAckdUnit(t *testing.T) {
	t.Parallel()
	ackdUnit, err := os.ReadFile("systemd/ackd.service")
	if err != nil {
		t.Fatal(err)
	}
	lsUnit, err := os.ReadFile("systemd/litestream.service")
	if err != nil {
		t.Fatal(err)
	}
	lsConfig, err := os.ReadFile("systemd/litestream.yml")
	if err != nil {
		t.Fatal(err)
	}
	a, l := string(ackdUnit), string(lsUnit)

	// ackd's dynamic user: User=, or else the unit's name.
	user := "ackd"
	if u := unitValues(t, a, "User"); len(u) > 0 {
		user = u[len(u)-1]
	}
	if got := unitValues(t, a, "DynamicUser"); len(got) != 1 || got[0] != "yes" {
		t.Fatalf("ackd.service DynamicUser=%v; this test assumes the shipped dynamic user", got)
	}
	if got := unitValues(t, l, "DynamicUser"); len(got) != 1 || got[0] != "yes" {
		t.Errorf("litestream.service DynamicUser=%v, want yes: a static User=%s names no account", got, user)
	}
	if got := unitValues(t, l, "User"); len(got) != 1 || got[0] != user {
		t.Errorf("litestream.service User=%v, want %s (ackd.service's dynamic user)", got, user)
	}
	state := unitValues(t, a, "StateDirectory")
	if got := unitValues(t, l, "StateDirectory"); len(state) != 1 || len(got) != 1 || got[0] != state[0] {
		t.Errorf("litestream.service StateDirectory=%v, ackd.service %v: they must be the same", got, state)
	}
	// Issue 29.8: the database is the shipped config's db, which the unit
	// does not override (no ACKD_DB); a config without db gets ./ackd.db in
	// the unit's working directory, which is the same file.
	for _, e := range unitValues(t, a, "Environment") {
		if strings.HasPrefix(e, "ACKD_DB=") {
			t.Errorf("ackd.service sets %s, which would override the db an operator writes into /etc/ackd/ackd.toml", e)
		}
	}
	shipped, err := config.Load("systemd/ackd.toml")
	if err != nil {
		t.Fatal(err)
	}
	db := shipped.DB
	if !strings.HasPrefix(db, "/var/lib/"+state[0]+"/") {
		t.Fatalf("systemd/ackd.toml db = %q is not in ackd.service's state directory %v", db, state)
	}
	if wd := unitValues(t, a, "WorkingDirectory"); len(wd) != 1 || filepath.Join(wd[0], config.Default().DB) != db {
		t.Errorf("ackd.service WorkingDirectory=%v: a config without db would not use %s", wd, db)
	}
	if !regexp.MustCompile(`(?m)^\s*- path: ` + regexp.QuoteMeta(db) + `\s*$`).Match(lsConfig) {
		t.Errorf("systemd/litestream.yml does not replicate %s:\n%s", db, lsConfig)
	}
	if got := unitValues(t, l, "BindsTo"); len(got) != 1 || got[0] != "ackd.service" {
		t.Errorf("litestream.service BindsTo=%v, want ackd.service", got)
	}
	// Issue 30.4: Debian ships no litestream; the sidecar is skipped, not
	// failed, where its binary is missing.
	if got := unitValues(t, l, "ConditionPathExists"); len(got) != 1 || got[0] != "/usr/bin/litestream" {
		t.Errorf("litestream.service ConditionPathExists=%v, want /usr/bin/litestream (ExecStart's binary)", got)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	testreq.Need(t, err == nil, "systemd-analyze is not installed (Debian: apt-get install systemd; .ci/with-tools.sh)")
	dir := t.TempDir()
	stub := filepath.Join(dir, "litestream")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	replace := func(unit, bin, with string) string {
		if n := strings.Count(unit, "\nExecStart="+bin+" "); n != 1 {
			t.Fatalf("expected one ExecStart=%s line, found %d", bin, n)
		}
		return strings.Replace(unit, "\nExecStart="+bin+" ", "\nExecStart="+with+" ", 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "ackd.service"), []byte(replace(a, "/usr/bin/ackd", procBin)), 0o644); err != nil {
		t.Fatal(err)
	}
	l = strings.Replace(l, "\nConditionPathExists=/usr/bin/litestream\n", "\nConditionPathExists="+stub+"\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "litestream.service"), []byte(replace(l, "/usr/bin/litestream", stub)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(analyze, "verify", "ackd.service", "litestream.service")
	cmd.Dir = dir
	// verify exits 0 even for unknown keys (it logs and ignores them): any
	// output at all is a failure.
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify ackd.service litestream.service: %v\n%s", err, out)
	}
}
