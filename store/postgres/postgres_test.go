package postgres_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/pgtest"
	"github.com/ackd/ackd/store"
	"github.com/ackd/ackd/store/postgres"
)

func intent(id string) store.Intent {
	return store.Intent{EventID: id, EventType: "app_mention",
		Rows: []store.NewRow{{Key: id + ":r", Effect: "log", Payload: `{}`}}}
}

// latest is the number of migrations in the embedded schema.
func latest() int { return strings.Count(postgres.Schema, "\n-- migrate: ") }

func TestMigrate(t *testing.T) {
	t.Run("replicas opening together migrate once", func(t *testing.T) {
		u := pgtest.URL(t)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				s, err := postgres.Open(context.Background(), u, store.Options{})
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("open %d: %v", i, err)
			}
		}
		if n := pgtest.Count(t, u, `SELECT count(*) FROM ackd_migrations`); n != latest() {
			t.Fatalf("ackd_migrations rows = %d, want %d", n, latest())
		}
		s := mustOpen(t, u, store.Options{})
		if v, err := s.SchemaVersion(context.Background()); err != nil || v != latest() {
			t.Fatalf("schema version %d, %v; want %d", v, err, latest())
		}
	})

	t.Run("a database newer than the binary is refused", func(t *testing.T) {
		u := pgtest.URL(t)
		mustOpen(t, u, store.Options{}).Close()
		pgtest.Exec(t, u, `INSERT INTO ackd_migrations (version) VALUES ($1)`, latest()+1)
		_, err := postgres.Open(context.Background(), u, store.Options{})
		if err == nil || !strings.Contains(err.Error(), "newer than this ackd") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("inspection commands refuse a database ackd never migrated", func(t *testing.T) {
		u := pgtest.URL(t)
		_, err := postgres.Open(context.Background(), u, store.Options{MustExist: true})
		if err == nil || !strings.Contains(err.Error(), "no ackd schema") {
			t.Fatalf("err = %v", err)
		}
		if n := pgtest.Count(t, u, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`); n != 0 {
			t.Fatalf("a refused open left %d tables behind", n)
		}
		mustOpen(t, u, store.Options{}).Close()
		mustOpen(t, u, store.Options{MustExist: true})
	})

	t.Run("the operator views read in psql terms", func(t *testing.T) {
		u := pgtest.URL(t)
		s := mustOpen(t, u, store.Options{})
		if _, err := s.RecordIntent(context.Background(), intent("EvV")); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{
			`SELECT count(*) FROM queue_summary WHERE status = 'pending' AND rows = 1`,
			`SELECT count(*) FROM outbox_readable WHERE idempotency_key = 'EvV:r' AND created > now() AT TIME ZONE 'UTC' - interval '1 hour'`,
			`SELECT count(*) FROM receipts_readable WHERE event_id = 'EvV'`,
			`SELECT count(*) + 1 FROM parked`,
		} {
			if n := pgtest.Count(t, u, q); n != 1 {
				t.Errorf("%s = %d, want 1", q, n)
			}
		}
	})
}

func TestLocationHidesThePassword(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	// The server's own password when it asks for one (CI runs this suite
	// once against such a server, .ci/with-postgres-password.sh); against a
	// server that trusts loopback, a password it does not check.
	pw, has := u.User.Password()
	if !has {
		pw = "s3cret-pw"
	}
	user := u.User.Username()
	u.User = url.UserPassword(user, pw)
	s := mustOpen(t, u.String(), store.Options{})
	if loc := s.Location(); strings.Contains(loc, pw) || !strings.Contains(loc, "127.0.0.1") {
		t.Fatalf("Location() = %q", loc)
	}
	q := u.Query()
	q.Set("password", pw)
	u.User = url.User(user)
	u.RawQuery = q.Encode()
	if r := postgres.Redact(u.String()); strings.Contains(r, pw) {
		t.Fatalf("Redact(password in the query) = %q", r)
	}
	// The password in the query works as well as in the user info.
	s2 := mustOpen(t, u.String(), store.Options{})
	if loc := s2.Location(); strings.Contains(loc, pw) {
		t.Fatalf("Location() with the password in the query = %q", loc)
	}
	// A server that is not there: the error names the place, not the password.
	u.User = url.UserPassword(user, pw)
	u.Host = closedPort(t)
	_, err = postgres.Open(context.Background(), u.String(), store.Options{})
	if err == nil || !errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), pw) {
		t.Fatalf("open of a closed port: %v", err)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// proxy forwards loopback TCP connections to the test server until it is
// told to go silent: then it keeps every connection open and passes no byte
// either way (a server that hangs, a network partition), and accepts new
// connections that it never answers.
type proxy struct {
	ln     net.Listener
	target string
	silent atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return p
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if p.silent.Load() {
			continue // accepted, never answered
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, up)
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

// dropAll closes every proxied connection: the server went away.
func (p *proxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func TestUnreachableServer(t *testing.T) {
	base := pgtest.URL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	s := mustOpen(t, u.String(), store.Options{})
	ctx := context.Background()
	if _, err := s.RecordIntent(ctx, intent("EvBefore")); err != nil {
		t.Fatal(err)
	}

	// The server stops answering: calls end at their deadline, as
	// ErrUnavailable, whether they hold a pooled connection or need a new one.
	p.silent.Store(true)
	for _, id := range []string{"EvSilent1", "EvSilent2", "EvSilent3"} {
		done := make(chan error, 1)
		go func() {
			c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, err := s.RecordIntent(c, intent(id))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("RecordIntent(%s) against a silent server: %v; want ErrUnavailable and DeadlineExceeded", id, err)
			}
		case <-time.After(30 * time.Second): // a hang detector, not a timing assertion
			t.Fatalf("RecordIntent(%s) hung past its deadline against a silent server", id)
		}
	}
	c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = s.CheckWrite(c)
	cancel()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("CheckWrite against a silent server: %v", err)
	}

	// The server comes back: the pool reconnects by itself.
	p.silent.Store(false)
	p.dropAll()
	var ok bool
	for range 100 {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.RecordIntent(c, intent("EvAfter"))
		cancel()
		if err == nil {
			ok = true
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !ok {
		t.Fatal("no intent recorded after the server came back")
	}
	if err := s.CheckWrite(ctx); err != nil {
		t.Fatalf("CheckWrite after the server came back: %v", err)
	}
	for _, id := range []string{"EvBefore", "EvAfter"} {
		if ok, err := s.HasReceipt(ctx, id); err != nil || !ok {
			t.Errorf("receipt %s: %v %v", id, ok, err)
		}
	}
}

// TestDatabaseClock: replicas' clocks differ, so leases and stamps follow
// the database's clock, never a replica's.
func TestDatabaseClock(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	ahead := mustOpen(t, u, store.Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	behind := mustOpen(t, u, store.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
	before := time.Now()
	if _, err := behind.RecordIntent(ctx, intent("Ev1")); err != nil {
		t.Fatal(err)
	}
	rows, err := behind.Claim(ctx, "B", 10, time.Minute, nil)
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim by the replica whose clock is behind: %v %v", rows, err)
	}
	if d := rows[0].CreatedAt.Sub(before); d < -time.Minute || d > time.Minute {
		t.Fatalf("row stamped %s away from the database's clock", d)
	}
	// The replica whose clock runs an hour ahead sees B's lease as the
	// database does: live.
	if rows, err := ahead.Claim(ctx, "A", 10, time.Minute, nil); err != nil || len(rows) != 0 {
		t.Fatalf("a replica with a clock an hour ahead took a live lease: %v %v", rows, err)
	}
}

// The engine-agnostic stored-request tests are in store/storetest
// (StoredRequest); this one deletes a request behind the store's back.
func TestStoredRequestGone(t *testing.T) {
	u := pgtest.URL(t)
	s := mustOpen(t, u, store.Options{})
	in := intent("ix:2")
	in.Request = &store.Request{ContentType: "application/x-www-form-urlencoded", Body: []byte("x")}
	in.Rows[0].Effect, in.Rows[0].RequestID = "redeliver", "ix:2"
	if _, err := s.RecordIntent(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, u, `DELETE FROM slack_requests`)
	rows, err := s.Claim(context.Background(), "A", 10, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].RequestID != "ix:2" || rows[0].Request != nil {
		t.Fatalf("a row whose request is gone: rows = %+v, want request_id ix:2 and no request", rows)
	}
}

// TestUpgradeToStoredRequests opens a database at schema version 2 (before
// slack_requests) with a row in it: migration 3 adds the table and the
// column, the old row reads with no request, and a new intent stores one.
func TestUpgradeToStoredRequests(t *testing.T) {
	u := pgtest.URL(t)
	ms, err := store.Migrations(postgres.Schema)
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, u, `CREATE TABLE ackd_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	for _, m := range ms[:2] {
		pgtest.Exec(t, u, m.SQL)
		pgtest.Exec(t, u, `INSERT INTO ackd_migrations (version) VALUES ($1)`, m.Version)
	}
	pgtest.Exec(t, u, `INSERT INTO outbox (idempotency_key, effect, payload, next_attempt_at, created_at)
		VALUES ('old:r', 'log', '{}', 0, 0)`)
	s := mustOpen(t, u, store.Options{})
	ctx := context.Background()
	if v, err := s.SchemaVersion(ctx); err != nil || v < 3 {
		t.Fatalf("schema version %d, %v; want at least 3", v, err)
	}
	if r, err := s.GetByKey(ctx, "old:r"); err != nil || r.RequestID != "" || r.Request != nil {
		t.Fatalf("old row after the upgrade: %+v %v", r, err)
	}
	in := intent("ix:new")
	in.Request = &store.Request{ContentType: "application/json", Body: []byte(`{"a":1}`)}
	in.Rows[0].Effect, in.Rows[0].RequestID = "redeliver", "ix:new"
	if _, err := s.RecordIntent(ctx, in); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Claim(ctx, "A", 10, time.Minute, nil)
	if err != nil || len(rows) != 2 {
		t.Fatalf("claim after the upgrade: %+v %v", rows, err)
	}
	if rows[0].Request != nil || rows[1].Request == nil || string(rows[1].Request.Body) != `{"a":1}` {
		t.Fatalf("claimed rows' requests: %+v, %+v", rows[0].Request, rows[1].Request)
	}
}

// A read-only store on a schema from before ackd_instances.effects (the
// inspection commands accept one) lists the instances with Performs nil,
// and the server refuses its writes.
func TestReadOnlyOnTheSchemaBeforeInstanceEffects(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	s := mustOpen(t, u, store.Options{})
	if err := s.Heartbeat(ctx, store.Instance{ID: "a", PID: 1, Host: "h", Listen: "x", StartedAt: time.Now(), Performs: []string{"log"}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	pgtest.Exec(t, u, `ALTER TABLE ackd_instances DROP COLUMN effects`)
	pgtest.Exec(t, u, `DELETE FROM ackd_migrations WHERE version = $1`, latest())
	r := mustOpen(t, u, store.Options{ReadOnly: true, MinSchema: 3})
	ins, err := r.Instances(ctx, time.Hour)
	if err != nil || len(ins) != 1 || ins[0].ID != "a" || ins[0].Performs != nil {
		t.Fatalf("Instances on the older schema = %+v, %v", ins, err)
	}
	if _, err := r.Pool().Exec(ctx, `DELETE FROM ackd_instances`); err == nil {
		t.Fatal("a read-only store's session wrote")
	}
	if n := pgtest.Count(t, u, `SELECT count(*) FROM ackd_migrations`); n != latest()-1 {
		t.Fatalf("ackd_migrations has %d rows after a read-only open, want %d", n, latest()-1)
	}
}

// A read-only store on a schema from before the post confirmation columns
// (the inspection commands accept one) reads rows with them at their
// never-set values.
func TestReadOnlyWithoutConfirmColumns(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	s := mustOpen(t, u, store.Options{})
	if _, err := s.RecordIntent(ctx, store.Intent{EventID: "Ev1", EventType: "message",
		Rows: []store.NewRow{{Key: "Ev1:r", Effect: "log", Payload: `{}`}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	pgtest.Exec(t, u, `ALTER TABLE outbox DROP COLUMN note, DROP COLUMN first_claimed_at, DROP COLUMN outcome_unknown`)
	pgtest.Exec(t, u, `DELETE FROM ackd_migrations WHERE version = $1`, latest())
	r := mustOpen(t, u, store.Options{ReadOnly: true, MinSchema: 3})
	rows, err := r.List(ctx, "", 10)
	if err != nil || len(rows) != 1 || rows[0].Key != "Ev1:r" || rows[0].OutcomeUnknown || !rows[0].FirstClaimedAt.IsZero() || rows[0].Note != "" {
		t.Fatalf("List on the older schema = %+v, %v", rows, err)
	}
	if got, err := r.GetByKey(ctx, "Ev1:r"); err != nil || got.ID != rows[0].ID {
		t.Fatalf("GetByKey on the older schema = %+v, %v", got, err)
	}
}

// A read-only store on a schema from before
// ackd_installations.slack_installed_at reads installations with that time
// unknown.
func TestReadOnlyWithoutInstallSlackTime(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	s := mustOpen(t, u, store.Options{})
	if err := s.PutInstallation(ctx, store.Installation{Key: "T1", Secret: []byte{1}, SlackInstalledAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	pgtest.Exec(t, u, `ALTER TABLE ackd_installations DROP COLUMN slack_installed_at`)
	pgtest.Exec(t, u, `DELETE FROM ackd_migrations WHERE version = $1`, latest())
	r := mustOpen(t, u, store.Options{ReadOnly: true, MinSchema: 3})
	list, err := r.ListInstallations(ctx)
	if err != nil || len(list) != 1 || list[0].Key != "T1" || !list[0].SlackInstalledAt.IsZero() {
		t.Fatalf("ListInstallations on the older schema = %+v, %v", list, err)
	}
	if _, err := r.GetInstallation(ctx, "T1"); err != nil {
		t.Fatal(err)
	}
}
