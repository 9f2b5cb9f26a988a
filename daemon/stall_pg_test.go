package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ackd/ackd/daemon"
	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// TestStalledConnectionPostgres: every connection between ackd and the
// server stops passing packets while a claim's transaction holds its rows
// (the server has answered the claim; ackd never hears it). The server
// ends the silent session (idle_in_transaction_session_timeout, short
// here), which releases the rows; the sweep loop, stuck in that claim,
// gives up at its deadline, sweeps again on a new connection, and performs
// them; new intents keep committing, and every answer tells the truth.
func TestStalledConnectionPostgres(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()
	direct, via, p := pgtest.Proxied(t)
	cfg := configFor(t, `
[sweep]
interval  = "100ms"
lease     = "4s"
immediate = false

[[route]]
name    = "events"
event   = "*"
effect  = "log"
timeout = "1s"
`)
	cfg.DB = via + "&idle_in_transaction_session_timeout=1000"
	s := startServer(t, cfg, daemon.Options{})
	t.Cleanup(p.Close) // before the server's close
	if r := s.postEvent(eventBody("EvWarm", mention("C1", "1.1", "hi"))); r.Status != 200 {
		t.Fatalf("warm-up answered %d", r.Status)
	}
	waitFor(t, "the warm-up delivered", 20*time.Second, func() bool {
		return pgtest.Count(t, direct, `SELECT count(*) FROM outbox WHERE status = 'done'`) == 1
	})

	// The claim that returns these rows freezes every open connection.
	p.FreezeWhenServerSends(func(chunk []byte) bool { return bytes.Contains(chunk, []byte("EvStall")) })
	other, err := postgres.Open(context.Background(), direct, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i := range 3 {
		id := fmt.Sprintf("EvStall%d", i)
		if _, err := other.RecordIntent(context.Background(), store.Intent{EventID: id, EventType: "app_mention",
			Rows: []store.NewRow{{Key: id + ":events", Effect: "log", Payload: `{}`}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a claim to freeze the connections", 20*time.Second, func() bool { return p.Frozen() > 0 })

	// New intents: once the pool has let go of its silent connections,
	// they commit; until then an answer may be 500, and then nothing of
	// it was written.
	answered := 0
	for i := 0; answered < 3; i++ {
		if i == 20 {
			t.Fatalf("only %d of 20 intents after the freeze were recorded", answered)
		}
		id := fmt.Sprintf("EvAfter%d", i)
		r := s.postEvent(eventBody(id, mention("C1", fmt.Sprintf("5.%d", i), "after")))
		has := pgtest.Count(t, direct, `SELECT count(*) FROM slack_event_receipts WHERE event_id = $1`, id) == 1
		switch {
		case r.Status == 200 && has:
			answered++
		case r.Status == 500 && outcomeOf(r) == "failed" && !has:
		default:
			t.Fatalf("%s answered %d %s with receipt=%v", id, r.Status, outcomeOf(r), has)
		}
	}

	waitFor(t, "the rows the silent claim held to be performed", 60*time.Second, func() bool {
		return pgtest.Count(t, direct, `SELECT count(*) FROM outbox WHERE idempotency_key LIKE 'EvStall%' AND status = 'done'`) == 3
	})
	waitFor(t, "the new intents performed", 20*time.Second, func() bool {
		return pgtest.Count(t, direct, `SELECT count(*) FROM outbox WHERE idempotency_key LIKE 'EvAfter%' AND status <> 'done'`) == 0
	})
	if s.Logs.Find("msg", "sweep failed; retrying every interval") == nil || s.Logs.Find("msg", "sweep recovered") == nil {
		t.Errorf("the stuck claim's failure and the recovery are not logged:\n%s", s.Logs)
	}
}
