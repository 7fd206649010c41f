package client_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/faultproxy"
	"github.com/mcp-resume/mcp-resume/mcp/client"
)

// Chaos: 500 concurrent countdown calls (50 clients with 10 calls each) through a
// proxy that cuts every connection after a random number of bytes. Each call must
// be cut and resumed at least three times, return its result once, and deliver
// each of its progress notifications exactly once and in order.
func TestChaosHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newNetServer(t, nil)
	p := faultproxy.New(t, s.addr(), 400, 1800) // each stream is a TCP connection of its own
	chaos(t, p, httpDialer(t, "http://"+p.Addr()+"/mcp"))
}

func TestChaosWebSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newNetServer(t, nil)
	p := faultproxy.New(t, s.addr(), 400, 2000) // every call of a client shares one
	chaos(t, p, wsDialer("ws://"+p.Addr()+"/ws"))
}

func chaos(t *testing.T, p *faultproxy.Proxy, dial client.Dialer) {
	const (
		clients  = 50
		perCli   = 10
		steps    = 25
		minCuts  = 3
		duration = 1.0 // seconds each call runs on the server
	)
	start := time.Now()
	var (
		wg         sync.WaitGroup
		results    atomic.Int64
		resumes    atomic.Int64
		reconnects atomic.Int64
		fewest     atomic.Int64 // resumes of the call resumed least
	)
	fewest.Store(1 << 30)
	for i := range clients {
		wg.Go(func() {
			var c *client.Client
			for attempt := 0; c == nil; attempt++ { // the first connection may be cut too
				var err error
				c, err = client.Connect(t.Context(), dial, &client.Options{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
				if err != nil && attempt > 50 {
					t.Errorf("client %d: connect: %v", i, err)
					return
				}
			}
			defer func() { reconnects.Add(c.Reconnects()); _ = c.Close() }()
			var cwg sync.WaitGroup
			for j := range perCli {
				cwg.Go(func() {
					var progress []int
					resumed := 0
					res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": duration, "steps": steps}, &client.CallOptions{
						Progress: func(p client.Progress) { progress = append(progress, int(p.Progress)) },
						Resumed:  func() { resumed++ },
						// A call cut before its policy is sent again.
						Idempotent: true,
					})
					if err != nil {
						t.Errorf("call %d/%d: %v (progress %v)", i, j, err, progress)
						return
					}
					results.Add(1)
					resumes.Add(int64(resumed))
					for f := fewest.Load(); int64(resumed) < f && !fewest.CompareAndSwap(f, int64(resumed)); f = fewest.Load() {
					}
					if got := text(t, res); got != fmt.Sprintf("countdown done: %d of %d steps", steps, steps) {
						t.Errorf("call %d/%d: result %q", i, j, got)
					}
					for k, v := range progress {
						if v != k+1 {
							t.Errorf("call %d/%d: progress %v, want 1..%d once each in order", i, j, progress, steps)
							return
						}
					}
					if len(progress) != steps {
						t.Errorf("call %d/%d: progress %v, want 1..%d", i, j, progress, steps)
					}
					if resumed < minCuts {
						t.Errorf("call %d/%d: resumed %d times, want at least %d", i, j, resumed, minCuts)
					}
				})
			}
			cwg.Wait()
		})
	}
	wg.Wait()
	t.Logf("%d calls, %d results, %d connections cut by the proxy, %d reconnects, %d resumes (at least %d per call), %v",
		clients*perCli, results.Load(), p.Cuts(), reconnects.Load(), resumes.Load(), fewest.Load(), time.Since(start).Round(time.Millisecond))
	if results.Load() != clients*perCli {
		t.Errorf("%d results, want %d", results.Load(), clients*perCli)
	}
}
