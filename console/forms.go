package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ackd/ackd/store"
)

// One form, one action (DESIGN §12). Every form a page renders carries a
// one-use nonce: <random>.<issued, unix ms>.<HMAC>. The HMAC, under a key
// made at start, covers the random part, the time and the form's action
// path, so a nonce cannot be guessed, made up, or moved to another form.
//
// Spending a nonce is a receipt: RecordIntent with EventID
// "console-form:<random>" and no rows, before the action runs. The
// database decides which of two POSTs of the same form was first, exactly
// as it decides between two deliveries of one Slack event (INSERT … ON
// CONFLICT DO NOTHING and its row count, never a read before the write), so
// a double click, two tabs, or two daemons behind one proxy act once; the
// second POST is answered 409 and changes nothing. This needs no migration
// and no memory in the process (a restart forgets nothing that matters:
// the receipts are in the database), and the receipts are pruned with the
// others. A nonce is refused once it is older than FormLifetime, which is
// never longer than receipts are kept, so a nonce cannot be spent again
// after its receipt was pruned. A refused or failed action has spent its
// nonce too: its page says to reload, which gives a fresh one.

// formPrefix is the event id prefix of a spent nonce's receipt.
const formPrefix = "console-form:"

// nonce makes a fresh one-use nonce for the form that posts to action.
func (c *Console) nonce(action string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	r := hex.EncodeToString(b)
	at := strconv.FormatInt(c.now().UnixMilli(), 10)
	return r + "." + at + "." + c.formMAC(action, r, at)
}

func (c *Console) formMAC(action, r, at string) string {
	m := hmac.New(sha256.New, c.formKey)
	m.Write([]byte("ackd console form\x00" + action + "\x00" + r + "\x00" + at))
	return hex.EncodeToString(m.Sum(nil))
}

var errStaleForm = errors.New("stale form")

// checkNonce verifies n for a POST to action and returns its random part.
func (c *Console) checkNonce(action, n string) (string, error) {
	parts := strings.Split(n, ".")
	if len(parts) != 3 || len(parts[0]) != 32 {
		return "", errors.New("no nonce")
	}
	if !hmac.Equal([]byte(parts[2]), []byte(c.formMAC(action, parts[0], parts[1]))) {
		return "", errors.New("bad nonce")
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return "", errors.New("bad nonce")
	}
	if age := c.now().Sub(time.UnixMilli(ms)); age > c.opts.FormLifetime {
		return "", errStaleForm
	}
	return parts[0], nil
}

// spend records nonce r as used; false: a POST with it came first.
func (c *Console) spend(w http.ResponseWriter, r *http.Request, random string) bool {
	ctx, cancel := ctxTimeout(r.Context())
	defer cancel()
	first, err := c.opts.Store.RecordIntent(ctx, store.Intent{EventID: formPrefix + random, EventType: "console_form"})
	if err != nil {
		c.log.Warn("console: a form's nonce could not be recorded", "remote", remote(r), "path", r.URL.Path, "err", err)
		c.fail(w, r, http.StatusServiceUnavailable, "the form could not be recorded, so nothing was changed ("+err.Error()+"); reload the page and try again")
		return false
	}
	if !first {
		c.log.Info("console: a form submitted again refused", "remote", remote(r), "path", r.URL.Path)
		c.fail(w, r, http.StatusConflict, "this form was already submitted (a double click, a second tab, or the browser sending it again): it was acted on once, and nothing more was changed. Reload the page to act again.")
		return false
	}
	return true
}
