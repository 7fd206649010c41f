package ws_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/faultproxy"
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
	call := &faultproxy.Call{N: n, Steps: 20}
	for attempt := 0; !call.Done(); attempt++ {
		if attempt > 100 {
			return fmt.Errorf("no result after %d attempts (progress %v)", attempt, call.Progress())
		}
		if attempt > 0 {
			*reconnects++
		}
		err := func() error {
			// Every read of an attempt is bounded: a cut always ends it, this only
			// guards the test against hanging.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := ws.Dial(ctx, url, &ws.DialOptions{Options: ws.Options{CloseTimeout: 100 * time.Millisecond}})
			if err != nil {
				return nil // cut during the handshake
			}
			defer c.Close()
			send := func(msg string) bool { return c.Write(ctx, []byte(msg)) == nil }
			if !send(faultproxy.InitializeAck) {
				return nil
			}
			if b, err := c.Read(ctx); err != nil || !strings.Contains(string(b), `"id":0`) {
				return nil // cut before the answer
			}
			if !send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`) || !send(call.Request(attempt)) {
				return nil
			}
			for {
				b, err := c.Read(ctx)
				if err != nil {
					return nil // cut
				}
				if done, err := call.Take(b); done || err != nil {
					return err
				}
			}
		}()
		if err != nil {
			return err
		}
	}
	return call.Check()
}
