package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/store"
)

// Issue 38.3: a row an older ackd stored with a token in its texts (its
// last error, result, note and attempts: a handler or Slack echoed it
// back) is shown with the token masked, on the row's page and in the
// search list, under a heading that says tokens are masked.
func TestConsoleMasksTokensAnOlderAckdStored(t *testing.T) {
	engines(t, func(t *testing.T, st store.Store) {
		s := newSite(t, st)
		const (
			bot  = "xoxb-1111-2222-OLDBOTSECRET"
			exec = "xwfp-9-OLDEXECSECRET"
			app  = "xapp-1-A1-OLDAPPSECRET"
		)
		record(t, st, "EvTOKEN", "hello", "greet")
		ctx := context.Background()
		rows, err := st.Claim(ctx, "old", 10, time.Minute, nil)
		if err != nil || len(rows) != 1 {
			t.Fatal(len(rows), err)
		}
		if _, err := st.Fail(ctx, rows[0].ID, "old", store.Failure{Kind: store.FailPermanent,
			Msg:     "http_401: handler said: token " + exec + " rejected (Authorization: Bearer " + bot + ")",
			Attempt: store.AttemptNote{Status: "401 " + app}}); err != nil {
			t.Fatal(err)
		}
		id := rows[0].ID

		for _, path := range []string{fmt.Sprintf("/rows/%d", id), "/search?q=EvTOKEN"} {
			code, body := s.get(path)
			if code != 200 {
				t.Fatalf("%s: %d", path, code)
			}
			for _, secret := range []string{"OLDBOTSECRET", "OLDEXECSECRET", "OLDAPPSECRET"} {
				if strings.Contains(body, secret) {
					t.Errorf("%s shows %s:\n%s", path, secret, body)
				}
			}
			if !strings.Contains(body, "token xwfp-…(masked) rejected") {
				t.Errorf("%s does not show the error with the token masked:\n%s", path, body)
			}
		}
		_, body := s.get(fmt.Sprintf("/rows/%d", id))
		for _, want := range []string{"Bearer xoxb-…(masked)", "401 xapp-…(masked)"} {
			if !strings.Contains(body, want) {
				t.Errorf("the row page lacks %q:\n%s", want, body)
			}
		}
	})
}
