package http_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a resume core with the demo tools behind the HTTP handler on a
// loopback listener. Everything is stopped and waited for at the end of the test.
type server struct {
	core *mcp.Server
	h    *httptransport.Handler
	srv  *httptest.Server
	url  string
}

func newServer(t testing.TB, opts *mcp.Options, hopts *httptransport.Options) *server {
	return newServerOf(t, demo.Server("test"), opts, hopts, nil)
}

// newServerOf is newServer serving tools' tools instead of the demo's, with its
// listener wrapped by wrap (nil: as it is).
func newServerOf(t testing.TB, tools *mcpgoserver.MCPServer, opts *mcp.Options, hopts *httptransport.Options, wrap func(net.Listener) net.Listener) *server {
	core, err := mcp.New(tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, hopts)
	srv := httptest.NewUnstartedServer(h)
	if wrap != nil {
		srv.Listener = wrap(srv.Listener)
	}
	srv.Start()
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		core.Close()
	})
	return &server{core: core, h: h, srv: srv, url: srv.URL + "/mcp"}
}

func (s *server) dial(t testing.TB) *httptransport.ClientConn {
	c := httptransport.Dial(s.url, &httptransport.ClientOptions{Client: s.srv.Client()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The shared end-to-end suite, unchanged: a dropped connection is a ClientConn
// closed without DELETE, and the client resumes from a new session.
func TestEndToEndHTTP(t *testing.T) {
	s := newServer(t, &mcp.Options{Tools: demo.Policies()}, nil)
	e2etest.Run(t, e2etest.Harness{
		Dial:      func(t testing.TB) transport.Conn { return s.dial(t) },
		Reconnect: true,
		Calls:     s.core.Calls,
		Stall: func(t testing.TB) (transport.Conn, func()) {
			p := faultproxy.New(t, s.srv.Listener.Addr().String(), faultproxy.NoCut, faultproxy.NoCut)
			c := httptransport.Dial("http://"+p.Addr()+"/mcp", nil)
			t.Cleanup(func() { _ = c.Close() })
			return c, func() { p.Stall() }
		},
	})
}

// A session with no open stream costs no goroutine: 40 clients initialize and go
// away without DELETE (as a client cut off does), and the goroutines come back to
// what they were, while the sessions live on until SessionIdle. A GET stream
// brings the session's notification pump, which goes with the stream.
func TestIdleSessionsCostNoGoroutine(t *testing.T) {
	s := newServer(t, nil, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	base := runtime.NumGoroutine()
	settled := func(what string) { // back to base, once the idle connections are gone
		tr.CloseIdleConnections()
		poll.Until(t, 5*time.Second, what, func() bool { return runtime.NumGoroutine() <= base+2 })
	}
	for range 40 {
		c := e2etest.NewClient(t, httptransport.Dial(s.url, &httptransport.ClientOptions{Client: hc}))
		c.Initialize(`{}`)
		c.Close()
	}
	if got := s.h.Sessions(); got != 40 {
		t.Fatalf("%d sessions, want 40", got)
	}
	settled("no goroutine per idle session")
	// A GET stream: the session's pump runs while it is open.
	c := httptransport.Dial(s.url, &httptransport.ClientOptions{Client: hc})
	ec := e2etest.NewClient(t, c)
	ec.Initialize(`{}`)
	if status, err := c.Get(""); status != http.StatusOK || err != nil {
		t.Fatalf("GET: %d %v", status, err)
	}
	ec.Close()
	settled("the pump to go with the GET stream")
}
