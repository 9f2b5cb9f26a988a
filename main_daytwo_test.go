package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 25.4: the typos a new user makes stop a real `ackd serve` at once,
// with the file, the key or the line named, instead of starting cleanly.
func TestServeRefusesTypos(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty-secret")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fwd := procWriteConfig(t, dir, "fwd.toml", "[[route]]\nname = \"fwd\"\nevent = \"app_mention\"\neffect = \"forward\"\nurl = \"http://127.0.0.1:9/\"\n")
	for _, tc := range []struct {
		name string
		env  []string
		toml string
		want string
	}{
		{"an empty SLACK_SIGNING_SECRET_FILE", []string{"SLACK_SIGNING_SECRET=", "SLACK_SIGNING_SECRET_FILE=" + empty}, "",
			"SLACK_SIGNING_SECRET_FILE names " + empty + ", which is empty"},
		{"an empty forward secret file with a forward route", []string{"ACKD_FORWARD_SECRET_FILE=" + empty}, fwd,
			"ACKD_FORWARD_SECRET_FILE names " + empty + ", which is empty"},
		{"a misspelt event type", nil, procWriteConfig(t, dir, "ev.toml", "[[route]]\nname = \"m\"\nevent = \"app_mentoin\"\neffect = \"log\"\n"),
			`did you mean "app_mention"?`},
		{"a channel name", nil, procWriteConfig(t, dir, "ch.toml", "[[route]]\nname = \"m\"\nevent = \"message\"\nchannel = \"#general\"\neffect = \"log\"\n"),
			`channel "#general" is a channel name, not its ID`},
		{"an unknown key", nil, procWriteConfig(t, dir, "key.toml", "[sweep]\nintervl = \"5s\"\n"),
			`line 2: unknown key "sweep.intervl": did you mean "interval"?`},
		{"a number in quotes", nil, procWriteConfig(t, dir, "batch.toml", "[sweep]\nbatch = \"100\"\n"),
			`line 2: key "sweep.batch" must be a whole number without quotes, e.g. 25, not a string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"serve", "--listen", procFreeAddr(t), "--db", filepath.Join(t.TempDir(), "ackd.db")}
			if tc.toml != "" {
				args = append(args, "--config", tc.toml)
			}
			r := procRun(t, procEnv(tc.env...), args...)
			if r.Code == 0 || !strings.Contains(r.Stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant it to say %q", r.Code, r.Stderr, tc.want)
			}
		})
	}
}
