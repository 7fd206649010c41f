package mcp_test

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts a core with the demo tools and returns a dialer of in-memory
// connections to it. Everything is stopped and waited for at the end of the test.
func serve(t testing.TB, opts *mcp.Options) (*mcp.Server, func(testing.TB) transport.Conn) {
	core, err := mcp.New(demo.Server("test"), opts)
	if err != nil {
		t.Fatal(err)
	}
	return core, serveCore(t, core)
}

// serveCore serves core on in-memory connections made by the returned dialer.
func serveCore(t testing.TB, core *mcp.Server) func(testing.TB) transport.Conn {
	dial := serveSessions(t, core)
	return func(t testing.TB) transport.Conn { return dial(t, nil) }
}

// serveSessions serves core on in-memory connections, each a session with the
// given options; core is closed, and its sessions waited for, when t ends.
func serveSessions(t testing.TB, core *mcp.Server) func(testing.TB, *mcp.SessionOptions) transport.Conn {
	var wg sync.WaitGroup
	t.Cleanup(func() {
		core.Close()
		wg.Wait()
	})
	return func(t testing.TB, opts *mcp.SessionOptions) transport.Conn {
		client, srv := transport.Pipe()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = core.ServeWith(context.Background(), srv, opts)
		}()
		t.Cleanup(func() { _ = client.Close() })
		return client
	}
}

func TestEndToEndPipe(t *testing.T) {
	core, dial := serve(t, &mcp.Options{Tools: demo.Policies()})
	e2etest.Run(t, e2etest.Harness{Dial: dial, Reconnect: true, Calls: core.Calls})
}
