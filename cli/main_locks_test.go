package cli

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// TestSweepOnceNamesLockHolders: a hand-run sweep that claims nothing
// because another session holds the rows' locks (a claim stuck on a silent
// connection) says so and names that session, instead of blaming a missing
// credential.
func TestSweepOnceNamesLockHolders(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()
	db := pgtest.URL(t)
	st, err := postgres.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.RecordIntent(context.Background(), store.Intent{EventID: "EvLocked", EventType: "app_mention",
		Rows: []store.NewRow{{Key: "EvLocked:log", Effect: "log", Payload: `{}`}}})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	u, _ := url.Parse(db)
	q := u.Query()
	q.Set("application_name", "stuck-claimer")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT id FROM outbox FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	// No SLACK_BOT_TOKEN: the Web API effects are skipped, which the old
	// message took for the reason.
	r := procRun(t, procEnv(), "sweep", "--once", "--db", db)
	if r.Code == 0 {
		t.Fatalf("sweep --once exited 0 with a row locked elsewhere; stdout %q stderr %q", r.Stdout, r.Stderr)
	}
	for _, want := range []string{"claimed nothing while 1 rows are due and free", "other transactions hold locks", `"stuck-claimer"`, "idle in transaction"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.Stderr)
		}
	}
	if strings.Contains(r.Stderr, "credential") {
		t.Errorf("stderr blames a credential:\n%s", r.Stderr)
	}

	// Once the lock is gone the same sweep performs the row.
	tx.Rollback(context.Background())
	r = procMustRun(t, procEnv(), "sweep", "--once", "--db", db)
	if !strings.Contains(r.Stdout, "claimed=1 done=1") {
		t.Fatalf("after the lock ended: %q", r.Stdout)
	}
}
