// Package pgtest gives PostgreSQL tests a database of their own on the
// server named by ACKD_TEST_POSTGRES_URL (.ci/with-postgres.sh starts a
// throwaway one): each test gets a fresh schema, selected by the URL it is
// handed, and dropped at the end. Without the variable the test skips
// locally and fails in CI (testreq).
//
// A test that must change server-wide settings (ALTER SYSTEM,
// pg_reload_conf) never does so on that shared server: Private starts a
// cluster of the test's own.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ackd/ackd/internal/tcpproxy"
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

// Cluster is a private PostgreSQL server started for one test: its own
// data directory and port, so the test may change server-wide settings
// (ALTER SYSTEM, pg_reload_conf) that the shared server must never see.
type Cluster struct {
	// URL connects as the cluster's superuser (ackd, trust auth) to the
	// database ackd_test.
	URL  string
	Data string // the data directory
	Port int
}

// Private initdbs and starts a cluster of tb's own, with the binaries
// beside ACKD_TEST_PG_CTL, owned by the OS user ACKD_TEST_PG_USER (initdb
// refuses root); it is stopped and removed at cleanup. It skips (locally)
// or fails (CI) without those variables.
func Private(tb testing.TB) *Cluster {
	tb.Helper()
	pgCtl, osUser := os.Getenv("ACKD_TEST_PG_CTL"), os.Getenv("ACKD_TEST_PG_USER")
	testreq.Need(tb, pgCtl != "", "set ACKD_TEST_PG_CTL (see .ci/with-postgres.sh) for a private PostgreSQL cluster")
	bin := filepath.Dir(pgCtl)
	dir, err := os.MkdirTemp("", "ackd-pgpriv-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	as := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		if osUser != "" && os.Geteuid() == 0 {
			cmd = exec.Command("runuser", append([]string{"-u", osUser, "--", filepath.Join(bin, name)}, args...)...)
		}
		cmd.Dir = dir
		return cmd
	}
	if osUser != "" && os.Geteuid() == 0 {
		if out, err := exec.Command("chown", osUser+":", dir).CombinedOutput(); err != nil {
			tb.Fatalf("chown %s: %v: %s", dir, err, out)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := as("initdb", "-D", data, "-U", "ackd", "--auth=trust", "-E", "UTF8", "--no-instructions", "--no-sync").CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v: %s", err, out)
	}
	port := freePort(tb)
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nmax_connections = 60\nshared_buffers = 16MB\n", port, dir)
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatal(err)
	}
	if out, err := as("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		tb.Fatalf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	tb.Cleanup(func() {
		if out, err := as("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
			tb.Errorf("pg_ctl stop: %v: %s", err, out)
		}
	})
	c := &Cluster{Data: data, Port: port,
		URL: fmt.Sprintf("postgres://ackd@127.0.0.1:%d/postgres?sslmode=disable", port)}
	Exec(tb, c.URL, "CREATE DATABASE ackd_test")
	c.URL = fmt.Sprintf("postgres://ackd@127.0.0.1:%d/ackd_test?sslmode=disable", port)
	return c
}

// SQL runs one statement as the cluster's superuser, failing tb on error.
func (c *Cluster) SQL(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	Exec(tb, c.URL, sql, args...)
}

// freePort returns a loopback port nothing listens on now.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Proxied creates a fresh schema for tb (as URL does) and returns its URL
// twice: direct, and through a tcpproxy that the test can freeze or make
// drop the server's replies.
func Proxied(tb testing.TB) (direct, viaProxy string, p *tcpproxy.Proxy) {
	tb.Helper()
	direct = URL(tb)
	u, err := url.Parse(direct)
	if err != nil {
		tb.Fatal(err)
	}
	p = tcpproxy.New(tb, u.Host)
	u.Host = p.Addr()
	return direct, u.String(), p
}
