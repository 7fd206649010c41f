package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// memNet is the demo tools behind the Streamable HTTP (/mcp) and WebSocket
// (/ws) handlers, with every handler option at its default, served over
// in-memory connections: a test runs it in a synctest bubble, where the
// keepalives, pings and silence windows run on the virtual clock. Every
// connection the clients made can be made silent at once (stall), as a
// laptop's sleep makes them: nothing arrives, what is written goes nowhere,
// nothing is closed.
type memNet struct {
	srv   *http.Server
	ln    *memListener
	hc    *http.Client
	dials atomic.Int32

	mu    sync.Mutex // guards conns
	conns []*silentConn
}

func newMemNet(t *testing.T, opts *mcp.Options) *memNet {
	return newMemNetOf(t, demo.Server("test"), opts)
}

// newMemNetOf is newMemNet serving tools' tools instead of the demo's.
func newMemNetOf(t *testing.T, tools *server.MCPServer, opts *mcp.Options) *memNet {
	core, err := mcp.New(tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	wh := ws.NewHandler(core, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ws", wh)
	return newMemNetHandler(t, mux, func() {
		h.Close()
		wh.Close()
	}, core.Close)
}

// newMemNetHandler serves handler over in-memory connections; before and
// after run as the server closes, before it and after its connections.
func newMemNetHandler(t *testing.T, handler http.Handler, before, after func()) *memNet {
	n := &memNet{srv: &http.Server{Handler: handler}, ln: &memListener{conns: make(chan net.Conn), done: make(chan struct{})}}
	tr := &http.Transport{DialContext: n.dial}
	n.hc = &http.Client{Transport: tr}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = n.srv.Serve(n.ln)
	}()
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		before()
		_ = n.srv.Close()
		<-served
		n.closeAll()
		after()
	})
	return n
}

// dial connects to the server; the connection is one stall silences.
func (n *memNet) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case n.ln.conns <- s:
	case <-n.ln.done:
		return nil, errors.New("memnet: closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	sc := &silentConn{Conn: c, quiet: make(chan struct{})}
	n.mu.Lock()
	n.conns = append(n.conns, sc)
	n.mu.Unlock()
	n.dials.Add(1)
	return sc, nil
}

// stall silences every connection made so far; it returns how many.
func (n *memNet) stall() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		c.stall()
	}
	k := len(n.conns)
	n.conns = nil
	return k
}

// cut closes every connection made so far (the network gone for a moment);
// it returns how many.
func (n *memNet) cut() int {
	n.mu.Lock()
	cs := n.conns
	n.conns = nil
	n.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
	return len(cs)
}

func (n *memNet) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, c := range n.conns {
		_ = c.Close()
	}
}

// httpDial is the Go client's Dialer of Streamable HTTP over n, as `mcp-resume
// call` dials it (FailOnStreamLoss, the transport's defaults otherwise).
func (n *memNet) httpDial(context.Context) (transport.Conn, error) {
	return httptransport.Dial("http://127.0.0.1/mcp", &httptransport.ClientOptions{Client: n.hc, FailOnStreamLoss: true}), nil
}

// wsDial is the Go client's Dialer of WebSocket over n, with ws.Dial's
// defaults.
func (n *memNet) wsDial(ctx context.Context) (transport.Conn, error) {
	return ws.Dial(ctx, "ws://127.0.0.1/ws", &ws.DialOptions{NetDial: n.dial})
}

// memListener hands the server the other ends of the pipes dial makes.
type memListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// silentConn is a client's end of a connection that stall makes silent: from
// then on what comes is read and dropped (the server's writes go nowhere, as
// into a network that lost them), Read returns nothing until Close, and what
// the client writes is dropped too.
type silentConn struct {
	net.Conn
	once  sync.Once
	quiet chan struct{}
}

func (c *silentConn) stall() { c.once.Do(func() { close(c.quiet) }) }

func (c *silentConn) silent() bool {
	select {
	case <-c.quiet:
		return true
	default:
		return false
	}
}

func (c *silentConn) Read(p []byte) (int, error) {
	if c.silent() {
		return c.drain()
	}
	n, err := c.Conn.Read(p)
	if c.silent() && err == nil {
		return c.drain()
	}
	return n, err
}

// drain reads and drops what comes until the connection ends.
func (c *silentConn) drain() (int, error) {
	buf := make([]byte, 4096)
	for {
		if _, err := c.Conn.Read(buf); err != nil {
			return 0, err
		}
	}
}

func (c *silentConn) Write(p []byte) (int, error) {
	if c.silent() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}
