package postgres

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ackd/ackd/store"
)

// Every ackd session bounds what it can hold on the server, so that a
// connection that goes silent (a vanished host, a failed middlebox, a
// process stopped in a debugger) cannot keep row locks for longer than
// this; FOR UPDATE SKIP LOCKED would otherwise hide the rows it locked from
// every replica until TCP gives up, which can take a quarter of an hour.
//
//   - idle_in_transaction_session_timeout: the server ends a session whose
//     transaction waits for the client that long; its locks go with it.
//     ackd never waits on anything but the server inside a transaction.
//   - statement_timeout, lock_timeout: no statement runs, or waits for a
//     lock, without end. The ingress transaction lowers both to what is
//     left of the ack budget (SET LOCAL, see RecordIntent); a migration
//     waits for its table locks at most migrateLockTimeout, so that its
//     ALTER TABLE, queued behind a transaction that holds outbox rows,
//     does not stop every outbox statement queued behind it.
//   - TCP keepalives and tcp_user_timeout on both ends: a peer that
//     vanished is noticed in about a minute, idle or not.
//
// Each is a PostgreSQL setting sent when the connection starts; a URL that
// names one (…?idle_in_transaction_session_timeout=5000, milliseconds, as
// libpq's options would) keeps its own value.
type sessionTimeouts struct {
	statement, lock, idleInTx time.Duration
}

// roleTimeouts are the defaults by store.Options.Role.
var roleTimeouts = map[string]sessionTimeouts{
	// The daemon: its longest statement is a prune batch or a claim.
	store.RoleServe: {statement: 30 * time.Second, lock: 10 * time.Second, idleInTx: 15 * time.Second},
	// A hand-run command may requeue or prune many rows at once.
	store.RoleCLI: {statement: 5 * time.Minute, lock: 10 * time.Second, idleInTx: 15 * time.Second},
}

// migrateLockTimeout bounds how long a migration's statement waits for a
// table lock before it gives up and tries again (migrate): statements
// queued behind its lock request (an ack's inserts) wait at most that, well
// inside the ack budget.
const migrateLockTimeout = 500 * time.Millisecond

// TCP settings of every connection (both ends): keepalive probes after
// tcpIdle of silence, every tcpInterval, tcpCount of them; unacknowledged
// data gives up after tcpUserTimeout.
const (
	tcpIdle        = 15 * time.Second
	tcpInterval    = 5 * time.Second
	tcpCount       = 3
	tcpUserTimeout = 30 * time.Second
)

// callMargin is how much longer than statement_timeout a store call whose
// context has no deadline may take (a claim is a few statements).
const callMargin = 5 * time.Second

// configureSessions sets the role's timeouts (unless the URL set them) and
// the TCP settings on cfg, and returns the statement timeout in force.
func configureSessions(cfg *pgxpool.Config, role string) time.Duration {
	t := roleTimeouts[role]
	rp := cfg.ConnConfig.RuntimeParams
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	set := func(name, value string) {
		if _, ok := rp[name]; !ok {
			rp[name] = value
		}
	}
	set("statement_timeout", ms(t.statement))
	set("lock_timeout", ms(t.lock))
	set("idle_in_transaction_session_timeout", ms(t.idleInTx))
	// The server's end of the connection.
	set("tcp_keepalives_idle", strconv.Itoa(int(tcpIdle.Seconds())))
	set("tcp_keepalives_interval", strconv.Itoa(int(tcpInterval.Seconds())))
	set("tcp_keepalives_count", strconv.Itoa(tcpCount))
	set("tcp_user_timeout", ms(tcpUserTimeout))

	// ackd's end.
	userTimeout := tcpUserTimeout
	if v, err := strconv.Atoi(rp["tcp_user_timeout"]); err == nil && v > 0 {
		userTimeout = time.Duration(v) * time.Millisecond
	}
	d := &net.Dialer{
		Timeout: cfg.ConnConfig.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: tcpIdle, Interval: tcpInterval,
			Count: tcpCount},
		Control: func(network, address string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil // a Unix socket: no peer to lose
			}
			return setUserTimeout(c, userTimeout)
		},
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}

	statement := t.statement
	if v, err := strconv.Atoi(rp["statement_timeout"]); err == nil {
		statement = time.Duration(v) * time.Millisecond
	}
	return statement
}

// bound gives ctx a deadline when it has none: statement_timeout plus a
// margin, so that no store call waits forever on a connection that went
// silent (the client side of the session timeouts above).
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	d := s.callTimeout
	if d <= 0 {
		d = 10 * time.Minute // statement_timeout=0: unbounded on the server, not here
	}
	return context.WithTimeout(ctx, d)
}
