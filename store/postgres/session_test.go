package postgres_test

import (
	"context"
	"testing"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

// show reads settings on one of s's pooled connections.
func show(t *testing.T, s *postgres.Store, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range names {
		var v string
		if err := s.Pool().QueryRow(context.Background(), `SELECT current_setting($1)`, n).Scan(&v); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[n] = v
	}
	return out
}

// TestSessionTimeouts: every ackd session bounds what it may hold on the
// server, by role, and a URL that names a setting keeps its own value.
func TestSessionTimeouts(t *testing.T) {
	pgtest.Need(t)
	t.Parallel()
	names := []string{"idle_in_transaction_session_timeout", "statement_timeout", "lock_timeout",
		"tcp_keepalives_idle", "tcp_user_timeout"}
	u := pgtest.URL(t)
	for _, tc := range []struct {
		name, url string
		role      string
		want      map[string]string
	}{
		{"serve", u, "", map[string]string{"idle_in_transaction_session_timeout": "15s", "statement_timeout": "30s",
			"lock_timeout": "10s", "tcp_keepalives_idle": "15", "tcp_user_timeout": "30000"}},
		{"cli", u, store.RoleCLI, map[string]string{"idle_in_transaction_session_timeout": "15s", "statement_timeout": "5min",
			"lock_timeout": "10s", "tcp_keepalives_idle": "15", "tcp_user_timeout": "30000"}},
		{"the URL's own value wins", u + "&idle_in_transaction_session_timeout=1500", "", map[string]string{
			"idle_in_transaction_session_timeout": "1500ms", "statement_timeout": "30s", "lock_timeout": "10s",
			"tcp_keepalives_idle": "15", "tcp_user_timeout": "30000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, tc.url, store.Options{Role: tc.role})
			got := show(t, s, names...)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			// The ingress transaction's own limits end with it.
			if _, err := s.RecordIntent(context.Background(), intent("EvS-"+tc.name)); err != nil {
				t.Fatal(err)
			}
			if got := show(t, s, "statement_timeout")["statement_timeout"]; got != tc.want["statement_timeout"] {
				t.Errorf("after an intent statement_timeout = %q, want the session's %q", got, tc.want["statement_timeout"])
			}
		})
	}
}
