package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// stallServer is the demo tools on Streamable HTTP (keepalive every 100 ms)
// and WebSocket (pings every 100 ms from the client's side).
func stallServer(t *testing.T) string {
	core, err := mcp.New(demo.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, &httptransport.Options{KeepAlive: 100 * time.Millisecond})
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
	return srv.Listener.Addr().String()
}

// A connection that stops carrying bytes (no FIN, no RST) in the middle of a
// call: the client notices the silence (HTTP: 2.5 times the keepalive the
// server announced; WebSocket: its ping goes unanswered), drops the connection
// and resumes on a new one; every progress notification arrives once, and the
// result.
func TestStallResumes(t *testing.T) {
	addr := stallServer(t)
	p := faultproxy.New(t, addr, faultproxy.NoCut, faultproxy.NoCut)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for name, dial := range map[string]client.Dialer{
		"http": func(context.Context) (transport.Conn, error) {
			return httptransport.Dial("http://"+p.Addr()+"/mcp", &httptransport.ClientOptions{Client: &http.Client{Transport: tr}, FailOnStreamLoss: true}), nil
		},
		"ws": func(ctx context.Context) (transport.Conn, error) {
			return ws.Dial(ctx, "ws://"+p.Addr()+"/ws", &ws.DialOptions{Options: ws.Options{PingInterval: 100 * time.Millisecond, PingTimeout: 150 * time.Millisecond, CloseTimeout: 50 * time.Millisecond}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			var lost atomic.Pointer[error]
			c := connect(t, dial, &client.Options{
				MinBackoff:       time.Millisecond,
				OnConnectionLost: func(err error) { lost.Store(&err) },
			})
			const steps = 8
			var progress []int
			stalled := false
			res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 1.6, "steps": steps}, &client.CallOptions{
				Progress: func(pr client.Progress) {
					progress = append(progress, int(pr.Progress))
					if pr.Progress == 2 && !stalled {
						stalled = true
						if n := p.Stall(); n == 0 {
							t.Error("nothing to stall")
						}
					}
				},
			})
			if err != nil {
				t.Fatalf("call: %v (progress %v)", err, progress)
			}
			if len(res.Content) == 0 || len(progress) != steps {
				t.Fatalf("result %+v, progress %v", res, progress)
			}
			for i, v := range progress {
				if v != i+1 {
					t.Fatalf("progress %v, want 1..%d once each", progress, steps)
				}
			}
			if c.Reconnects() == 0 {
				t.Fatal("the call finished without a reconnect: the stall was not noticed")
			}
			var silent *httptransport.SilenceError
			if name == "http" && (lost.Load() == nil || !errors.As(*lost.Load(), &silent) || silent.Window != 250*time.Millisecond) {
				t.Fatalf("the connection ended with %v, want no data for 250ms (2.5 × the announced keepalive)", lost.Load())
			}
		})
	}
}
