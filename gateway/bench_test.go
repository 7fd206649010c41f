package gateway_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/testkit/everything"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// BenchmarkEcho: server-everything's echo tool called by one Go client
// (mcp/client), one call at a time: directly over the server's stdio
// ("direct") and its own Streamable HTTP transport ("direct-http"), and through
// the gateway (the server its stdio child) over Streamable HTTP and WebSocket on
// loopback.
//
//	go test -run XXX -bench BenchmarkEcho -benchtime 2000x ./gateway/
func BenchmarkEcho(b *testing.B) {
	path := everything.Path(b)
	b.Run("direct", func(b *testing.B) {
		benchEcho(b, func(context.Context) (transport.Conn, error) {
			return stdio.Command(exec.Command("node", path, "stdio"), nil)
		})
	})
	url := everything.StartHTTP(b)
	b.Run("direct-http", func(b *testing.B) {
		benchEcho(b, func(context.Context) (transport.Conn, error) {
			return httptransport.Dial(url, nil), nil
		})
	})
	r := newRig(b, stdioUpstream(b, ""))
	b.Run("gateway-http", func(b *testing.B) {
		benchEcho(b, func(context.Context) (transport.Conn, error) {
			return httptransport.Dial(r.srv.URL+"/mcp", nil), nil
		})
	})
	b.Run("gateway-ws", func(b *testing.B) {
		benchEcho(b, func(ctx context.Context) (transport.Conn, error) {
			return ws.Dial(ctx, "ws"+r.srv.URL[len("http"):]+"/ws", nil)
		})
	})
}

func benchEcho(b *testing.B, dial client.Dialer) {
	ctx := context.Background()
	c, err := client.Connect(ctx, dial, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := map[string]any{"message": "hello"}
	for range 20 { // warm up: the JIT on the server's side
		if _, err := c.CallTool(ctx, "echo", args, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := c.CallTool(ctx, "echo", args, nil)
		if err != nil || res.IsError {
			b.Fatalf("echo: %v %+v", err, res)
		}
	}
}
