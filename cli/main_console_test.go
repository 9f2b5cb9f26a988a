package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// [console] listen without a password: config check fails and serve
// refuses to start, both naming ACKD_CONSOLE_PASSWORD; with one (or a
// file with one) both start. An empty password file is no password.
func TestConsoleNeedsAPassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := procWriteConfig(t, dir, "ackd.toml", "listen = \"127.0.0.1:0\"\n[console]\nlisten = \"127.0.0.1:0\"\n")
	db := filepath.Join(dir, "ackd.db")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{nil, {"ACKD_CONSOLE_PASSWORD_FILE=" + empty}} {
		check := procRun(t, procEnv(env...), "config", "check", "--config", cfg, "--db", db)
		if check.Code == 0 || !strings.Contains(check.Stdout+check.Stderr, "ACKD_CONSOLE_PASSWORD") {
			t.Errorf("config check %v: exit %d, want a failure naming ACKD_CONSOLE_PASSWORD\n%s%s", env, check.Code, check.Stdout, check.Stderr)
		}
		serve := procRun(t, procEnv(env...), "serve", "--config", cfg, "--db", db)
		if serve.Code == 0 || !strings.Contains(serve.Stderr, "ACKD_CONSOLE_PASSWORD") {
			t.Errorf("serve %v: exit %d, want a refusal naming ACKD_CONSOLE_PASSWORD\n%s", env, serve.Code, serve.Stderr)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused serve left a database behind")
	}
	pwFile := filepath.Join(dir, "console-password")
	if err := os.WriteFile(pwFile, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]string{{"ACKD_CONSOLE_PASSWORD=pw"}, {"ACKD_CONSOLE_PASSWORD_FILE=" + pwFile}} {
		if check := procRun(t, procEnv(env...), "config", "check", "--config", cfg, "--db", db); check.Code != 0 {
			t.Errorf("config check %v: exit %d\n%s%s", env, check.Code, check.Stdout, check.Stderr)
		} else if !strings.Contains(check.Stdout, "ACKD_CONSOLE_PASSWORD is 2 characters, shorter than 16") {
			t.Errorf("config check %v with a 2-character password: no warning\n%s", env, check.Stdout)
		}
	}
	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv("ACKD_CONSOLE_PASSWORD_FILE=" + pwFile)})
	d.stop()
}
