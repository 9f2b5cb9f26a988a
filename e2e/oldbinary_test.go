package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/oldbuild"
)

// Issue 21.6: a file the ackd of the commit before the last migration
// created and served, inspected by today's binary, is left exactly as it
// was, and that older ackd still starts on it. status and outbox list/show
// read it (its schema is new enough for them); the commands that write rows
// refuse it with one line naming both versions and `ackd migrate`.
func TestInspectionLeavesAnOlderFileAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an older ackd")
	}
	t.Parallel()
	old := oldbuild.Build(t, oldbuild.BeforeLastMigration(t, "schema.sql"))
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	addr := freeAddr(t, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 21)))
	cfg := filepath.Join(dir, "ackd.toml")
	writeLogConfig(t, cfg, addr, db)

	// The older ackd creates the file and acks an event on it.
	r := newRig(t, old, dir, cfg, addr, map[string]string{"SLACK_SIGNING_SECRET": signingSecret})
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	if code := postMention(t, addr, "EvOLD1"); code != http.StatusOK {
		t.Fatalf("older ackd answered %d", code)
	}
	if err := r.stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	oldVersion := userVersion(t, db)
	newVersion := latestMigration(t)
	if oldVersion >= newVersion {
		t.Fatalf("the older ackd left schema %d; today's knows %d: not an older schema", oldVersion, newVersion)
	}
	before := fileSum(t, db)

	env := []string{"ACKD_CONFIG=" + cfg}
	// The inspection commands read the older schema.
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"outbox", "list"}, {"outbox", "show", "1"}} {
		out, errOut, err := runAckd(t, ackdBin, env, args...)
		if err != nil {
			t.Fatalf("ackd %s on schema %d: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), oldVersion, err, out, errOut)
		}
		if args[0] == "status" && !strings.Contains(out, strconv.Itoa(oldVersion)) {
			t.Errorf("ackd %s does not show schema %d:\n%s", strings.Join(args, " "), oldVersion, out)
		}
	}
	// The commands that write rows need today's schema: refused, one line.
	for _, args := range [][]string{{"sweep", "--once"}, {"prune"}, {"outbox", "retry", "--all-parked"}} {
		out, errOut, err := runAckd(t, ackdBin, env, args...)
		if err == nil {
			t.Fatalf("ackd %s on schema %d succeeded:\n%s", strings.Join(args, " "), oldVersion, out)
		}
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], fmt.Sprintf("schema version %d is older", oldVersion)) ||
			!strings.Contains(lines[0], strconv.Itoa(newVersion)) || !strings.Contains(lines[0], "ackd migrate") {
			t.Errorf("ackd %s: stderr %q, want one line naming %d, %d and `ackd migrate`", strings.Join(args, " "), errOut, oldVersion, newVersion)
		}
	}
	if v := userVersion(t, db); v != oldVersion {
		t.Fatalf("schema version %d after today's binary inspected the file, want %d", v, oldVersion)
	}
	if after := fileSum(t, db); after != before {
		t.Fatal("the database file changed while today's binary only inspected it")
	}

	// The older ackd still starts, and still has its event.
	if err := r.start(); err != nil {
		t.Fatalf("the older ackd no longer starts on the file: %v", err)
	}
	if code := postMention(t, addr, "EvOLD1"); code != http.StatusOK {
		t.Fatalf("older ackd answered %d to a redelivery", code)
	}
	if err := r.stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
}

func writeLogConfig(t *testing.T, path, addr, db string) {
	t.Helper()
	cfg := fmt.Sprintf(`listen = %q
db     = %q

[sweep]
interval = "200ms"

[[route]]
name   = "log"
event  = "app_mention"
effect = "log"
`, addr, db)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// postMention posts a signed app_mention to the daemon at addr; 0 if no
// answer.
func postMention(t *testing.T, addr, eventID string) int {
	t.Helper()
	code, err := postSignedMention(&http.Client{Timeout: 5 * time.Second}, addr, eventID)
	if err != nil {
		t.Logf("post %s: %v", eventID, err)
	}
	return code
}

func postSignedMention(client *http.Client, addr, eventID string) (int, error) {
	body := mentionBody(eventID, "hello")
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/slack/events", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", slackSign(signingSecret, ts, body))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// runAckd runs one ackd command with exactly env (plus PATH and HOME).
func runAckd(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

func userVersion(t *testing.T, path string) int {
	t.Helper()
	h, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var v int
	if err := h.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// latestMigration is the last "-- migrate: N" of today's schema.sql.
func latestMigration(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	v := 0
	for _, l := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(l), "-- migrate: "); ok {
			if x, err := strconv.Atoi(n); err == nil {
				v = x
			}
		}
	}
	return v
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
