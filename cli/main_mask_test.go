package cli

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 38.3: a row an older ackd stored with tokens in its texts (a
// handler or Slack echoed them back into the last error, the result, the
// note and the attempt) is printed by `ackd outbox show`, as text and as
// --json, with every token masked and the rest of the text kept.
func TestOutboxShowMasksTokensAnOlderAckdStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "ackd.db")
	hook := procNewHook(t, http.StatusNotFound, false) // a 404 parks the row at once
	cfg := procWriteConfig(t, dir, "ackd.toml", fmt.Sprintf(`
[[route]]
name   = "fwd"
event  = "app_mention"
effect = "forward"
url    = %q
`, hook.URL))
	d := procServe(t, procServeOpts{Config: cfg, DB: db})
	d.mustPostEvent(procMention("EvOldToken", "<@UBOT> hi"))
	sdb := procOpenDB(t, db)
	procWaitFor(t, "the forward row parked", 20*time.Second, func() bool {
		return procQueryInt(t, sdb, `SELECT count(*) FROM outbox WHERE status = 'parked'`) == 1
	})
	d.stop()

	// What an ackd before masking kept when the handler echoed its tokens.
	const (
		bot  = "xoxb-1111-2222-OLDBOTSECRET"
		exec = "xwfp-9-OLDEXECSECRET"
		app  = "xapp-1-A1-OLDAPPSECRET"
	)
	id := procQueryInt(t, sdb, `SELECT id FROM outbox`)
	if _, err := sdb.Exec(`UPDATE outbox SET last_error = ?, result = ?, note = ? WHERE id = ?`,
		"http_404: token "+exec+" unknown", `{"echo":"`+bot+`"}`, "app token "+app+" used", id); err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(`UPDATE outbox_attempts SET error = ?, status = ?, result = ? WHERE row_id = ?`,
		"http_404: Bearer "+bot, "404 "+app, exec, id); err != nil {
		t.Fatal(err)
	}

	text := procMustRun(t, procEnv(), "outbox", "show", fmt.Sprint(id), "--db", db, "--config", cfg).Stdout
	js := procMustRun(t, procEnv(), "outbox", "show", "--json", fmt.Sprint(id), "--db", db, "--config", cfg).Stdout
	if !strings.Contains(text, "app token xapp-…(masked) used") {
		t.Errorf("outbox show lacks the note with its token masked:\n%s", text)
	}
	for name, out := range map[string]string{"text": text, "--json": js} {
		for _, secret := range []string{"OLDBOTSECRET", "OLDEXECSECRET", "OLDAPPSECRET"} {
			if strings.Contains(out, secret) {
				t.Errorf("outbox show (%s) prints %s:\n%s", name, secret, out)
			}
		}
		for _, want := range []string{"token xwfp-…(masked) unknown", `{\"echo\":\"xoxb-…(masked)\"}`, "Bearer xoxb-…(masked)", "404 xapp-…(masked)"} {
			if name == "text" {
				want = strings.ReplaceAll(want, `\"`, `"`)
			}
			if !strings.Contains(out, want) {
				t.Errorf("outbox show (%s) lacks %q:\n%s", name, want, out)
			}
		}
	}
}
