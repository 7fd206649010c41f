package ws_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// benchTransports are the three transports of one core, each as a client Conn on a
// fresh server: WebSocket and Streamable HTTP over loopback TCP, stdio over two OS
// pipes in the same process (the framing and the pipe syscalls, not a process
// boundary).
var benchTransports = []struct {
	name string
	dial func(b *testing.B, core *mcp.Server) transport.Conn
}{
	{"ws", func(b *testing.B, core *mcp.Server) transport.Conn {
		h := ws.NewHandler(core, nil)
		srv := httptest.NewServer(h)
		c, err := ws.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = c.Close()
			h.Close()
			srv.Close()
		})
		return c
	}},
	{"http", func(b *testing.B, core *mcp.Server) transport.Conn {
		h := httptransport.NewHandler(core, nil)
		srv := httptest.NewServer(h)
		c := httptransport.Dial(srv.URL, &httptransport.ClientOptions{Client: srv.Client()})
		b.Cleanup(func() {
			_ = c.Close()
			h.Close()
			srv.Close()
		})
		return c
	}},
	{"stdio", func(b *testing.B, core *mcp.Server) transport.Conn {
		serverIn, clientOut, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		clientIn, serverOut, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = core.Serve(context.Background(), stdio.New(serverIn, serverOut, nil)) })
		c := stdio.New(clientIn, clientOut, nil)
		b.Cleanup(func() {
			_ = c.Close() // the server reads EOF and Serve returns
			wg.Wait()
		})
		return c
	}},
}

// benchClient is a lean raw client: it recognizes a response by the prefix the
// core encodes it with, and counts progress notifications, without decoding.
type benchClient struct {
	b    *testing.B
	conn transport.Conn
}

func newBenchClient(b *testing.B, dial func(*testing.B, *mcp.Server) transport.Conn) *benchClient {
	return newBenchClientWith(b, dial, nil)
}

func newBenchClientWith(b *testing.B, dial func(*testing.B, *mcp.Server) transport.Conn, opts *mcp.Options) *benchClient {
	core, err := mcp.New(demo.Server("bench"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(core.Close) // after the transport's cleanup: registered first
	c := &benchClient{b: b, conn: dial(b, core)}
	c.call(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"bench","version":"1"}}}`, 0)
	if err := c.conn.Write(context.Background(), []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil {
		b.Fatal(err)
	}
	return c
}

var progressMethod = []byte(`"method":"notifications/progress"`)

// call sends msg and reads up to the response to id; it returns how many progress
// notifications came before it.
func (c *benchClient) call(msg string, id int) (progress int) {
	ctx := context.Background()
	if err := c.conn.Write(ctx, []byte(msg)); err != nil {
		c.b.Fatal(err)
	}
	want := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,`, id)
	for {
		m, err := c.conn.Read(ctx)
		if err != nil {
			c.b.Fatal(err)
		}
		if bytes.HasPrefix(m, want) {
			if bytes.Contains(m, []byte(`"error":`)) {
				c.b.Fatalf("error response: %s", m)
			}
			return progress
		}
		if bytes.Contains(m, progressMethod) {
			progress++
		}
	}
}

// BenchmarkToolsCall measures a tools/call round trip (echo) of a client of
// resumable requests over each transport: answered plainly within the quick
// window (quick=on, the default), or made resumable from its start (quick=off:
// a request of the engine, its policy, then its response).
func BenchmarkToolsCall(b *testing.B) {
	for _, tr := range benchTransports {
		for _, q := range []struct {
			name string
			opts *mcp.Options
		}{{"on", nil}, {"off", &mcp.Options{QuickCall: -1}}} {
			b.Run("transport="+tr.name+"/quick="+q.name, func(b *testing.B) {
				c := newBenchClientWith(b, tr.dial, q.opts)
				b.ReportAllocs()
				for i := 1; b.Loop(); i++ {
					c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, i), i)
				}
			})
		}
	}
}

// BenchmarkProgress measures progress-notification throughput: each op is one
// countdown call that sends 200 progress notifications as fast as it can, read by
// the client as they come. notes/s counts the notifications received; lost/op
// those that did not arrive. (A burst is kept under the 256 notifications a call's
// channel into the core holds: mcp-go's SendNotificationToClient drops, without
// blocking, what does not fit, before any transport is involved.)
func BenchmarkProgress(b *testing.B) {
	const steps = 200
	for _, tr := range benchTransports {
		b.Run("transport="+tr.name, func(b *testing.B) {
			c := newBenchClient(b, tr.dial)
			b.ReportAllocs()
			got := 0
			for i := 1; b.Loop(); i++ {
				got += c.call(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":%d},"_meta":{"progressToken":%d}}}`, i, steps, i), i)
			}
			b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "notes/s")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(max(got, 1)), "ns/note")
			b.ReportMetric(float64(steps*b.N-got)/float64(b.N), "lost/op")
		})
	}
}
