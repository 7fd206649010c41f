package ws_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// Fault test: 200 concurrent long calls through a proxy that cuts every WebSocket
// connection at a random point (mid-handshake, mid-frame, between frames),
// several times per call. Each client resumes on a new connection with the ack
// extension until it has its result: every progress notification and every
// result arrives exactly once, in order.
func TestFaultProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newServer(t, nil, nil)
	p := faultproxy.New(t, s.srv.Listener.Addr().String(), 300, 1500)
	url := "ws://" + p.Addr() + "/ws"

	const calls = 200
	reconnects := make([]int, calls) // per call: each goroutine writes its own
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			if err := faultCall(url, i, &reconnects[i]); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	faultproxy.CheckReconnects(t, p, reconnects)
}

// faultCall makes one countdown call and drives it to its result through any
// number of cuts, each attempt on a new connection.
func faultCall(url string, n int, reconnects *int) error {
	dial := func(ctx context.Context) (transport.Conn, error) {
		return ws.Dial(ctx, url, &ws.DialOptions{Options: ws.Options{CloseTimeout: 100 * time.Millisecond}})
	}
	return faultproxy.Drive(dial, &faultproxy.Call{N: n, Steps: 20}, reconnects, 100)
}
