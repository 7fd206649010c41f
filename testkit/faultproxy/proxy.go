// Package faultproxy is a test helper: a TCP proxy on loopback that cuts the
// connections it forwards: each at a random point (the fault tests of the
// transports, transport/http and transport/ws), or all of them when the
// test says so (Down, Up: a network to NATS that goes away and comes back).
package faultproxy

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a target and cuts each one (both directions)
// after a random number of bytes from the server: mid-header, mid-message,
// between messages, wherever the budget runs out. The budgets come from a fixed
// seed, so a run's cuts are reproducible up to scheduling.
type Proxy struct {
	ln     net.Listener
	target string
	lo, hi int // byte budget range per connection
	// life, when not zero, cuts each connection after a random time in
	// [life[0], life[1]) instead of after a byte budget (NewTimed).
	life [2]time.Duration

	mu   sync.Mutex // guards rng and open
	rng  *rand.Rand
	open map[net.Conn]*pair // each end of a forwarded pair

	small     bool        // NewStaller: small socket buffers on both sides
	down      atomic.Bool // Down: every connection is closed as it comes
	cuts      atomic.Int64
	wg        sync.WaitGroup
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

// pair is a forwarded connection: its two ends' stall.
type pair struct {
	stall   chan struct{} // closed by Stall
	stalled bool          // guarded by Proxy.mu
}

// NoCut, as both budget bounds of New, makes a proxy that never cuts: for
// tests of Stall alone.
const NoCut = 1 << 40

// New starts a proxy to target on a loopback port. Each connection may carry
// between lo and hi-1 bytes from the server before it is cut. The proxy is closed,
// with every connection it holds, when the test ends.
func New(t testing.TB, target string, lo, hi int) *Proxy {
	t.Helper()
	return start(t, target, lo, hi, false, [2]time.Duration{})
}

func start(t testing.TB, target string, lo, hi int, small bool, life [2]time.Duration) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if hi <= lo {
		hi = lo + 1
	}
	p := &Proxy{ln: ln, target: target, lo: lo, hi: hi, rng: rand.New(rand.NewPCG(1, 2)), open: map[net.Conn]*pair{}, closed: make(chan struct{}), small: small, life: life}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// NewTimed starts a proxy that cuts each connection after a random time between
// lo and hi, whatever it carries: as a flaky network does, mid-message or
// between messages, on a quiet connection as on a busy one.
func NewTimed(t testing.TB, target string, lo, hi time.Duration) *Proxy {
	t.Helper()
	return start(t, target, NoCut, NoCut, false, [2]time.Duration{lo, max(hi, lo+1)})
}

// NewStaller starts a proxy that never cuts, for Stall, whose sockets have
// small buffers on the way from the server: a stalled connection's server finds
// its writes blocked after a few kilobytes, as on a path whose window closed,
// instead of after the megabytes loopback buffers hold.
func NewStaller(t testing.TB, target string) *Proxy {
	t.Helper()
	return start(t, target, NoCut, NoCut, true, [2]time.Duration{})
}

// smallBuffer is the socket buffer size of NewStaller's sockets.
const smallBuffer = 4 << 10

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
		if p.down.Load() {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

func (p *Proxy) forward(c net.Conn) {
	var d net.Dialer
	if p.small {
		// Small on the way to the client only: what a client sends (a large
		// request) is not slowed down.
		_ = c.(*net.TCPConn).SetWriteBuffer(smallBuffer)
		// Set before connecting: the window offered to the server is fixed then.
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, smallBuffer)
			})
		}
	}
	s, err := d.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	pr := &pair{stall: make(chan struct{})}
	stall := pr.stall
	p.mu.Lock()
	if p.down.Load() { // went down while this one was dialing
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	budget := p.lo + p.rng.IntN(p.hi-p.lo)
	var life time.Duration
	if p.life[1] > 0 {
		life = p.life[0] + time.Duration(p.rng.Int64N(int64(p.life[1]-p.life[0])))
	}
	p.open[c], p.open[s] = pr, pr
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
	if life > 0 {
		var once sync.Once
		cut := time.AfterFunc(life, func() {
			once.Do(func() { p.cuts.Add(1) })
			closeBoth()
		})
		defer cut.Stop()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pipe(s, c, -1, stall)
		closeBoth()
	}()
	if p.pipe(c, s, int64(budget), stall) == int64(budget) {
		p.cuts.Add(1)
	}
}

// pipe copies src to dst, up to limit bytes (negative: no limit), and returns
// how many it copied. Once the pair is stalled it copies nothing more and reads
// nothing more (the kernels' buffers fill, as on a dead path) until the proxy
// closes.
func (p *Proxy) pipe(dst, src net.Conn, limit int64, stall <-chan struct{}) int64 {
	buf := make([]byte, 32<<10)
	var n int64
	for limit < 0 || n < limit {
		chunk := buf
		if limit >= 0 && int64(len(chunk)) > limit-n {
			chunk = chunk[:limit-n]
		}
		m, err := src.Read(chunk)
		if m > 0 {
			select {
			case <-stall:
				<-p.closed
				return n
			default:
			}
			if _, werr := dst.Write(chunk[:m]); werr != nil {
				return n
			}
			n += int64(m)
		}
		if err != nil {
			return n
		}
	}
	return n
}

// Stall makes every connection open now stop carrying bytes, both ways, without
// closing (a laptop that slept, a NAT that forgot the flow); connections made
// after work. It returns how many connections it stalled.
func (p *Proxy) Stall() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pr := range p.open {
		if !pr.stalled {
			pr.stalled = true
			close(pr.stall)
			n++
		}
	}
	return n
}

// Down cuts every open connection and closes each new one as soon as it is
// accepted, until Up: the peer is unreachable, though it runs (a network gone).
// It returns how many connections it cut. With New(t, target, NoCut, NoCut) the
// proxy cuts nothing else: the test decides when the network fails.
func (p *Proxy) Down() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down.Store(true)
	n := 0
	for c := range p.open {
		c.Close()
		n++
	}
	clear(p.open)
	p.cuts.Add(int64(n / 2))
	return n / 2
}

// Up lets connections through again after Down.
func (p *Proxy) Up() { p.down.Store(false) }

// Close stops accepting, cuts every open connection and waits for the proxy's
// goroutines. It is safe to call more than once.
func (p *Proxy) Close() {
	p.ln.Close()
	p.closeOnce.Do(func() { close(p.closed) })
	p.mu.Lock()
	for c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
