// Package tcpproxy is a test helper: a TCP proxy on 127.0.0.1 between a
// client (ackd) and a server (PostgreSQL) that can misbehave the way a
// network does, on demand:
//
//   - Freeze: every connection open now stops forwarding in both
//     directions, without closing either side (a vanished host, a failed
//     middlebox). A client that gives up and closes its side is not passed
//     on either: the server sees a connection that went silent. Connections
//     opened later pass normally.
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

	mu    sync.Mutex
	conns []*pair
	drop  func([]byte) bool // armed DropReplyAfter predicate; nil when none
}

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
// The matching chunk itself is forwarded.
func (p *Proxy) DropReplyAfter(match func(chunk []byte) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = match
}

// takeDrop reports whether chunk springs the armed trap, disarming it.
func (p *Proxy) takeDrop(chunk []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drop == nil || !p.drop(chunk) {
		return false
	}
	p.drop = nil
	return true
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
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if c.isFrozen() {
				<-p.done // hold the bytes until the proxy closes
				return
			}
			chunk := buf[:n]
			if fromClient && p.takeDrop(chunk) {
				c.dropOnce.Do(func() { close(c.dropReplies) })
			}
			if !fromClient && c.dropping() {
				continue
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
