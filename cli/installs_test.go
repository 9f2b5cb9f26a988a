package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/oauth"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/sqlite"
)

// `ackd installs list|show|remove|rekey` on a database with two
// installations: team ids and expiries are shown, never a token; rekey
// moves every secret to the new key.
func TestInstallsCommands(t *testing.T) {
	t.Parallel()
	keyA, keyB := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	b64 := base64.StdEncoding.EncodeToString
	db := filepath.Join(t.TempDir(), "ackd.db")
	st, err := sqlite.Open(context.Background(), db, store.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := oauth.NewKeys(keyA, nil)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, in := range []store.Installation{
		{Key: "T1", TeamID: "T1", BotUserID: "UBOT1", Scopes: "chat:write",
			Secret: keys.Seal("T1", oauth.Tokens{Bot: "xoxb-secret-one", Refresh: "xoxe-1-refresh-one", Expires: exp, Issued: exp.Add(-time.Hour)})},
		{Key: "E1", EnterpriseID: "E1", EnterpriseInstall: true, Secret: keys.Seal("E1", oauth.Tokens{Bot: "xoxb-secret-org"})},
	} {
		if err := st.PutInstallation(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	noToken := func(t *testing.T, out string) {
		t.Helper()
		for _, s := range []string{"xoxb-secret", "refresh-one"} {
			if strings.Contains(out, s) {
				t.Fatalf("output shows a token:\n%s", out)
			}
		}
	}

	out := procMustRun(t, procEnv(), "installs", "list", "--db", db).Stdout
	noToken(t, out)
	if !strings.Contains(out, "T1") || !strings.Contains(out, "E1") || !strings.Contains(out, "org-wide") {
		t.Fatalf("installs list:\n%s", out)
	}
	out = procMustRun(t, procEnv("ACKD_TOKEN_KEY="+b64(keyA)), "installs", "show", "T1", "--db", db).Stdout
	noToken(t, out)
	if !strings.Contains(out, "2030-01-02T03:04:05Z") || !strings.Contains(out, "UBOT1") {
		t.Fatalf("installs show:\n%s", out)
	}

	out = procMustRun(t, procEnv("ACKD_TOKEN_KEY="+b64(keyB), "ACKD_TOKEN_KEY_OLD="+b64(keyA)), "installs", "rekey", "--db", db).Stdout
	if !strings.Contains(out, "re-sealed 2") {
		t.Fatalf("rekey: %s", out)
	}
	if out := procMustRun(t, procEnv("ACKD_TOKEN_KEY="+b64(keyB)), "installs", "show", "T1", "--db", db).Stdout; !strings.Contains(out, "2030-01-02T03:04:05Z") || strings.Contains(out, "OLD") {
		t.Fatalf("after rekey, with the new key only:\n%s", out)
	}
	if out := procMustRun(t, procEnv("ACKD_TOKEN_KEY="+b64(keyA)), "installs", "show", "T1", "--db", db).Stdout; !strings.Contains(out, "does not open") {
		t.Fatalf("after rekey, the old key still opens it:\n%s", out)
	}

	if out := procMustRun(t, procEnv(), "installs", "remove", "T1", "--db", db).Stdout; !strings.Contains(out, "removed installation T1") {
		t.Fatalf("remove: %s", out)
	}
	if r := procRun(t, procEnv(), "installs", "remove", "T1", "--db", db); r.Code == 0 || !strings.Contains(r.Stderr, "no installation T1") {
		t.Fatalf("second remove: exit %d %s", r.Code, r.Stderr)
	}
	if out := procMustRun(t, procEnv(), "installs", "list", "--db", db).Stdout; strings.Contains(out, "T1") {
		t.Fatalf("T1 still listed:\n%s", out)
	}
}
