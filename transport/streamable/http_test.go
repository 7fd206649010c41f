package streamable_test

import (
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/internal/demo"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/streamable"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is a resume core with the demo tools behind the HTTP handler on a
// loopback listener. Everything is stopped and waited for at the end of the test.
type server struct {
	core *mcp.Server
	h    *streamable.Handler
	srv  *httptest.Server
	url  string
}

func newServer(t testing.TB, opts *mcp.Options, hopts *streamable.Options) *server {
	core := mcp.New(demo.Server("test"), opts)
	h := streamable.NewHandler(core, hopts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		core.Close()
	})
	return &server{core: core, h: h, srv: srv, url: srv.URL + "/mcp"}
}

func (s *server) dial(t testing.TB) *streamable.ClientConn {
	c := streamable.Dial(s.url, &streamable.ClientOptions{Client: s.srv.Client()})
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
	})
}
