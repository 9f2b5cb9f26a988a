package cli

import (
	"bytes"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/slacksim"
)

// `ackd outbox show` hides a command's response_url (a bearer capability:
// whoever holds it can post to the user for 30 minutes) wherever the stored
// payload carries it, as it hides Slack's verification token.
func TestProcOutboxShowRedactsResponseURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusNotFound, false) // an expired response_url: the row parks
	cfg := procWriteConfig(t, dir, "ackd.toml", `
[[route]]
name    = "deploy"
command = "/deploy"
effect  = "respond"
text    = "done"
`)
	d := procServe(t, procServeOpts{Config: cfg, DB: db})

	const secretPath = "/commands/T1/397700885554/96rGlfmibIGlgcZRskXaIFfN"
	responseURL := hook.URL + secretPath
	form := url.Values{"token": {"verif-tok-123"}, "team_id": {"T1"}, "user_id": {"U1"}, "channel_id": {"C1"},
		"command": {"/deploy"}, "text": {"api"}, "trigger_id": {"1.2.abc"}, "response_url": {responseURL}}
	body := []byte(form.Encode())
	req, err := http.NewRequest(http.MethodPost, d.URL+"/slack/commands", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	slacksim.SignRequest(req, procSecret, time.Now(), body)
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("command: status %d", resp.StatusCode)
	}
	sdb := procOpenDB(t, db)
	procWaitFor(t, "the respond row parked", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'parked'`) == 1
	})
	if n := procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE instr(payload, ?) > 0`, secretPath); n != 1 {
		t.Fatalf("the stored payload does not hold the response_url (%d rows): nothing to redact", n)
	}
	d.stop()

	id := procQueryInt(t, sdb, `SELECT id FROM outbox`)
	show := procMustRun(t, procEnv(), "outbox", "show", strconv.FormatInt(id, 10), "--db", db, "--config", cfg).Stdout
	if strings.Contains(show, secretPath) || strings.Contains(show, "96rGlfmibIGlgcZRskXaIFfN") {
		t.Errorf("outbox show printed the response_url:\n%s", show)
	}
	if strings.Contains(show, "verif-tok-123") {
		t.Errorf("outbox show printed Slack's verification token:\n%s", show)
	}
	host := strings.TrimPrefix(hook.URL, "http://")
	if n := strings.Count(show, `"response_url": "http://`+host+`/(redacted)"`); n < 1 {
		t.Errorf("outbox show names the response_url's host %d times, want it in the facts:\n%s", n, show)
	}
	if !strings.Contains(show, `"command": "/deploy"`) {
		t.Errorf("outbox show lost the rest of the payload:\n%s", show)
	}
}
