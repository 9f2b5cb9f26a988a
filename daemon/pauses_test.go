package daemon_test

import (
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
)

// Issue 31.2: a paused redeliver route's view_submission is recorded and
// answered like an asynchronous request (an empty 200): no inline attempt
// reaches the app before the resume, and the sweep performs it after.
func TestPausedRouteNoInlineAttempt(t *testing.T) {
	t.Parallel()
	answer := `{"response_action":"errors","errors":{"service":"no such service"}}`
	app := newBoltish(t, func(int, []byte) (int, string, string) { return 200, "application/json", answer })
	s := startServer(t, configFor(t, redeliverConfig(app.srv.URL)), daemon.Options{})
	if changed, err := s.Store().PauseRoute(t.Context(), "interactions", "test"); err != nil || !changed {
		t.Fatal(changed, err)
	}
	r := s.postForm("/slack/interactivity", ixForm(t, ixViewSubmission("9.9.paused", "deploy_modal")))
	if r.Status != 200 || r.Body != "" {
		t.Fatalf("answer %d %q, want an empty 200 (the app is not asked while its route is paused)", r.Status, r.Body)
	}
	if n := s.count(`SELECT count(*) FROM outbox WHERE status = 'pending' AND attempts = 0 AND claim_token IS NULL`); n != 1 {
		t.Fatalf("%d pending unattempted rows, want the view_submission's", n)
	}
	s.Sweeper().RunOnce(t.Context())
	if b, _ := app.seen(); len(b) != 0 {
		t.Fatalf("the app got %d requests while its route is paused", len(b))
	}
	if _, err := s.Store().ResumeRoute(t.Context(), "interactions"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed row re-delivered", 10*time.Second, func() bool { b, _ := app.seen(); return len(b) == 1 })
}
