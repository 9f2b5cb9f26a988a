package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// TestConsoleQueryPlans: the console's search and counts read the outbox
// through its indexes on an outbox of 50,000 done rows, never a
// sequential scan of the table.
func TestConsoleQueryPlans(t *testing.T) {
	u := pgtest.URL(t)
	st, err := postgres.Open(context.Background(), u, store.Options{Schema: "-"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	pgtest.Exec(t, u, `INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, completed_at, request_id)
		SELECT 'Ev' || i || ':greet', 'log', '{"route":"greet","facts":{"channel":"C1","ts":"1700000000.' || i || '"}}',
		       'done', 1, 1700000000000 + i, 1700000000000 + i, 1700000000000 + i, CASE WHEN i % 10 = 0 THEN 'Ev' || i END
		  FROM generate_series(1, 50000) AS i`)
	pgtest.Exec(t, u, `INSERT INTO outbox (idempotency_key, effect, payload, status, attempts, next_attempt_at, created_at, last_error)
		SELECT 'P' || i || ':greet', 'log', '{"route":"greet"}', 'parked', 8, 1, 1, 'x' FROM generate_series(1, 20) AS i`)
	pgtest.Exec(t, u, `ANALYZE outbox`)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for name, tc := range map[string]struct {
		sql  string
		args []any
	}{
		"search":                    {postgres.SearchSQL, []any{int64(7), "Ev7", `:"Ev7"`, 100}},
		"search of the newest rows": {postgres.SearchWindowSQL, []any{`:"C404"`, 100}},
		"counts by route":           {postgres.RouteCountsSQL, nil},
	} {
		t.Run(name, func(t *testing.T) {
			rows, err := conn.Query(ctx, "EXPLAIN "+tc.sql, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			rows.Close()
			if p := strings.Join(plan, "\n"); strings.Contains(p, "Seq Scan on outbox") {
				t.Fatalf("a sequential scan of the outbox:\n%s", p)
			}
		})
	}
}
