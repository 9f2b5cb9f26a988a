package tcpproxy_test

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/ackd/ackd/internal/tcpproxy"
)

// echo starts a line echo server on 127.0.0.1.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					c.Write(line)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends line on c and reads one line back within d; ok is false
// when nothing came.
func roundTrip(t *testing.T, c net.Conn, line string, d time.Duration) (string, bool) {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(d))
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", false
	}
	return got[:len(got)-1], true
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestProxy(t *testing.T) {
	p := tcpproxy.New(t, echo(t))

	a := dial(t, p.Addr())
	if got, ok := roundTrip(t, a, "hello", 5*time.Second); !ok || got != "hello" {
		t.Fatalf("pass: got %q, %v", got, ok)
	}

	b := dial(t, p.Addr())
	if _, ok := roundTrip(t, b, "warm", 5*time.Second); !ok {
		t.Fatal("second connection does not pass")
	}
	p.DropReplyAfter(func(chunk []byte) bool { return bytes.Contains(chunk, []byte("COMMIT")) })
	if _, ok := roundTrip(t, b, "COMMIT", 200*time.Millisecond); ok {
		t.Fatal("the reply to the matching chunk came through")
	}
	if got, ok := roundTrip(t, a, "COMMIT again", 5*time.Second); !ok || got != "COMMIT again" {
		t.Fatalf("the trap is one-shot: another connection got %q, %v", got, ok)
	}

	if n := p.Freeze(); n != 2 {
		t.Fatalf("froze %d connections, want 2", n)
	}
	if _, ok := roundTrip(t, a, "frozen", 200*time.Millisecond); ok {
		t.Fatal("a frozen connection still passes")
	}
	c := dial(t, p.Addr())
	if got, ok := roundTrip(t, c, "new", 5*time.Second); !ok || got != "new" {
		t.Fatalf("a connection opened after the freeze: got %q, %v", got, ok)
	}

	p.FreezeWhenServerSends(func(chunk []byte) bool { return bytes.Contains(chunk, []byte("secret")) })
	if _, ok := roundTrip(t, c, "a secret", 200*time.Millisecond); ok {
		t.Fatal("the chunk that sprang the freeze came through")
	}
	if n := p.Frozen(); n != 3 {
		t.Fatalf("frozen = %d, want all 3", n)
	}

	d, e := dial(t, p.Addr()), dial(t, p.Addr())
	p.FreezeAfter(func(chunk []byte) bool { return bytes.Contains(chunk, []byte("last")) })
	if _, ok := roundTrip(t, d, "last words", 200*time.Millisecond); ok {
		t.Fatal("the answer to the chunk that froze its connection came through")
	}
	if got, ok := roundTrip(t, e, "still here", 5*time.Second); !ok || got != "still here" {
		t.Fatalf("FreezeAfter froze another connection: %q, %v", got, ok)
	}

	p.RefuseIf(func(first []byte) bool { return bytes.HasPrefix(first, []byte("cancel")) })
	if _, ok := roundTrip(t, dial(t, p.Addr()), "cancel it", time.Second); ok {
		t.Fatal("a refused connection was forwarded")
	}
	if got, ok := roundTrip(t, dial(t, p.Addr()), "hello again", 5*time.Second); !ok || got != "hello again" {
		t.Fatalf("a connection that does not match was refused: %q, %v", got, ok)
	}
}
