// Package tcpproxy is a test helper: a TCP proxy on 127.0.0.1 between a
// client (ackd) and a server (PostgreSQL) that can misbehave the way a
// network does, on demand:
//
//   - Freeze: every connection open now stops forwarding in both
//     directions, without closing either side (a vanished host, a failed
//     middlebox). A client that gives up and closes its side is not passed
//     on either: the server sees a connection that went silent. Connections
//     opened later pass normally.
//   - FreezeAfter: one connection goes silent right after its client sent
//     a matching chunk (a COMMIT): the server works on, nothing crosses.
//   - FreezeWhenServerSends: a Freeze sprung by the server's answer (the
//     client never gets it): a session left idle in its transaction.
//   - RefuseIf: new connections whose first bytes match are closed
//     unforwarded (PGCancel: PostgreSQL's cancel requests are lost).
//   - DropReplyAfter: the next connection whose client sends bytes matching
//     a predicate (a COMMIT) gets nothing more from the server: the request
//     reaches the server, its answer is read and thrown away.
//
// The proxy forwards bytes as they come, chunk by chunk; a predicate sees
// one chunk as read from the client (a small protocol message arrives
// whole on loopback).
package tcpproxy

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Proxy forwards 127.0.0.1:port to a target address.
type Proxy struct {
	ln     net.Listener
	target string
	done   chan struct{} // closed by Close
	once   sync.Once

	mu     sync.Mutex
	conns  []*pair
	traps  []trap            // armed, each sprung once
	refuse func([]byte) bool // RefuseIf: a new connection's first chunk → close it unforwarded
}

// trap is one armed one-shot trap.
type trap struct {
	kind  int // trapDrop, trapFreezeConn or trapFreezeAll
	match func([]byte) bool
}

const (
	trapDrop       = iota // DropReplyAfter: client chunk → drop the server's bytes
	trapFreezeConn        // FreezeAfter: client chunk → freeze that connection after it
	trapFreezeAll         // FreezeWhenServerSends: server chunk → freeze all, hold it
)

// pair is one proxied connection.
type pair struct {
	client, server net.Conn
	frozen         chan struct{} // closed when frozen
	freezeOnce     sync.Once
	dropReplies    chan struct{} // closed when the server's bytes are to be thrown away
	dropOnce       sync.Once
}

// New starts a proxy to target (host:port); it is closed at tb's cleanup.
func New(tb testing.TB, target string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, done: make(chan struct{})}
	go p.accept()
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening and closes every connection, frozen or not.
func (p *Proxy) Close() {
	p.once.Do(func() { close(p.done) })
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.conns = nil
}

// Freeze stops every open connection, both directions, without closing it.
// It returns how many connections it froze.
func (p *Proxy) Freeze() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.freezeOnce.Do(func() { close(c.frozen) })
	}
	return len(p.conns)
}

// DropReplyAfter arms a one-shot trap: the first connection whose client
// sends a chunk for which match is true gets nothing more from the server.
// The matching chunk itself is forwarded. Each call arms one more trap.
func (p *Proxy) DropReplyAfter(match func(chunk []byte) bool) { p.arm(trapDrop, match) }

// FreezeAfter arms a one-shot trap: the first connection whose client
// sends a chunk for which match is true is frozen (that connection only)
// right after the chunk is forwarded. The server gets the request; neither
// its answer nor the client's giving up ever crosses. Each call arms one
// more trap.
func (p *Proxy) FreezeAfter(match func(chunk []byte) bool) { p.arm(trapFreezeConn, match) }

// FreezeWhenServerSends arms a one-shot trap: the first chunk from the
// server for which match is true freezes every open connection (Freeze)
// before that chunk is passed on; the client never gets it. A server that
// answered a statement inside a transaction is then left idle in that
// transaction, holding its locks, with a client that hears nothing.
func (p *Proxy) FreezeWhenServerSends(match func(chunk []byte) bool) { p.arm(trapFreezeAll, match) }

// RefuseIf closes, unforwarded, every new connection whose client's first
// chunk matches (nil: refuse none); connections whose first chunk does not
// match pass as usual. With PGCancel it drops PostgreSQL cancel requests,
// which pgx sends on a connection of their own when it gives up on a
// statement.
func (p *Proxy) RefuseIf(match func(first []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = match
}

// refused reports whether a connection's first chunk is to be refused.
func (p *Proxy) refused(first []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refuse != nil && p.refuse(first)
}

func (p *Proxy) arm(kind int, match func([]byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.traps = append(p.traps, trap{kind: kind, match: match})
}

// spring reports whether chunk springs an armed trap of kind, disarming it.
func (p *Proxy) spring(kind int, chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, t := range p.traps {
		if t.kind == kind && t.match(chunk) {
			p.traps = append(p.traps[:i], p.traps[i+1:]...)
			return true
		}
	}
	return false
}

// Frozen counts the connections frozen so far.
func (p *Proxy) Frozen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.conns {
		if c.isFrozen() {
			n++
		}
	}
	return n
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &pair{client: client, server: server, frozen: make(chan struct{}), dropReplies: make(chan struct{})}
		p.mu.Lock()
		select {
		case <-p.done:
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		default:
		}
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		go p.pipe(c, client, server, true)
		go p.pipe(c, server, client, false)
	}
}

// pipe copies src to dst until either ends, honouring freeze and drop. An
// end (EOF or error) closes both sides unless the pair is frozen.
func (p *Proxy) pipe(c *pair, src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 64<<10)
	for first := fromClient; ; first = false {
		n, err := src.Read(buf)
		if first && n > 0 && p.refused(buf[:n]) {
			c.client.Close()
			c.server.Close()
			return
		}
		if n > 0 {
			if c.isFrozen() {
				<-p.done // hold the bytes until the proxy closes
				return
			}
			chunk := buf[:n]
			if !fromClient && p.spring(trapFreezeAll, chunk) {
				p.Freeze()
				<-p.done
				return
			}
			if fromClient && p.spring(trapDrop, chunk) {
				c.dropOnce.Do(func() { close(c.dropReplies) })
			}
			if !fromClient && c.dropping() {
				continue
			}
			if fromClient && p.spring(trapFreezeConn, chunk) {
				// Frozen before this last chunk is written, so no answer
				// to it can slip through; the chunk itself still goes.
				c.freezeOnce.Do(func() { close(c.frozen) })
			}
			if _, werr := dst.Write(chunk); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if c.isFrozen() {
				// A frozen connection's end is not passed on: the other
				// side keeps a silent connection until Close.
				<-p.done
			}
			c.client.Close()
			c.server.Close()
			return
		}
	}
}

func (c *pair) isFrozen() bool {
	select {
	case <-c.frozen:
		return true
	default:
		return false
	}
}

func (c *pair) dropping() bool {
	select {
	case <-c.dropReplies:
		return true
	default:
		return false
	}
}

// PGCommit matches a chunk that starts with a PostgreSQL simple-protocol
// Query message ('Q') whose text says COMMIT (pgx sends "commit" for
// Tx.Commit, ackd's RecordIntent "COMMIT"): for DropReplyAfter.
func PGCommit(chunk []byte) bool {
	return len(chunk) > 5 && chunk[0] == 'Q' && bytes.Contains(bytes.ToLower(chunk[5:]), []byte("commit"))
}

// PGCancel matches a PostgreSQL CancelRequest packet (length 16, code
// 80877102), for RefuseIf.
func PGCancel(first []byte) bool {
	return len(first) == 16 && bytes.Equal(first[:8], []byte{0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e})
}
