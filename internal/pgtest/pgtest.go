// Package pgtest gives PostgreSQL tests a database of their own on the
// server named by ACKD_TEST_POSTGRES_URL (.ci/with-postgres.sh starts a
// throwaway one): each test gets a fresh schema, selected by the URL it is
// handed, and dropped at the end. Without the variable the test skips
// locally and fails in CI (testreq).
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/testreq"
)

// Need skips (locally) or fails (CI) tb without a test server, and returns
// its URL.
func Need(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("ACKD_TEST_POSTGRES_URL")
	testreq.Need(tb, u != "", "set ACKD_TEST_POSTGRES_URL (see .ci/with-postgres.sh)")
	return u
}

// URL creates a fresh schema for tb and returns a URL whose connections use
// it (options=-c search_path=…, understood by pgx and psql alike).
func URL(tb testing.TB) string {
	tb.Helper()
	base := Need(tb)
	name := "t_" + strings.ToLower(rand.Text()[:12])
	Exec(tb, base, "CREATE SCHEMA "+name)
	tb.Cleanup(func() { Exec(tb, base, "DROP SCHEMA "+name+" CASCADE") })
	return WithSchema(tb, base, name)
}

// WithSchema returns base with its connections' search_path set to schema.
func WithSchema(tb testing.TB, base, schema string) string {
	tb.Helper()
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-csearch_path="+schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Exec runs one statement on dsn, failing tb on error.
func Exec(tb testing.TB, dsn, sql string, args ...any) {
	tb.Helper()
	withConn(tb, dsn, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, sql, args...)
		return err
	}, sql)
}

// Count runs a count query on dsn.
func Count(tb testing.TB, dsn, sql string, args ...any) int {
	tb.Helper()
	var n int
	withConn(tb, dsn, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, sql, args...).Scan(&n)
	}, sql)
	return n
}

// withConn runs fn on a fresh connection to dsn, failing tb (naming what)
// on any error.
func withConn(tb testing.TB, dsn string, fn func(context.Context, *pgx.Conn) error, what string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect to the test server: %v", err)
	}
	defer c.Close(ctx)
	if err := fn(ctx, c); err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
}

// Name describes a URL for messages.
func Name(dsn string) string { return fmt.Sprintf("%q", dsn) }
