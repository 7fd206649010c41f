// Package faultproxy is a test helper: a TCP proxy on loopback that cuts every
// connection it forwards at a random point, for the fault tests of the transports
// (transport/streamable, transport/ws).
package faultproxy

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a target and cuts each one (both directions)
// after a random number of bytes from the server: mid-header, mid-message,
// between messages, wherever the budget runs out. The budgets come from a fixed
// seed, so a run's cuts are reproducible up to scheduling.
type Proxy struct {
	ln     net.Listener
	target string
	lo, hi int // byte budget range per connection

	mu   sync.Mutex // guards rng and open
	rng  *rand.Rand
	open map[net.Conn]struct{}

	cuts atomic.Int64
	wg   sync.WaitGroup
}

// New starts a proxy to target on a loopback port. Each connection may carry
// between lo and hi-1 bytes from the server before it is cut. The proxy is closed,
// with every connection it holds, when the test ends.
func New(t testing.TB, target string, lo, hi int) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, lo: lo, hi: hi, rng: rand.New(rand.NewPCG(1, 2)), open: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cuts returns how many connections were cut so far (connections that ended on
// their own are not counted).
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

func (p *Proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	budget := p.lo + p.rng.IntN(p.hi-p.lo)
	p.open[c], p.open[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	closeBoth := func() {
		c.Close()
		s.Close()
		p.mu.Lock()
		delete(p.open, c)
		delete(p.open, s)
		p.mu.Unlock()
	}
	defer closeBoth()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_, _ = io.Copy(s, c)
		closeBoth()
	}()
	n, _ := io.CopyN(c, s, int64(budget))
	if n == int64(budget) {
		p.cuts.Add(1)
	}
}

// Close stops accepting, cuts every open connection and waits for the proxy's
// goroutines. It is safe to call more than once.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
