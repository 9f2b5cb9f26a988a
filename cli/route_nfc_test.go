package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A route name typed in another Unicode form (NFD, as macOS writes accented
// letters) names the config's route, which the config holds as NFC: the
// pause lands on it, and the did-you-mean no longer offers a name that looks
// the same.
func TestRouteNamesInAnotherUnicodeForm(t *testing.T) {
	t.Parallel()
	const nfc, nfd = "caf\u00e9", "cafe\u0301"
	dir := t.TempDir()
	db, cfg := filepath.Join(dir, "ackd.db"), filepath.Join(dir, "ackd.toml")
	if err := os.WriteFile(cfg, []byte("[[route]]\nname = \""+nfc+"\"\nevent = \"*\"\neffect = \"log\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := procRun(t, procEnv(), "migrate", "--db", db); r.Code != 0 {
		t.Fatalf("migrate: exit %d: %s", r.Code, r.Stderr)
	}
	r := procRun(t, procEnv(), "route", "pause", nfd, "--db", db, "--config", cfg, "--by", "tester")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "paused route "+nfc+" ") {
		t.Fatalf("route pause %+q: exit %d, stdout %q, stderr %q; want the config's route %+q paused", nfd, r.Code, r.Stdout, r.Stderr, nfc)
	}
	r = procRun(t, procEnv(), "route", "list", "--json", "--db", db, "--config", cfg)
	if r.Code != 0 || !strings.Contains(r.Stdout, `"paused": true`) && !strings.Contains(r.Stdout, `"paused":true`) {
		t.Errorf("route list after the pause: exit %d, %s", r.Code, r.Stdout)
	}
	if r := procRun(t, procEnv(), "route", "resume", nfd, "--db", db, "--config", cfg, "--by", "tester"); r.Code != 0 {
		t.Errorf("route resume %+q: exit %d, %s", nfd, r.Code, r.Stderr)
	}
}
