package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/oauth"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
	"github.com/ackd/ackd/store/sqlite"
)

// Issue 29.7: a wrong ACKD_TOKEN_KEY fails `ackd config check`, naming how
// many installations cannot be opened; the right key, and a rotation with
// ACKD_TOKEN_KEY_OLD, pass.
func TestConfigCheckTokenKey(t *testing.T) {
	t.Parallel()
	keyA := bytes.Repeat([]byte{0xA}, oauth.KeySize)
	keyB := bytes.Repeat([]byte{0xB}, oauth.KeySize)
	b64 := base64.StdEncoding.EncodeToString
	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "oauth.toml", `
[oauth]
client_id    = "1.2"
scopes       = ["chat:write"]
redirect_url = "https://ackd.example/slack/oauth_redirect"

[[route]]
name   = "hi"
event  = "app_mention"
effect = "post"
text   = "hi"
`)
	seed := func(t *testing.T, st store.Store) {
		keys, err := oauth.NewKeys(keyA, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, team := range []string{"T1", "T2", "T3"} {
			if err := st.PutInstallation(context.Background(), store.Installation{Key: team, TeamID: team,
				Secret: keys.Seal(team, oauth.Tokens{Bot: "xoxb-" + team})}); err != nil {
				t.Fatal(err)
			}
		}
		st.Close()
	}
	run := func(t *testing.T, db string) {
		for _, tc := range []struct {
			name string
			env  []string
			code int
			want []string
		}{
			{"the key that sealed them", []string{"ACKD_TOKEN_KEY=" + b64(keyA)}, 0,
				[]string{"ok    token key", "every installation (3) opens with ACKD_TOKEN_KEY"}},
			{"a new key without the old one", []string{"ACKD_TOKEN_KEY=" + b64(keyB)}, 1,
				[]string{"FAIL  token key", "3 of 3 installations cannot be opened with ACKD_TOKEN_KEY (nor ACKD_TOKEN_KEY_OLD): T1, T2, T3"}},
			{"a new key with the old one", []string{"ACKD_TOKEN_KEY=" + b64(keyB), "ACKD_TOKEN_KEY_OLD=" + b64(keyA)}, 0,
				[]string{"warn  token key", "3 of 3 installations open only with ACKD_TOKEN_KEY_OLD: run ackd installs rekey"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				env := procEnv(append([]string{"SLACK_CLIENT_SECRET=cs"}, tc.env...)...)
				r := procRun(t, env, "config", "check", "--config", cfg, "--db", db)
				if r.Code != tc.code {
					t.Errorf("exit %d, want %d\n%s%s", r.Code, tc.code, r.Stdout, r.Stderr)
				}
				for _, w := range tc.want {
					if !strings.Contains(r.Stdout, w) {
						t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
					}
				}
				if tc.code != 0 && !strings.Contains(r.Stderr, "serve would start, but the rows of those teams would wait") {
					t.Errorf("stderr: %s", r.Stderr)
				}
			})
		}
	}
	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(dir, "ackd.db")
		st, err := sqlite.Open(context.Background(), db, store.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		seed(t, st)
		run(t, db)
	})
	t.Run("postgres", func(t *testing.T) {
		db := pgtest.URL(t)
		st, err := postgres.Open(context.Background(), db, store.Options{Schema: postgres.Schema})
		if err != nil {
			t.Fatal(err)
		}
		seed(t, st)
		run(t, db)
	})
}
