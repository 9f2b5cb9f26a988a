package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/config"
)

func TestParseRejectsWithTheProblemNamed(t *testing.T) {
	// A route that is valid on its own, for cases about something else.
	const okRoute = "[[route]]\nname = \"ok\"\nevent = \"*\"\neffect = \"log\"\n"
	for _, tc := range []struct {
		name string
		toml string
		want []string // every one must appear in the error
	}{
		{"unknown top-level key",
			"listen = \"127.0.0.1:3000\"\nlisen = \"127.0.0.1:3001\"\n",
			[]string{`unknown key "lisen"`, "line 2"}},
		{"commit_delay above 10ms",
			"commit_delay = \"11ms\"\n" + okRoute,
			[]string{"commit_delay: 11ms must be between 0 and 10ms"}},
		{"unknown key in a table",
			"[sweep]\ninterval = \"5s\"\n\nintervall = \"5s\"\n",
			[]string{`unknown key "sweep.intervall"`, "line 4"}},
		{"unknown key in a route",
			okRoute + "colour = \"red\"\n",
			[]string{`unknown key "route.colour"`, "line 5"}},
		{"value of the wrong kind",
			"[ack]\nbudget = \"2 seconds\"\n",
			[]string{`"ack.budget"`, "line 2"}},
		{"duplicate route name",
			okRoute + "\n[[route]]\nname = \"ok\"\nevent = \"message\"\neffect = \"log\"\n",
			[]string{`line 6: route "ok"`, "duplicate route name", "first at line 1"}},
		{"a route name with the replay suffix's '#'",
			"[[route]]\nname = \"a#r2\"\nevent = \"*\"\neffect = \"log\"\n",
			[]string{`name "a#r2" must not contain '#'`, `reads as a replay of route "a"`, `"a-r2"`}},
		{"one name in two Unicode forms is a duplicate",
			"[[route]]\nname = \"caf\u00e9\"\nevent = \"*\"\neffect = \"log\"\n\n[[route]]\nname = \"cafe\u0301\"\nevent = \"message\"\neffect = \"log\"\n",
			[]string{"duplicate route name", "first at line 1"}},
		{"unknown effect",
			"\n[[route]]\nname = \"tweet\"\nevent = \"*\"\neffect = \"tweet\"\n",
			[]string{`line 2: route "tweet"`, `effect "tweet" is not one of`}},
		{"route timeout equal to the lease",
			"[sweep]\nlease = \"1m\"\n\n[[route]]\nname = \"slow\"\nevent = \"*\"\neffect = \"log\"\ntimeout = \"1m\"\n",
			[]string{`line 4: route "slow"`, "timeout 1m0s must be shorter than sweep.lease 1m0s"}},
		{"route timeout above the lease",
			"[sweep]\nlease = \"1m\"\n\n[[route]]\nname = \"slow\"\nevent = \"*\"\neffect = \"log\"\ntimeout = \"90s\"\n",
			[]string{`route "slow"`, "must be shorter than sweep.lease"}},
		{"default route timeout (10s) not under a short lease",
			"[sweep]\nlease = \"10s\"\n\n" + okRoute,
			[]string{`route "ok"`, "timeout 10s must be shorter than sweep.lease 10s"}},
		{"ack budget of 3s",
			"[ack]\nbudget = \"3s\"\n" + okRoute,
			[]string{"ack.budget", "3s"}},
		{"ack budget above 3s",
			"[ack]\nbudget = \"10s\"\n" + okRoute,
			[]string{"ack.budget", "10s"}},
		{"ack budget of zero",
			"[ack]\nbudget = \"0s\"\n" + okRoute,
			[]string{"ack.budget"}},
		{"template that does not parse",
			"[[route]]\nname = \"reply\"\nevent = \"app_mention\"\neffect = \"post\"\ntext = \"hi {{.User\"\n",
			[]string{`line 1: route "reply"`, "text:"}},
		{"key = message on a command route",
			"[[route]]\nname = \"deploy\"\ncommand = \"/deploy\"\nkey = \"message\"\neffect = \"respond\"\ntext = \"ok\"\n",
			[]string{`route "deploy"`, `key = "message" applies to Events API routes only`}},
		{"respond on an event route",
			"[[route]]\nname = \"answer\"\nevent = \"app_mention\"\neffect = \"respond\"\ntext = \"ok\"\n",
			[]string{`route "answer"`, "effect respond needs a response_url"}},
		{"route with no trigger",
			"[[route]]\nname = \"nothing\"\neffect = \"log\"\n",
			[]string{`route "nothing"`, "set exactly one of event (or events), command, or callback_id/action_id"}},
		{"route with an event and a command",
			"[[route]]\nname = \"both\"\nevent = \"message\"\ncommand = \"/deploy\"\neffect = \"log\"\n",
			[]string{`route "both"`, "set exactly one of event (or events), command, or callback_id/action_id"}},
		{"route with a command and an action_id",
			"[[route]]\nname = \"both\"\ncommand = \"/deploy\"\naction_id = \"approve\"\neffect = \"log\"\n",
			[]string{`route "both"`, "set exactly one of event (or events), command, or callback_id/action_id"}},
		{"route without a name",
			"[[route]]\nevent = \"*\"\neffect = \"log\"\n",
			[]string{"name is required"}},
		{"forward without url",
			"[[route]]\nname = \"fwd\"\nevent = \"*\"\neffect = \"forward\"\n",
			[]string{`route "fwd"`, "effect forward needs url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.toml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tc.toml)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		toml  string
		check func(t *testing.T, c config.Config)
	}{
		{"commit_delay reaches the store", "commit_delay = \"200us\"\n", func(t *testing.T, c config.Config) {
			if got := c.StoreOptions("schema", time.Now).CommitDelay; got != 200*time.Microsecond {
				t.Errorf("store CommitDelay %s, want 200µs", got)
			}
			if d := config.Default().StoreOptions("schema", time.Now).CommitDelay; d != 0 {
				t.Errorf("default CommitDelay %s, want 0", d)
			}
		}},
		{"ack budget just under 3s", "[ack]\nbudget = \"2999ms\"\n", func(t *testing.T, c config.Config) {
			if c.Ack.Budget.Duration != 2999*time.Millisecond {
				t.Errorf("budget %s", c.Ack.Budget)
			}
		}},
		{"a file with routes replaces the built-in route",
			"[[route]]\nname = \"eyes\"\nevent = \"message\"\neffect = \"react\"\nreaction = \"eyes\"\n",
			func(t *testing.T, c config.Config) {
				if len(c.Routes) != 1 || c.Routes[0].Name != "eyes" || c.Builtin {
					t.Errorf("routes %+v, builtin %v; want only eyes", c.Routes, c.Builtin)
				}
				if c.Routes[0].Key != "event" || c.Routes[0].Timeout.Duration != 10*time.Second {
					t.Errorf("route defaults: key %q timeout %s; want event and 10s", c.Routes[0].Key, c.Routes[0].Timeout)
				}
			}},
		{"key = message on an event route",
			"[[route]]\nname = \"once\"\nevent = \"*\"\nkey = \"message\"\neffect = \"log\"\n",
			func(t *testing.T, c config.Config) {
				if c.Routes[0].Key != "message" {
					t.Errorf("key %q", c.Routes[0].Key)
				}
			}},
		{"respond on a command route",
			"[[route]]\nname = \"deploy\"\ncommand = \"/deploy\"\neffect = \"respond\"\ntext = \"Deployed {{.Text}}\"\n",
			func(t *testing.T, c config.Config) {}},
		{"route timeout just under the lease",
			"[sweep]\nlease = \"1m\"\n[[route]]\nname = \"slow\"\nevent = \"*\"\neffect = \"log\"\ntimeout = \"59s\"\n",
			func(t *testing.T, c config.Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.toml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tc.check(t, c)
		})
	}
}

func TestShippedExampleConfigParses(t *testing.T) {
	c, err := config.Load("../systemd/ackd.toml")
	if err != nil {
		t.Fatalf("systemd/ackd.toml: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if c.Source != "../systemd/ackd.toml" || c.Builtin {
		t.Errorf("source %q builtin %v", c.Source, c.Builtin)
	}
	var names []string
	for _, r := range c.Routes {
		names = append(names, r.Name+"="+r.Effect)
	}
	if got, want := strings.Join(names, " "), "eyes=react deploy=respond"; got != want {
		t.Errorf("routes %s, want %s", got, want)
	}
	// Issue 30.1: as installed it does nothing outbound: every route is
	// held back by a placeholder channel, which the warnings name.
	for _, r := range c.Routes {
		if r.Channel != "C0REPLACEME" {
			t.Errorf("route %q takes channel %q, not the placeholder", r.Name, r.Channel)
		}
		found := false
		for _, w := range c.Warnings {
			found = found || strings.Contains(w, fmt.Sprintf("route %q: channel = \"C0REPLACEME\" is a placeholder", r.Name))
		}
		if !found {
			t.Errorf("no warning names route %q's placeholder: %q", r.Name, c.Warnings)
		}
	}
	if len(c.Backfill.Channels) != 0 {
		t.Errorf("catch-up reads %v as installed", c.Backfill.Channels)
	}
	if c.Ack.Budget.Duration != 2*time.Second || c.Sweep.Lease.Duration != 10*time.Minute {
		t.Errorf("ack.budget %s sweep.lease %s; want 2s and 10m", c.Ack.Budget, c.Sweep.Lease)
	}
}

func TestDefaultValidates(t *testing.T) {
	c := config.Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	if !c.Builtin {
		t.Error("Default() is not marked built-in")
	}
	if len(c.Routes) != 1 {
		t.Fatalf("%d default routes, want 1", len(c.Routes))
	}
	if r := c.Routes[0]; r.Name != config.DefaultRouteName || r.Event != "*" || r.Effect != "log" {
		t.Errorf("default route %+v, want %s: every event to log", r, config.DefaultRouteName)
	}
	if c.DB != "./ackd.db" || c.Ack.Budget.Duration != 2*time.Second || !c.Sweep.Immediate {
		t.Errorf("defaults: db %q budget %s immediate %v", c.DB, c.Ack.Budget, c.Sweep.Immediate)
	}
}

func TestApplyEnv(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		env                  map[string]string
		listen, db, slackAPI string
	}{
		{"nothing set keeps the file's values", nil, "127.0.0.1:3000", "./ackd.db", ""},
		{"ACKD_LISTEN", map[string]string{"ACKD_LISTEN": "127.0.0.1:4000"}, "127.0.0.1:4000", "./ackd.db", ""},
		{"ACKD_DB", map[string]string{"ACKD_DB": "/var/lib/ackd/ackd.db"}, "127.0.0.1:3000", "/var/lib/ackd/ackd.db", ""},
		{"SLACK_API_URL", map[string]string{"SLACK_API_URL": "http://127.0.0.1:9/api/"}, "127.0.0.1:3000", "./ackd.db", "http://127.0.0.1:9/api/"},
		{"all three", map[string]string{"ACKD_LISTEN": "127.0.0.1:1", "ACKD_DB": "x.db", "SLACK_API_URL": "http://127.0.0.1:2/"},
			"127.0.0.1:1", "x.db", "http://127.0.0.1:2/"},
		{"empty values override nothing", map[string]string{"ACKD_LISTEN": "", "ACKD_DB": ""}, "127.0.0.1:3000", "./ackd.db", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.ApplyEnv(func(k string) string { return tc.env[k] })
			if c.Listen != tc.listen || c.DB != tc.db || c.Slack.APIURL != tc.slackAPI {
				t.Errorf("listen %q db %q api_url %q; want %q %q %q", c.Listen, c.DB, c.Slack.APIURL, tc.listen, tc.db, tc.slackAPI)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "signing-secret")
	if err := os.WriteFile(file, []byte("  from-a-file\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string
		wantErr []string
	}{
		{"from the variable, trimmed", map[string]string{"SLACK_SIGNING_SECRET": " from-env\n"}, "from-env", nil},
		{"from the _FILE variable, trimmed", map[string]string{"SLACK_SIGNING_SECRET_FILE": file}, "from-a-file", nil},
		{"neither set is empty", nil, "", nil},
		{"both set is an error", map[string]string{"SLACK_SIGNING_SECRET": "a", "SLACK_SIGNING_SECRET_FILE": file}, "",
			[]string{"SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET_FILE"}},
		{"missing file is an error", map[string]string{"SLACK_SIGNING_SECRET_FILE": filepath.Join(dir, "absent")}, "",
			[]string{"SLACK_SIGNING_SECRET_FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := config.Secret("SLACK_SIGNING_SECRET", func(k string) string { return tc.env[k] })
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("Secret = %q, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %s", err, w)
					}
				}
				if got != "" {
					t.Errorf("Secret returned %q with its error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Secret = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// Issue 16.7: a relative db is resolved against the config file's
// directory; an absolute path and a PostgreSQL URL are kept as written.
func TestLoadResolvesRelativeDB(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ db, want string }{
		{"ackd.db", filepath.Join(dir, "ackd.db")},
		{"./sub/ackd.db", filepath.Join(dir, "sub", "ackd.db")},
		{"/var/lib/ackd/ackd.db", "/var/lib/ackd/ackd.db"},
		{"postgres://ackd@127.0.0.1/ackd", "postgres://ackd@127.0.0.1/ackd"},
	} {
		path := filepath.Join(dir, "ackd.toml")
		if err := os.WriteFile(path, []byte(fmt.Sprintf("db = %q\n", tc.db)), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.DB != tc.want {
			t.Errorf("db = %q: got %q, want %q", tc.db, cfg.DB, tc.want)
		}
	}
	// Without db in the file, the built-in default stays as it is.
	path := filepath.Join(dir, "nodb.toml")
	if err := os.WriteFile(path, []byte("listen = \"127.0.0.1:3001\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := config.Load(path); err != nil || cfg.DB != config.Default().DB {
		t.Errorf("no db in the file: %q, %v; want the default %q", cfg.DB, err, config.Default().DB)
	}
}

// Issue 29.1: what 0.1.0 started and a later check finds suspicious (a
// misspelt or unknown event type, a channel name where an ID goes, a
// reaction Slack will refuse) is a warning naming the route and the fix,
// never a refusal: an upgrade must not stop a config that started before.
func TestParseWarnsWhereOldConfigsStarted(t *testing.T) {
	route := "[[route]]\nname = \"r\"\neffect = \"log\"\n"
	for _, tc := range []struct {
		name, toml string
		want       []string
	}{
		{"an event type misspelt", route + "event = \"app_mentoin\"\n",
			[]string{`line 1: route "r"`, `event "app_mentoin" is not a Slack event type ackd knows: did you mean "app_mention"?`, "harmless"}},
		{"an event type in events misspelt", route + "events = [\"message\", \"reaction_aded\"]\n",
			[]string{`did you mean "reaction_added"?`}},
		{"an event type slack-go knows and ackd's old list lacked", route + "event = \"app_installed\"\n", nil},
		{"an event type newer than ackd's list", route + "event = \"app_future_thing\"\n",
			[]string{`event "app_future_thing" is not a Slack event type ackd knows`, "if Slack added it, this warning is harmless"}},
		{"a subscription name for an event type", route + "event = \"message.channels\"\n",
			[]string{`event "message.channels" is the name of a subscription`, "never matches", `use event = "message"`}},
		{"a channel name where an ID goes", route + "event = \"message\"\nchannel = \"#general\"\n",
			[]string{`route "r"`, `channel "#general" is a channel name, not its ID, so it matches no event`, "C0123ABCD"}},
		{"a channel name in the filter", "[filter]\nchannels = [\"general\"]\n" + route + "event = \"message\"\n",
			[]string{`filter.channels: "general" is a channel name, not its ID`}},
		{"a reaction with one colon", "[[route]]\nname = \"r\"\nevent = \"message\"\neffect = \"react\"\nreaction = \":eyes\"\n",
			[]string{`route "r"`, `reaction ":eyes" is not an emoji name`, "park"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse([]byte(tc.toml))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.want == nil {
				if len(c.Warnings) != 0 {
					t.Errorf("warnings %q, want none", c.Warnings)
				}
				return
			}
			if len(c.Warnings) != 1 {
				t.Fatalf("warnings %q, want one", c.Warnings)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Warnings[0], w) {
					t.Errorf("warning %q does not say %q", c.Warnings[0], w)
				}
			}
		})
	}
}

// Issue 25.4: typos that used to start cleanly and do nothing forever stop
// startup with the key, the line and what was meant, in words.
func TestParseCatchesTypos(t *testing.T) {
	route := "[[route]]\nname = \"r\"\neffect = \"log\"\n"
	for _, tc := range []struct {
		name, toml string
		want       []string
		not        []string
	}{
		{"an unknown key next to a known one", "[sweep]\nintervl = \"5s\"\n",
			[]string{`line 2: unknown key "sweep.intervl": did you mean "interval"?`}, nil},
		{"an unknown key in a route", route + "event = \"message\"\nreacton = \"eyes\"\n",
			[]string{`line 5: unknown key "route.reacton": did you mean "reaction"?`}, nil},
		{"an unknown key far from any", "[sweep]\nfrobnicate = 1\n",
			[]string{`line 2: unknown key "sweep.frobnicate"; the keys in [sweep] are interval, batch`}, []string{"did you mean"}},
		{"an unknown key in an optional section ([oauth], a pointer)", "[oauth]\nclient_idd = \"1.2\"\n",
			[]string{`line 2: unknown key "oauth.client_idd": did you mean "client_id"?`}, nil},
		{"a value of the wrong kind in an optional section", "[oauth]\nscopes = \"chat:write\"\n",
			[]string{`line 2: key "oauth.scopes" must be a list in brackets of strings`}, nil},
		{"an unknown table", "[swep]\nbatch = 1\n",
			[]string{`line 1: unknown key "swep": did you mean "sweep"?`}, nil},
		{"a number in quotes", "[sweep]\nbatch = \"100\"\n",
			[]string{`line 2: key "sweep.batch" must be a whole number without quotes, e.g. 25, not a string: batch = "100"`},
			[]string{"int", "daemon.", "struct field"}},
		{"a duration without quotes", route + "event = \"message\"\ntimeout = 5\n",
			[]string{`line 5: key "route.timeout" must be a duration in quotes, e.g. "5s"`, "not a whole number"}, []string{"time:"}},
		{"a duration without a unit", "[sweep]\ninterval = \"5\"\n",
			[]string{`line 2: key "sweep.interval" must be a duration in quotes`, `missing unit`}, nil},
		{"a bool in quotes", "[sweep]\nimmediate = \"yes\"\n",
			[]string{`line 2: key "sweep.immediate" must be true or false, without quotes, not a string`}, []string{"bool"}},
		{"a string where a list goes", "[filter]\nchannels = \"C1\"\n",
			[]string{`line 2: key "filter.channels" must be a list in brackets of strings`}, []string{"[]string"}},
		{"a list of numbers where strings go", "[filter]\nchannels = [1]\n",
			[]string{`key "filter.channels" must be a list`, "not a list holding a whole number"}, nil},
		{"an unclosed string", "[[route]]\nname = \"r\nevent = \"message\"\n",
			[]string{`line 2: a string is not closed: its closing " is missing on this line`}, []string{"basic string"}},
		{"an unclosed string at the end", "listen = \"127.0.0.1:3000",
			[]string{`line 1: a string is not closed`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.toml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tc.toml)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q contains %q", err, w)
				}
			}
		})
	}

	t.Run("a reaction with colons is the same reaction", func(t *testing.T) {
		c, err := config.Parse([]byte("[[route]]\nname = \"eyes\"\nevent = \"message\"\neffect = \"react\"\nreaction = \":eyes:\"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Routes[0].Reaction; got != "eyes" {
			t.Errorf("reaction = %q, want eyes", got)
		}
	})
	t.Run("an empty secret file is refused by Secret, naming the file", func(t *testing.T) {
		dir := t.TempDir()
		empty := filepath.Join(dir, "secret")
		if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"SLACK_SIGNING_SECRET_FILE": empty}
		_, err := config.Secret("SLACK_SIGNING_SECRET", func(k string) string { return env[k] })
		if err == nil || err.Error() != "SLACK_SIGNING_SECRET_FILE names "+empty+", which is empty: write the secret into it" {
			t.Errorf("err = %v", err)
		}
	})
	// Issue 30.1: for ReadSecret (serve and the other commands) an empty
	// file means "not set", and says which file it was.
	t.Run("an empty secret file is not set for ReadSecret, which names it", func(t *testing.T) {
		dir := t.TempDir()
		empty := filepath.Join(dir, "secret")
		if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"ACKD_FORWARD_SECRET_FILE": empty}
		v, file, err := config.ReadSecret("ACKD_FORWARD_SECRET", func(k string) string { return env[k] })
		if v != "" || file != empty || err != nil {
			t.Errorf("ReadSecret = %q, %q, %v; want \"\", %q, nil", v, file, err, empty)
		}
	})
}

// Issue 30.1: config check accepts a missing UnitStateDirectory because
// the packaged unit's StateDirectory= creates it; the unit, its working
// directory and the shipped config's db must agree with that constant.
func TestUnitStateDirectory(t *testing.T) {
	unit, err := os.ReadFile("../systemd/ackd.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nStateDirectory=" + filepath.Base(config.UnitStateDirectory) + "\n",
		"\nWorkingDirectory=" + config.UnitStateDirectory + "\n"} {
		if !strings.Contains(string(unit), want) || filepath.Dir(config.UnitStateDirectory) != "/var/lib" {
			t.Errorf("systemd/ackd.service lacks %q (config.UnitStateDirectory is %s)", strings.TrimSpace(want), config.UnitStateDirectory)
		}
	}
	c, err := config.Load("../systemd/ackd.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.DB != filepath.Join(config.UnitStateDirectory, "ackd.db") {
		t.Errorf("systemd/ackd.toml's db is %s, not in %s", c.DB, config.UnitStateDirectory)
	}
}

func TestRouteNamesAreNFC(t *testing.T) {
	// "café" with a combining accent (NFD, as macOS writes file names) is
	// the same route as "café" precomposed (NFC): keys, pauses and the
	// CLI's arguments compare it as NFC.
	const nfd, nfc = "cafe\u0301", "caf\u00e9"
	cfg, err := config.Parse([]byte("[[route]]\nname = \"" + nfd + "\"\nevent = \"*\"\neffect = \"log\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Routes[0].Name; got != nfc {
		t.Errorf("route name = %+q, want NFC %+q", got, nfc)
	}
	if got := config.RouteName(nfd); got != nfc {
		t.Errorf("RouteName(%+q) = %+q, want %+q", nfd, got, nfc)
	}
}

func TestWarnsWhenTheEventNamesNoConversation(t *testing.T) {
	for _, tc := range []struct {
		route string
		warn  bool
	}{
		{"event = \"team_join\"\neffect = \"post\"\ntext = \"welcome\"\n", true},
		{"event = \"team_join\"\neffect = \"post\"\nto_channel = \"C0GENERAL\"\ntext = \"welcome\"\n", false},
		{"events = [\"message\", \"user_change\"]\neffect = \"react\"\nreaction = \"eyes\"\n", true},
		{"event = \"assistant_thread_started\"\neffect = \"post\"\ntext = \"hello\"\n", false},
		{"event = \"app_mention\"\neffect = \"post\"\ntext = \"hi\"\n", false},
	} {
		cfg, err := config.Parse([]byte("[[route]]\nname = \"r\"\n" + tc.route))
		if err != nil {
			t.Fatalf("%s: %v", tc.route, err)
		}
		got := strings.Contains(strings.Join(cfg.Warnings, "\n"), "would park with no_channel")
		if got != tc.warn {
			t.Errorf("route %q: warned %v, want %v (warnings %q)", tc.route, got, tc.warn, cfg.Warnings)
		}
	}
}

func TestConsoleWeakSettingsWarn(t *testing.T) {
	const route = "\n[[route]]\nname = \"r\"\nevent = \"*\"\neffect = \"log\"\n"
	parse := func(t *testing.T, listen string) config.Config {
		t.Helper()
		cfg, err := config.Parse([]byte("[console]\nlisten = \"" + listen + "\"\n" + route))
		if err != nil {
			t.Fatalf("listen %q: %v (a warning, never a refusal: such configs started before)", listen, err)
		}
		return cfg
	}
	for _, listen := range []string{"0.0.0.0:3002", ":3002", "192.0.2.10:3002"} {
		if w := strings.Join(parse(t, listen).Warnings, "\n"); !strings.Contains(w, "is not a loopback address") {
			t.Errorf("console.listen %q: warnings %q; want the non-loopback warning", listen, w)
		}
	}
	for _, listen := range []string{"127.0.0.1:3002", "[::1]:3002", "localhost:3002"} {
		if w := strings.Join(parse(t, listen).Warnings, "\n"); strings.Contains(w, "loopback") {
			t.Errorf("console.listen %q: warned %q", listen, w)
		}
	}
	cfg := parse(t, "127.0.0.1:3002")
	for pw, want := range map[string]bool{"x": true, "fifteen-chars-x": true, "sixteen-chars-xx": false, "a-much-longer-random-password": false} {
		w, warned := cfg.SecretWarnings(config.Secrets{ConsolePassword: pw})["ACKD_CONSOLE_PASSWORD"]
		if warned != want || warned && !strings.Contains(w, "shorter than 16") {
			t.Errorf("password of %d characters: warning %q; want one: %v", len(pw), w, want)
		}
	}
}

func TestBackfillKeysWithoutChannelsWarn(t *testing.T) {
	const route = "\n[[route]]\nname = \"r\"\nevent = \"message\"\nkey = \"message\"\neffect = \"log\"\n"
	for _, tc := range []struct {
		toml, want string
	}{
		{"[backfill]\non_start = true\n", "backfill.on_start set, but backfill.channels lists no channel"},
		{"[backfill]\nreplies = true\nmax_age = \"6h\"\n", "backfill.replies, backfill.max_age set"},
		{"[backfill]\non_start = true\nchannels = [\"C0123456789\"]\n", ""},
		{"[backfill]\nchannels = []\non_start = true\n", ""}, // off on purpose, as systemd/ackd.toml ships
		{"", ""},
	} {
		cfg, err := config.Parse([]byte(tc.toml + route))
		if err != nil {
			t.Fatalf("%q: %v", tc.toml, err)
		}
		w := strings.Join(cfg.Warnings, "\n")
		if tc.want == "" && strings.Contains(w, "backfill.channels lists no channel") || tc.want != "" && !strings.Contains(w, tc.want) {
			t.Errorf("%q: warnings %q, want %q", tc.toml, w, tc.want)
		}
	}
}
