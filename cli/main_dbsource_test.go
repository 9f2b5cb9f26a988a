package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 29.8: ackd 0.1.0's unit set ACKD_DB, which silently beat the db of
// /etc/ackd/ackd.toml, so replicas whose config said db = "postgres://…"
// each wrote a SQLite file of their own. Now ACKD_DB beside a config db
// naming PostgreSQL (or a config db beside an ACKD_DB URL) stops serve and
// fails config check, naming both; two different SQLite files start as they
// did on 0.1.0 (ACKD_DB's file) with a warning naming both; the same file
// spelled two ways, --db and ACKD_DB_FILE are fine.
func TestEnvAndConfigDisagreeingOnTheDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	configDB, envDB := filepath.Join(dir, "config.db"), filepath.Join(dir, "env.db")
	const route = "[[route]]\nname = \"m\"\nevent = \"app_mention\"\neffect = \"log\"\n"
	cfg := procWriteConfig(t, dir, "sqlite.toml", "db = \""+configDB+"\"\n"+route)
	const pgURL = "postgres://ackd:s3cret@db.internal:5432/ackd?sslmode=verify-full"
	pgCfg := procWriteConfig(t, dir, "pg.toml", "db = \""+pgURL+"\"\n"+route)

	want := []string{"ACKD_DB=/var/lib/ackd/ackd.db", `db = "postgres://ackd:xxxxx@db.internal:5432/ackd`, "name different databases"}
	t.Run("PostgreSQL in the config, the old unit's SQLite file in the environment: serve refuses, naming both", func(t *testing.T) {
		r := procRun(t, procEnv("ACKD_DB=/var/lib/ackd/ackd.db"), "serve", "--config", pgCfg, "--listen", procFreeAddr(t))
		if r.Code != 1 {
			t.Errorf("exit %d, want 1\nstderr:\n%s", r.Code, r.Stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("stderr lacks %q:\n%s", w, r.Stderr)
			}
		}
		if strings.Contains(r.Stderr, "s3cret") {
			t.Errorf("stderr shows the password:\n%s", r.Stderr)
		}
	})
	t.Run("PostgreSQL in the config, the old unit's SQLite file in the environment: config check fails, naming both", func(t *testing.T) {
		r := procRun(t, procEnv("ACKD_DB=/var/lib/ackd/ackd.db"), "config", "check", "--config", pgCfg)
		if r.Code != 1 || !strings.Contains(r.Stdout, "FAIL  config") {
			t.Errorf("exit %d, want 1 and a FAIL config line\nstdout:\n%s", r.Code, r.Stdout)
		}
		for _, w := range want {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("stdout lacks %q:\n%s", w, r.Stdout)
			}
		}
	})

	// Two SQLite files: 0.1.0 started this on ACKD_DB's file, and so does
	// today's ackd, saying so.
	sqliteWant := []string{"ACKD_DB=" + envDB, `db = \"` + configDB + `\"`, "name different databases", "ACKD_DB wins"}
	t.Run("two SQLite files: serve starts on ACKD_DB's, with a warning naming both", func(t *testing.T) {
		d := procServe(t, procServeOpts{Config: cfg, DB: "", Env: procEnv("ACKD_DB=" + envDB)})
		d.stop()
		log := d.Stderr.String()
		for _, w := range sqliteWant {
			if !strings.Contains(log, w) {
				t.Errorf("serve's log lacks %q:\n%s", w, log)
			}
		}
		if _, err := os.Stat(envDB); err != nil {
			t.Errorf("serve did not use ACKD_DB's file: %v", err)
		}
		if _, err := os.Stat(configDB); !os.IsNotExist(err) {
			t.Errorf("serve created the config's file too (%v)", err)
		}
	})
	t.Run("two SQLite files: config check passes with the warning", func(t *testing.T) {
		r := procRun(t, procEnv("ACKD_DB="+envDB), "config", "check", "--config", cfg)
		if r.Code != 0 || !strings.Contains(r.Stdout, "warn  config") || !strings.Contains(r.Stdout, "name different databases") {
			t.Errorf("exit %d, want 0 with a warning\nstdout:\n%s", r.Code, r.Stdout)
		}
	})

	t.Run("the same file spelled two ways is one database", func(t *testing.T) {
		rel := procWriteConfig(t, dir, "rel.toml", "db = \"same.db\"\n"+route) // beside the config: dir/same.db
		cmd := exec.Command(procBin, "config", "check", "--config", rel)
		cmd.Env, cmd.Dir = procEnv("ACKD_DB=./same.db"), dir
		if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(out, []byte("./same.db: sqlite")) {
			t.Errorf("%v\n%s", err, out)
		}
	})
	t.Run("--db and ACKD_DB_FILE choose explicitly", func(t *testing.T) {
		other := filepath.Join(dir, "flag.db")
		r := procRun(t, procEnv("ACKD_DB="+envDB), "config", "check", "--config", cfg, "--db", other)
		if r.Code != 0 || !strings.Contains(r.Stdout, other) {
			t.Errorf("--db: exit %d\n%s", r.Code, r.Stdout)
		}
		file := filepath.Join(dir, "db-url")
		if err := os.WriteFile(file, []byte(other+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r = procRun(t, procEnv("ACKD_DB="+envDB, "ACKD_DB_FILE="+file), "config", "check", "--config", cfg)
		if r.Code != 0 || !strings.Contains(r.Stdout, other) {
			t.Errorf("ACKD_DB_FILE: exit %d\n%s", r.Code, r.Stdout)
		}
	})
	t.Run("ACKD_DB with a config that sets no db is the database", func(t *testing.T) {
		nodb := procWriteConfig(t, dir, "nodb.toml", route)
		r := procRun(t, procEnv("ACKD_DB="+envDB), "config", "check", "--config", nodb)
		if r.Code != 0 || !strings.Contains(r.Stdout, envDB) {
			t.Errorf("exit %d\n%s", r.Code, r.Stdout)
		}
	})
}

// Issue 29.8: serve under the packaged unit's own environment (its
// Environment= lines, %d mapped to credential files, its WorkingDirectory as
// the working directory) uses the database the config names, and a config
// without db (an operator's old /etc/ackd/ackd.toml) the state directory's
// ackd.db, as the 0.1.0 unit's ACKD_DB did.
func TestPackagedUnitUsesTheConfigsDatabase(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("systemd/ackd.service")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	creds, state := filepath.Join(dir, "credentials"), filepath.Join(dir, "state")
	for _, d := range []string{creds, state} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if wd := unitValues(t, string(unit), "WorkingDirectory"); len(wd) != 1 || wd[0] != "/var/lib/ackd" {
		t.Fatalf("ackd.service WorkingDirectory=%v, want /var/lib/ackd (the state directory)", wd)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	for _, e := range unitValues(t, string(unit), "Environment") {
		k, v, _ := strings.Cut(e, "=")
		if name, ok := strings.CutPrefix(v, "%d/"); ok {
			content := "test-" + name
			if name == "token-key" {
				content = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
			}
			v = filepath.Join(creds, name)
			if err := os.WriteFile(v, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		env = append(env, k+"="+v)
	}
	const route = "[[route]]\nname = \"m\"\nevent = \"app_mention\"\neffect = \"log\"\n"
	configured := filepath.Join(dir, "elsewhere", "ackd.db")
	if err := os.Mkdir(filepath.Dir(configured), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, toml, want string }{
		{"a config naming its db", "db = \"" + configured + "\"\n" + route, configured},
		{"an old config without db", route, filepath.Join(state, "ackd.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := procWriteConfig(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".toml", tc.toml)
			addr := procFreeAddr(t)
			var stderr procSyncBuffer
			cmd := exec.Command(procBin, "serve", "--config", cfg, "--listen", addr)
			cmd.Env, cmd.Dir, cmd.Stderr = env, state, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			defer func() { cmd.Process.Kill(); <-done }()
			deadline := time.Now().Add(20 * time.Second)
			for {
				if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				select {
				case <-done:
					t.Fatalf("serve exited:\n%s", stderr.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("serve not healthy within 20s:\n%s", stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-done
			var db string
			for _, l := range strings.Split(stderr.String(), "\n") {
				var m map[string]any
				if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "ackd listening" {
					db, _ = m["db"].(string)
				}
			}
			if db != "" && !filepath.IsAbs(db) {
				db = filepath.Join(state, db) // relative to the unit's WorkingDirectory
			}
			if db != tc.want {
				t.Errorf("serve used %q, want %q\n%s", db, tc.want, stderr.String())
			}
			if _, err := os.Stat(tc.want); err != nil {
				t.Errorf("%s: %v", tc.want, err)
			}
		})
	}
}

// ACKD_DB naming a database that does not exist yet, while the config's db
// exists, is refused naming both: serve would otherwise start on a new,
// empty database beside the data (ACKD_DB wins, as in 0.1.0). When both
// files exist (after a 0.1.0 upgrade) it stays the warning above.
func TestEnvDBThatDoesNotExistBesideTheData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	configDB, envDB := filepath.Join(dir, "data.db"), filepath.Join(dir, "typo.db")
	cfg := procWriteConfig(t, dir, "ackd.toml", "db = \""+configDB+"\"\n\n[[route]]\nname = \"r\"\nevent = \"*\"\neffect = \"log\"\n")
	if r := procRun(t, procEnv(), "migrate", "--config", cfg); r.Code != 0 {
		t.Fatalf("migrate: exit %d: %s", r.Code, r.Stderr)
	}
	want := []string{"ACKD_DB=" + envDB, configDB, "does not", "empty database beside your data"}
	serve := procRun(t, procEnv("ACKD_DB="+envDB), "serve", "--config", cfg)
	if serve.Code == 0 {
		t.Fatalf("serve started on a missing ACKD_DB beside the config's database:\n%s", serve.Stderr)
	}
	for _, w := range want {
		if !strings.Contains(serve.Stderr, w) {
			t.Errorf("serve's refusal lacks %q:\n%s", w, serve.Stderr)
		}
	}
	if _, err := os.Stat(envDB); !os.IsNotExist(err) {
		t.Errorf("the refused serve created ACKD_DB's file (%v)", err)
	}
	if r := procRun(t, procEnv("ACKD_DB="+envDB), "config", "check", "--config", cfg); r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "empty database beside your data") {
		t.Errorf("config check: exit %d, want a failure naming both\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// Both there: the warning, and serve starts on ACKD_DB's, as before.
	if r := procRun(t, procEnv(), "migrate", "--db", envDB); r.Code != 0 {
		t.Fatalf("migrate --db: exit %d: %s", r.Code, r.Stderr)
	}
	if r := procRun(t, procEnv("ACKD_DB="+envDB), "config", "check", "--config", cfg); r.Code != 0 || !strings.Contains(r.Stdout, "ACKD_DB wins") {
		t.Errorf("config check with both files: exit %d, want 0 with the warning\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
