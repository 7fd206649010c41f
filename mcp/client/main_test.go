package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pipeServer serves a core with the demo tools on in-memory pipes. Its dialer
// remembers the latest connection so that a test can cut it.
type pipeServer struct {
	core *mcp.Server
	wg   sync.WaitGroup

	mu    sync.Mutex // guards conns, dials
	conns []transport.Conn
	dials int
}

func newPipeServer(t testing.TB, opts *mcp.Options) *pipeServer {
	return newPipeServerOf(t, demo.Server("test"), opts)
}

// newPipeServerOf is newPipeServer serving tools' tools instead of the demo's.
func newPipeServerOf(t testing.TB, tools *server.MCPServer, opts *mcp.Options) *pipeServer {
	core, err := mcp.New(tools, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &pipeServer{core: core}
	t.Cleanup(func() {
		s.cutAll()
		s.core.Close()
		s.wg.Wait()
	})
	return s
}

func (s *pipeServer) dial(context.Context) (transport.Conn, error) {
	c, srv := transport.Pipe()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.core.Serve(context.Background(), srv)
	}()
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.dials++
	s.mu.Unlock()
	return c, nil
}

// cutAll drops every connection made so far.
func (s *pipeServer) cutAll() {
	s.mu.Lock()
	cs := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
	}
}

// netServer is a core with the demo tools behind the Streamable HTTP handler
// (/mcp) and the WebSocket handler (/ws) on one loopback listener.
type netServer struct {
	core *mcp.Server
	h    *httptransport.Handler
	srv  *httptest.Server
}

func newNetServer(t testing.TB, opts *mcp.Options) *netServer {
	core, err := mcp.New(demo.Server("test"), opts)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	wh := ws.NewHandler(core, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ws", wh)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		h.Close()
		wh.Close()
		srv.Close()
		core.Close()
	})
	return &netServer{core: core, h: h, srv: srv}
}

func (s *netServer) addr() string { return strings.TrimPrefix(s.srv.URL, "http://") }

// httpDialer dials Streamable HTTP at url with its own HTTP transport, closed at
// the end of the test.
func httpDialer(t testing.TB, url string) client.Dialer {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	return func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(url, &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true}), nil
	}
}

func wsDialer(url string) client.Dialer {
	return func(ctx context.Context) (transport.Conn, error) {
		return ws.Dial(ctx, url, nil)
	}
}

func connect(t testing.TB, dial client.Dialer, opts *client.Options) *client.Client {
	t.Helper()
	c, err := client.Connect(t.Context(), dial, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
