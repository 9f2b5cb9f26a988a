package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/config"
	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/ingress"
	"github.com/ackd/ackd/internal/fakeslack"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/internal/tcpproxy"
	"github.com/ackd/ackd/store/postgres"
)

// outcomeConfig logs every event, the /deploy command (acked "On it.") and
// the "note" button, and words its own unknown_text.
const outcomeConfig = `
[sweep]
interval = "100ms"

[commands]
unknown_text = "Not sure that was recorded: check #deploys before trying again."

[[route]]
name   = "events"
event  = "*"
effect = "log"

[[route]]
name     = "deploy"
command  = "/deploy"
ack_text = "On it."
effect   = "log"

[[route]]
name      = "note"
action_id = "note"
effect    = "log"
`

// outcomeOf is what ackd said it decided.
func outcomeOf(r response) string { return r.Header.Get(ingress.HeaderOutcome) }

// waitForSyncRep waits until a commit on the cluster waits for its
// (missing) synchronous standby: the reload reaches the server's processes
// a moment after pg_reload_conf returns. Each probe that waited is left
// waiting on the private cluster.
func waitForSyncRep(t *testing.T, dsn string) {
	t.Helper()
	waitFor(t, "commits to wait for the synchronous standby", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		tx, err := c.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A transaction that wrote no WAL does not wait for a standby.
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE probe (a int)`); err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer ccancel()
		return tx.Commit(cctx) != nil
	})
}

// TestSynchronousStandbyPostgres: a synchronous standby that never
// confirms makes every intent's COMMIT wait, past the ack budget.
//
// When ackd gives up on the COMMIT (pgx sends a cancel request and closes
// the connection), the server commits locally ("the transaction has
// already committed locally"): ackd must ask, and answer "recorded", never
// "nothing was written".
//
// When the committing connection goes silent instead and the cancel
// request is lost (the proxy freezes one, refuses the other), the server
// still waits and nobody can say whether the intent will
// commit: events get 500 (Slack's retry is deduplicated), a slash command
// the honest unknown_text. When the standby requirement goes away the
// waiting intents commit, Slack's retry is a duplicate, and every row is
// performed once. Socket Mode acks follow the same rule: acked when
// recorded, not acked when unknown (Slack re-sends; the receipt dedups).
func TestSynchronousStandbyPostgres(t *testing.T) {
	c := pgtest.Private(t)
	t.Parallel()
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := tcpproxy.New(t, u.Host)
	u.Host = p.Addr()
	// Socket Mode beside HTTP: an envelope is acked by the same rule.
	api := fakeslack.New(t, evBotToken)
	sock := api.SocketMode(t, sockAppToken)
	sock.AckTimeout = time.Minute // the test re-sends by hand
	cfg := configFor(t, fmt.Sprintf("[slack]\napi_url = %q\n[socket_mode]\nenabled = true\n", api.URL())+outcomeConfig)
	cfg.DB = u.String()
	s := startServer(t, cfg, daemon.Options{Secrets: config.Secrets{AppToken: sockAppToken}})
	t.Cleanup(p.Close) // before the server's close: no frozen connection to wait for
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", s.Logs)
		}
	})
	if !sock.Wait(10*time.Second, func() bool { return len(sock.Open()) >= 1 }) {
		t.Fatalf("no Socket Mode connection; log:\n%s", s.Logs)
	}
	if r := s.postEvent(eventBody("EvWarm", mention("C1", "1.1", "hi"))); r.Status != 200 {
		t.Fatalf("warm-up answered %d", r.Status)
	}

	c.SQL(t, `ALTER SYSTEM SET synchronous_standby_names = 'nonexistent_standby'`)
	c.SQL(t, `SELECT pg_reload_conf()`)
	waitForSyncRep(t, c.URL)

	t.Run("a COMMIT the server finishes after ackd gave up is answered as recorded", func(t *testing.T) {
		var answers [3]response
		var wg sync.WaitGroup
		sock.Send("sync", "events_api", json.RawMessage(eventBody("EvSockSync", mention("C1", "2.3", "hello"))))
		wg.Go(func() { answers[0] = s.postEvent(eventBody("EvSync", mention("C1", "2.2", "hello"))) })
		wg.Go(func() {
			answers[1] = s.postForm("/slack/commands", cmdForm("/deploy", "api", "1.2.sync", "http://127.0.0.1:1/r"))
		})
		wg.Go(func() {
			answers[2] = s.postForm("/slack/interactivity", ixForm(t, ixBlockActions("3.4.sync", "note", "1515449601.1", "http://127.0.0.1:1/r")))
		})
		wg.Wait()
		for i, r := range answers {
			if r.Status != 200 || outcomeOf(r) != "first" {
				t.Errorf("answer %d: %d %s, want 200 first", i, r.Status, outcomeOf(r))
			}
		}
		if r := answers[1]; !strings.Contains(r.Body, "On it.") {
			t.Errorf("command answered %q, want its ack text", r.Body)
		}
		if !sock.Wait(10*time.Second, func() bool { return sock.Acked("sync") }) {
			t.Errorf("the Socket Mode envelope was not acked; log:\n%s", s.Logs)
		}
		if n := pgtest.Count(t, c.URL, `SELECT count(*) FROM slack_event_receipts`); n != 5 {
			t.Errorf("receipts = %d, want 5: the answers said recorded", n)
		}
		if s.Logs.Find("msg", "intent not recorded: nothing was written") != nil {
			t.Errorf("ackd said nothing was written:\n%s", s.Logs)
		}
	})

	t.Run("a COMMIT whose connection went silent is answered as unknown", func(t *testing.T) {
		// pgx gives up on a statement with a cancel request (which ends
		// the server's wait: the first case); here it is lost too.
		p.RefuseIf(tcpproxy.PGCancel)
		// RecordIntent sends "COMMIT"; a sweep's claim sends pgx's "commit".
		intentCommit := func(chunk []byte) bool {
			return tcpproxy.PGCommit(chunk) && bytes.Contains(chunk, []byte("COMMIT"))
		}
		p.FreezeAfter(intentCommit)
		p.FreezeAfter(intentCommit)
		p.FreezeAfter(intentCommit)
		ev := eventBody("EvSilent", mention("C1", "3.3", "hello"))
		sockEv := json.RawMessage(eventBody("EvSockSilent", mention("C1", "3.4", "hello")))
		sock.Send("silent", "events_api", sockEv)
		var answers [2]response
		var wg sync.WaitGroup
		wg.Go(func() { answers[0] = s.postEvent(ev) })
		wg.Go(func() {
			answers[1] = s.postForm("/slack/commands", cmdForm("/deploy", "api", "5.6.silent", "http://127.0.0.1:1/r"))
		})
		wg.Wait()
		if r := answers[0]; r.Status != 500 || outcomeOf(r) != "unknown" {
			t.Errorf("event: %d %s, want 500 unknown", r.Status, outcomeOf(r))
		}
		if r := answers[1]; r.Status != 200 || outcomeOf(r) != "unknown" || !strings.Contains(r.Body, "check #deploys before trying again") {
			t.Errorf("command: %d %s %q, want 200 unknown with unknown_text", r.Status, outcomeOf(r), r.Body)
		}
		if s.Logs.Find("msg", "intent outcome unknown: its commit got no answer and the database could not say in time whether it was recorded") == nil {
			t.Errorf("no log line says the outcome is unknown:\n%s", s.Logs)
		}
		waitFor(t, "the Socket Mode envelope's answer", 10*time.Second, func() bool {
			return s.Logs.Find("event_id", "EvSockSilent", "outcome", "unknown", "acked", false) != nil
		})
		if sock.Acked("silent") {
			t.Errorf("an envelope whose intent may not be recorded was acked")
		}

		// The standby requirement goes: the waiting commits finish.
		c.SQL(t, `ALTER SYSTEM RESET synchronous_standby_names`)
		c.SQL(t, `SELECT pg_reload_conf()`)
		waitFor(t, "the waiting intents to commit", 30*time.Second, func() bool {
			return pgtest.Count(t, c.URL, `SELECT count(*) FROM slack_event_receipts`) == 8
		})
		if r := s.postEvent(ev); r.Status != 200 || outcomeOf(r) != "duplicate" {
			t.Fatalf("Slack's retry: %d %s, want 200 duplicate", r.Status, outcomeOf(r))
		}
		sock.Send("silent-again", "events_api", sockEv)
		if !sock.Wait(10*time.Second, func() bool { return sock.Acked("silent-again") }) {
			t.Errorf("Slack's re-send over Socket Mode is not acked; log:\n%s", s.Logs)
		}
		waitFor(t, "the re-send logged as a duplicate", 10*time.Second, func() bool {
			return s.Logs.Find("event_id", "EvSockSilent", "outcome", "duplicate", "acked", true) != nil
		})
	})

	waitFor(t, "every row done", 30*time.Second, func() bool {
		return pgtest.Count(t, c.URL, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 8
	})

	if n := pgtest.Count(t, c.URL, `SELECT count(*) FROM outbox WHERE attempts <> 1`); n != 0 {
		t.Fatalf("%d rows performed more than once", n)
	}
}

// TestCommitReplyLostPostgres: the server commits and its answer to COMMIT
// is lost on the network. ackd asks the server and answers "recorded".
func TestCommitReplyLostPostgres(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()

	t.Run("an event and a command whose COMMIT reply is lost are answered as recorded", func(t *testing.T) {
		direct, via, p := pgtest.Proxied(t)
		cfg := configFor(t, outcomeConfig)
		cfg.DB = via
		s := startServer(t, cfg, daemon.Options{})
		t.Cleanup(p.Close) // before the server's close: no frozen connection to wait for
		if r := s.postEvent(eventBody("EvWarm", mention("C1", "1.1", "hi"))); r.Status != 200 {
			t.Fatalf("warm-up answered %d", r.Status)
		}
		p.DropReplyAfter(tcpproxy.PGCommit)
		if r := s.postEvent(eventBody("EvLost", mention("C1", "2.2", "hello"))); r.Status != 200 || outcomeOf(r) != "first" {
			t.Fatalf("event: %d %s, want 200 first", r.Status, outcomeOf(r))
		}
		p.DropReplyAfter(tcpproxy.PGCommit)
		r := s.postForm("/slack/commands", cmdForm("/deploy", "api", "1.2.lost", "http://127.0.0.1:1/r"))
		if r.Status != 200 || outcomeOf(r) != "first" || !strings.Contains(r.Body, "On it.") {
			t.Fatalf("command: %d %s %q, want 200 first with the ack text", r.Status, outcomeOf(r), r.Body)
		}
		if n := pgtest.Count(t, direct, `SELECT count(*) FROM slack_event_receipts`); n != 3 {
			t.Fatalf("receipts = %d, want 3", n)
		}
		if s.Logs.Find("msg", "commit outcome resolved: COMMIT got no answer, the server says it committed") == nil {
			t.Errorf("the resolution is not logged:\n%s", s.Logs)
		}
	})

	t.Run("an inline attempt whose completion reply is lost is done before its lease ends", func(t *testing.T) {
		answer := `{"response_action":"errors","errors":{"service":"no such service"}}`
		app := newBoltish(t, func(int, []byte) (int, string, string) { return 200, "application/json", answer })
		direct, via, p := pgtest.Proxied(t)
		cfg := configFor(t, redeliverConfig(app.srv.URL))
		cfg.Sweep.Interval.Duration = time.Hour // no ticker claim in between
		cfg.DB = via
		s := startServer(t, cfg, daemon.Options{})
		t.Cleanup(p.Close)
		if r := s.postEvent(eventBody("EvWarm", mention("C1", "1.1", "hi"))); r.Status != 200 {
			t.Fatalf("warm-up answered %d", r.Status)
		}
		waitFor(t, "the warm-up delivered", 20*time.Second, func() bool {
			return pgtest.Count(t, direct, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 1
		})
		// pgx's Tx.Commit sends "commit"; RecordIntent sends "COMMIT":
		// the trap takes the completion's.
		p.DropReplyAfter(func(chunk []byte) bool {
			return tcpproxy.PGCommit(chunk) && bytes.Contains(chunk, []byte("commit"))
		})
		form := ixForm(t, ixViewSubmission("9.9.lost", "deploy_modal"))
		r := s.postForm("/slack/interactivity", form)
		if r.Status != 200 || r.Body != answer {
			t.Fatalf("answer %d %q, want the app's", r.Status, r.Body)
		}
		if n := pgtest.Count(t, direct, `SELECT count(*) FROM outbox WHERE idempotency_key LIKE '%9.9.lost%' AND status = 'done' AND attempts = 1`); n != 1 {
			t.Fatalf("the inline row is not done when the answer is written (done rows: %d): a replica would re-deliver it after its lease", n)
		}
		// Long after the lease, another sweep finds nothing to re-deliver.
		s.Store().(*postgres.Store).SetClockOffset(time.Hour)
		if res, err := s.Sweeper().RunOnce(t.Context()); err != nil || res.Claimed != 0 {
			t.Fatalf("a later sweep: %+v, %v", res, err)
		}
		bodies, _ := app.seen()
		n := 0
		for _, b := range bodies {
			if bytes.Equal(b, form) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("the app saw the view_submission %d times, want once", n)
		}
	})
}
