package testenv

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// HungServer takes connections and never says a word, holding them open
// until the test ends: a host that hangs, where a refused connection or a
// server's own handshake timeout would end the wait.
type HungServer struct {
	ln       net.Listener
	accepted atomic.Int32

	mu    sync.Mutex
	conns []net.Conn
}

// NewHungServer listens on a free port of 127.0.0.1 until the test ends.
func NewHungServer(t testing.TB) *HungServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hung server: %v", err)
	}
	h := &HungServer{ln: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.accepted.Add(1)
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			c.Close()
		}
	})
	return h
}

// Addr is the host:port it listens on.
func (h *HungServer) Addr() string { return h.ln.Addr().String() }

// Accepted is how many connections it took.
func (h *HungServer) Accepted() int { return int(h.accepted.Load()) }
