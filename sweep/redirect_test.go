package sweep_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/sweep"
)

// redirector answers every request with status and a Location naming target.
func redirector(t *testing.T, status int, target string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target)
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/slack"
}

// A 3xx from a forward handler or a response_url is never followed: the row
// parks at its first attempt with a last_error naming the status and the
// Location, and the host the Location names is never contacted — neither by
// the bodyless GET Go makes of a 301/302/303, nor by the signed re-POST of a
// 307/308. The same holds when the caller hands in its own client, which
// would follow redirects by default.
func TestRedirectsAreNotFollowed(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		for _, effect := range []string{"forward", "respond"} {
			for _, own := range []bool{false, true} {
				name := effect + " " + strconv.Itoa(status)
				if own {
					name += " with the caller's client"
				}
				t.Run(name, func(t *testing.T) {
					target := fakeslack.NewHook(t) // records whether anyone came
					targetURL := target.URL() + "/secret-path?q=1"
					from := redirector(t, status, targetURL)

					clk := &clock{t: time.Unix(1_800_000_000, 0)}
					st := openStore(t, clk.Now)
					p := sweep.Payload{Route: "r", Source: sweep.SourceCommand, Raw: []byte(`{"command":"/x"}`),
						Facts: sweep.Facts{EventID: "cmd1", Command: "/x"}}
					if effect == "forward" {
						p.Params = sweep.Params{URL: from}
					} else {
						p.Params = sweep.Params{Text: "hi"}
						p.Facts.ResponseURL = from
					}
					enc, err := p.Encode()
					if err != nil {
						t.Fatal(err)
					}
					if _, err := st.RecordIntent(context.Background(), store.Intent{EventID: "cmd1", EventType: "command /x",
						Rows: []store.NewRow{{Key: "cmd1:r", Effect: effect, Payload: enc}}}); err != nil {
						t.Fatal(err)
					}
					cfg := sweep.EffectConfig{Now: clk.Now, ForwardSecret: "s"}
					var caller *http.Client
					if own {
						caller = &http.Client{Timeout: 5 * time.Second} // follows redirects by default
						cfg.HTTPClient = caller
					}
					sw := sweep.New(st, sweep.Effects(cfg), sweep.Config{Lease: time.Minute, DefaultTimeout: 5 * time.Second}, quiet(), nil)
					res, err := sw.RunOnce(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if res.Parked != 1 || res.Done != 0 {
						t.Fatalf("RunOnce = %+v, want the row parked", res)
					}
					row, err := st.GetByKey(context.Background(), "cmd1:r")
					if err != nil {
						t.Fatal(err)
					}
					if row.Status != store.StatusParked || row.Attempts != 1 {
						t.Errorf("row status %q after %d attempts, want parked after 1", row.Status, row.Attempts)
					}
					wantStatus := "HTTP " + strconv.Itoa(status)
					if !strings.Contains(row.LastError, wantStatus) || !strings.Contains(row.LastError, "redirect") {
						t.Errorf("last_error %q does not name %q", row.LastError, wantStatus)
					}
					if effect == "forward" && !strings.Contains(row.LastError, targetURL) {
						t.Errorf("last_error %q does not name the Location %q", row.LastError, targetURL)
					}
					if effect == "respond" {
						// A response_url is a bearer capability; so may be where
						// it redirects: only scheme and host are shown.
						host := strings.TrimSuffix(target.URL(), "/hook")
						if !strings.Contains(row.LastError, host) || strings.Contains(row.LastError, "secret-path") {
							t.Errorf("last_error %q should name %s and hide the Location's path", row.LastError, host)
						}
					}
					if n := len(target.Posts()); n != 0 {
						t.Errorf("the redirect's target was contacted %d times", n)
					}
					if own && caller.CheckRedirect != nil {
						t.Error("the caller's client was modified")
					}
				})
			}
		}
	}
}
