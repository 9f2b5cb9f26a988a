package cli

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 30.4: what a newcomer hit with `ackd send`.
func TestSendNewcomerHints(t *testing.T) {
	t.Run("help names the secret and the CA options", func(t *testing.T) {
		r := procMustRun(t, procEnv(), "send", "--help")
		for _, want := range []string{"SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET_FILE", "SSL_CERT_FILE", "--cacert"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("send --help does not mention %s:\n%s", want, r.Stdout)
			}
		}
	})

	t.Run("a form body without --form is told to use --form", func(t *testing.T) {
		d := procServe(t, procServeOpts{Config: filepath.Join("examples", "ackd.toml"), DB: filepath.Join(t.TempDir(), "ackd.db")})
		defer d.stop()
		r := procRun(t, procEnv(), "send", "--listen", d.Addr, filepath.Join("examples", "slash_command.form"))
		want := "ackd: the daemon answered 400: examples/slash_command.form is not JSON; a form body (a slash command, or an interaction with payload=) is sent with --form\n"
		if r.Code != 1 || r.Stderr != want {
			t.Errorf("exit %d, stderr %q; want 1, %q", r.Code, r.Stderr, want)
		}
		if !strings.HasPrefix(r.Stdout, "400 Bad Request") {
			t.Errorf("stdout %q", r.Stdout)
		}
		// With --form it is recorded.
		ok := procMustRun(t, procEnv(), "send", "--listen", d.Addr, "--form", filepath.Join("examples", "slash_command.form"))
		if !strings.HasPrefix(ok.Stdout, "200 OK (ackd: first delivery, recorded)") {
			t.Errorf("with --form: %q", ok.Stdout)
		}
	})

	t.Run("--cacert trusts a private CA", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Ackd-Outcome", "first")
		}))
		defer srv.Close()
		dir := t.TempDir()
		ca := filepath.Join(dir, "root.crt")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		url := srv.URL + "/slack/events"
		without := procRun(t, procEnv(), "send", "--url", url, filepath.Join("examples", "app_mention.json"))
		if without.Code != 1 || !strings.Contains(without.Stderr, "certificate") {
			t.Errorf("without --cacert: exit %d, stderr %q; want a certificate error", without.Code, without.Stderr)
		}
		with := procMustRun(t, procEnv(), "send", "--url", url, "--cacert", ca, filepath.Join("examples", "app_mention.json"))
		if with.Stdout != "200 OK (ackd: first delivery, recorded)\n" {
			t.Errorf("with --cacert: %q", with.Stdout)
		}
		notPEM := filepath.Join(dir, "x.txt")
		_ = os.WriteFile(notPEM, []byte("hello"), 0o600)
		bad := procRun(t, procEnv(), "send", "--url", url, "--cacert", notPEM, filepath.Join("examples", "app_mention.json"))
		if want := "ackd: --cacert: " + notPEM + " holds no PEM certificate\n"; bad.Code != 1 || bad.Stderr != want || bad.Stdout != "" {
			t.Errorf("--cacert of a non-PEM file: exit %d, stdout %q, stderr %q; want %q", bad.Code, bad.Stdout, bad.Stderr, want)
		}
	})
}
