package testenv

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FreezeProxy forwards TCP connections to a server until it is frozen;
// from then on it swallows every byte in both directions, like a network
// partition or a paused server, while the connections stay open. A side
// that closes (its process exits) still closes its peer. It closes with
// the test.
type FreezeProxy struct {
	ln     net.Listener
	target string
	frozen atomic.Bool
	// accepted counts the connections it forwarded.
	accepted atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewFreezeProxy listens on a free port of 127.0.0.1 and forwards to
// target (host:port).
func NewFreezeProxy(t testing.TB, target string) *FreezeProxy {
	t.Helper()
	return NewFreezeProxyOn(t, "127.0.0.1:0", target)
}

// NewFreezeProxyOn is NewFreezeProxy listening on addr: a server that
// comes up where a client was told to find it.
func NewFreezeProxyOn(t testing.TB, addr, target string) *FreezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p := &FreezeProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address.
func (p *FreezeProxy) Addr() string { return p.ln.Addr().String() }

// Down closes the proxy and every connection through it: from then on a
// connection to Addr is refused, like one to a server that went down.
func (p *FreezeProxy) Down() { p.close() }

// Accepted is the number of connections it forwarded: what a client
// opened.
func (p *FreezeProxy) Accepted() int { return int(p.accepted.Load()) }

// Freeze stops forwarding, for good.
func (p *FreezeProxy) Freeze() { p.frozen.Store(true) }

func (p *FreezeProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.accepted.Add(1)
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

func (p *FreezeProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst until either fails, dropping what it reads while
// frozen, then closes both.
func (p *FreezeProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *FreezeProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
