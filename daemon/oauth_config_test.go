package daemon_test

import (
	"strings"
	"testing"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
)

const oauthOK = `[oauth]
client_id    = "1.2"
scopes       = ["chat:write"]
redirect_url = "https://ackd.example/slack/oauth_redirect"
`

const logRoute = "\n[[route]]\nname = \"ok\"\nevent = \"*\"\neffect = \"log\"\n"

func TestOAuthConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml string
		want       []string
	}{
		{"no client_id", "[oauth]\nscopes = [\"chat:write\"]\nredirect_url = \"https://a.example/r\"\n" + logRoute,
			[]string{"oauth.client_id: required"}},
		{"scopes as one string", "[oauth]\nclient_id = \"1\"\nscopes = \"chat:write\"\nredirect_url = \"https://a.example/r\"\n" + logRoute,
			[]string{`"oauth.scopes"`, "line 3"}},
		{"no scopes", "[oauth]\nclient_id = \"1\"\nredirect_url = \"https://a.example/r\"\n" + logRoute,
			[]string{"oauth.scopes"}},
		{"http redirect_url to a public host", "[oauth]\nclient_id = \"1\"\nscopes = [\"a\"]\nredirect_url = \"http://a.example/r\"\n" + logRoute,
			[]string{"oauth.redirect_url", "must be https"}},
		{"install_path not a path", oauthOK + "install_path = \"install\"\n" + logRoute,
			[]string{"oauth.install_path", "starting with /"}},
		{"redirect_path on an ackd endpoint", oauthOK + "redirect_path = \"/slack/events\"\n" + logRoute,
			[]string{"oauth.redirect_path", "ackd's own endpoints"}},
		{"unknown key", oauthOK + "client_secret = \"x\"\n" + logRoute,
			[]string{`unknown key "oauth.client_secret"`}},
		{"passthrough with [oauth]", oauthOK + "\n[redeliver]\npassthrough = [\"/slack/install\"]\n" +
			"\n[[route]]\nname = \"app\"\nevent = \"*\"\neffect = \"redeliver\"\nurl = \"http://127.0.0.1:9/slack/events\"\n",
			[]string{"redeliver.passthrough", "install flow itself"}},
		{"passthrough without a redeliver route", "[redeliver]\npassthrough = [\"/slack/install\"]\n" + logRoute,
			[]string{"redeliver.passthrough", "no route has effect redeliver"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.toml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	t.Run("defaults and a loopback http redirect_url", func(t *testing.T) {
		cfg, err := config.Parse([]byte("[oauth]\nclient_id = \"1\"\nscopes = [\"chat:write\", \"reactions:write\"]\nuser_scopes = [\"users:read\"]\nredirect_url = \"http://127.0.0.1:3000/slack/oauth_redirect\"\n" + logRoute))
		if err != nil {
			t.Fatal(err)
		}
		o := cfg.OAuth
		if o == nil || o.InstallPath != "/slack/install" || o.RedirectPath != "/slack/oauth_redirect" || len(o.Scopes) != 2 || o.UserScopes[0] != "users:read" {
			t.Fatalf("%+v", o)
		}
	})
	t.Run("absent [oauth] leaves it nil", func(t *testing.T) {
		cfg, err := config.Parse([]byte(logRoute))
		if err != nil || cfg.OAuth != nil {
			t.Fatalf("%v %+v", err, cfg.OAuth)
		}
	})
	t.Run("the daemon needs the token key and the client secret, and never quotes them", func(t *testing.T) {
		cfg := configFor(t, oauthOK+logRoute)
		for _, tc := range []struct {
			sec  config.Secrets
			want string
		}{
			{config.Secrets{SigningSecret: testSecret, ClientSecret: "cs"}, "ACKD_TOKEN_KEY is not set"},
			{config.Secrets{SigningSecret: testSecret, ClientSecret: "cs", TokenKey: "c2hvcnQta2V5LXZhbHVl"}, "ACKD_TOKEN_KEY: 15 bytes"},
			{config.Secrets{SigningSecret: testSecret, TokenKey: testTokenKey}, "SLACK_CLIENT_SECRET is not set"},
		} {
			_, err := daemon.New(cfg, daemon.Options{Schema: readSchema(t), Secrets: tc.sec})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
			if err != nil && tc.sec.TokenKey != "" && strings.Contains(err.Error(), tc.sec.TokenKey) {
				t.Errorf("the error quotes the key: %v", err)
			}
		}
		if _, err := daemon.New(cfg, daemon.Options{Schema: readSchema(t),
			Secrets: config.Secrets{SigningSecret: testSecret, ClientSecret: "cs", TokenKey: testTokenKey}}); err != nil {
			t.Fatalf("no SLACK_BOT_TOKEN is needed with [oauth]: %v", err)
		}
	})
}
