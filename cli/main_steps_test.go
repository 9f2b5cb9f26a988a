package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/slacksim"
)

// A workflow step's execution token, with the real binary: `ackd config
// check` refuses a step route without ACKD_TOKEN_KEY (serve too), and
// `ackd outbox show` of a step row shows neither the token nor its sealed
// form; the daemon's log never holds it.
func TestProcStepTokenNeverShown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusInternalServerError, false) // the handler fails: the row waits
	cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[sweep]
immediate = false
interval  = "1h"

[[route]]
name        = "approve"
event       = "function_executed"
callback_id = "approve_request"
effect      = "step"
url         = %q
`, hook.URL))

	check := procRun(t, procEnv(), "config", "check", "--config", cfg, "--db", db)
	if check.Code == 0 || !strings.Contains(check.Stdout+check.Stderr, `route "approve": effect step seals each workflow step's execution token with ACKD_TOKEN_KEY`) {
		t.Fatalf("config check without the key: exit %d\n%s%s", check.Code, check.Stdout, check.Stderr)
	}
	key := "ACKD_TOKEN_KEY=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	procMustRun(t, procEnv(key), "config", "check", "--config", cfg, "--db", db)

	d := procServe(t, procServeOpts{Config: cfg, DB: db, Env: procEnv(key)})
	const token = "xwfp-4471-Zk3d9QpLmN0vWx7Yt2Rs"
	body, _ := json.Marshal(map[string]any{"type": "event_callback", "event_id": "EvShow1", "team_id": "T1", "token": "verif-tok",
		"event": map[string]any{"type": "function_executed", "function_execution_id": "FxShow1", "bot_access_token": token,
			"function": map[string]any{"callback_id": "approve_request"}, "inputs": map[string]any{}}})
	req, err := http.NewRequest(http.MethodPost, d.URL+"/slack/events", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	slacksim.SignRequest(req, procSecret, time.Now(), body)
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	d.stop()
	log := d.Stderr.String()
	sdb := procOpenDB(t, db)
	id := procQueryInt(t, sdb, `SELECT id FROM outbox WHERE effect = 'step'`)
	for _, args := range [][]string{
		{"outbox", "show", strconv.FormatInt(id, 10)},
		{"outbox", "show", strconv.FormatInt(id, 10), "--json"},
		{"outbox", "list"},
	} {
		out := procMustRun(t, procEnv(), append(args, "--db", db, "--config", cfg)...).Stdout
		if strings.Contains(out, token) || strings.Contains(out, "Zk3d9QpLmN0vWx7Yt2Rs") || strings.Contains(out, "ackd-sealed-1.") {
			t.Errorf("%v shows the token or its sealed form:\n%s", args, out)
		}
		if args[1] == "show" && !strings.Contains(out, "FxShow1") {
			t.Errorf("%v lost the execution id:\n%s", args, out)
		}
	}
	if strings.Contains(log, token) || strings.Contains(log, "Zk3d9QpLmN0vWx7Yt2Rs") {
		t.Errorf("the daemon's log holds the token:\n%s", log)
	}
}
