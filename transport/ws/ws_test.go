package ws_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/conntest"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a resume core with the demo tools behind the WebSocket handler on a
// loopback listener. Everything is stopped and waited for at the end of the test.
type server struct {
	core *mcp.Server
	h    *ws.Handler
	srv  *httptest.Server
	url  string // ws://127.0.0.1:port/ws
}

func newServer(t testing.TB, opts *mcp.Options, wopts *ws.AcceptOptions) *server {
	core, err := mcp.New(demo.Server("test"), opts)
	if err != nil {
		t.Fatal(err)
	}
	h := ws.NewHandler(core, wopts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		core.Close()
	})
	return &server{core: core, h: h, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}
}

func (s *server) dial(t testing.TB) transport.Conn {
	t.Helper()
	c, err := ws.Dial(t.Context(), s.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The transport.Conn contract, over a real WebSocket connection on loopback: the
// client end from Dial, the server end from Accept. Several cases close an end
// whose peer does not read: a short CloseTimeout keeps them quick.
func TestConnContract(t *testing.T) {
	o := ws.Options{CloseTimeout: 100 * time.Millisecond}
	conntest.Run(t, func(t *testing.T) (transport.Conn, transport.Conn) {
		accepted := make(chan transport.Conn, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := ws.Accept(w, r, &ws.AcceptOptions{Options: o})
			if err != nil {
				t.Errorf("Accept: %v", err)
				return
			}
			accepted <- c
		}))
		t.Cleanup(srv.Close)
		client, err := ws.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), &ws.DialOptions{Options: o})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case server := <-accepted:
			return client, server
		case <-time.After(10 * time.Second):
			t.Fatal("no connection accepted")
			return nil, nil
		}
	})
}

// The shared end-to-end suite, unchanged: a dropped connection is a closed
// WebSocket, and the client resumes on a new one.
func TestEndToEndWS(t *testing.T) {
	s := newServer(t, &mcp.Options{Tools: demo.Policies()}, nil)
	e2etest.Run(t, e2etest.Harness{Dial: s.dial, Reconnect: true, Calls: s.core.Calls, Stall: s.stallable})
}

// stallable dials through a proxy of its own, and returns the proxy's Stall.
func (s *server) stallable(t testing.TB) (transport.Conn, func()) {
	p := faultproxy.New(t, s.srv.Listener.Addr().String(), faultproxy.NoCut, faultproxy.NoCut)
	c, err := ws.Dial(t.Context(), "ws://"+p.Addr()+"/ws", &ws.DialOptions{Options: ws.Options{CloseTimeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, func() { p.Stall() }
}
