package client_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
)

// Chaos: 500 concurrent countdown calls (50 clients with 10 calls each) through a
// proxy that cuts every connection after a random number of bytes. Each call must
// be cut and resumed at least three times, return its result once, and deliver
// each of its progress notifications exactly once and in order.
func TestChaosHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newNetServer(t, chaosServer)
	p := faultproxy.New(t, s.addr(), 400, 1800) // each stream is a TCP connection of its own
	chaos(t, p, httpDialer(t, "http://"+p.Addr()+"/mcp"))
}

func TestChaosWebSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newNetServer(t, chaosServer)
	p := faultproxy.New(t, s.addr(), 400, 2000) // every call of a client shares one
	chaos(t, p, wsDialer("ws://"+p.Addr()+"/ws"))
}

// chaosServer keeps a result written to a connection for as long as one not
// written (Retention, 10 minutes), the test's own bound: a result written as
// the proxy cut its connection waits for the client's next resume, which on a
// loaded machine can come later than the default minute. What is tested here is
// exactly-once delivery through cuts; --delivered-retention has tests of its
// own.
var chaosServer = &mcp.Options{Engine: &resume.Options{DeliveredRetention: 10 * time.Minute}}

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
			c := connectThroughCuts(t, dial, &client.Options{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
			if c == nil {
				return
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
					checkCountdown(t, fmt.Sprintf("call %d/%d", i, j), res, progress, steps)
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

// connectThroughCuts connects a client through a proxy that may cut the first
// connection too, trying again; nil (the test failed) when it cannot.
func connectThroughCuts(t *testing.T, dial client.Dialer, opts *client.Options) *client.Client {
	for attempt := 0; ; attempt++ {
		c, err := client.Connect(t.Context(), dial, opts)
		if err == nil {
			return c
		}
		if attempt > 100 {
			t.Errorf("connect: %v", err)
			return nil
		}
	}
}

// checkCountdown checks a countdown call's result and that its progress came
// 1..steps, each once, in order.
func checkCountdown(t *testing.T, what string, res *mcpgo.CallToolResult, progress []int, steps int) {
	t.Helper()
	if got := text(t, res); got != fmt.Sprintf("countdown done: %d of %d steps", steps, steps) {
		t.Errorf("%s: result %q", what, got)
	}
	ok := len(progress) == steps
	for k, v := range progress {
		ok = ok && v == k+1
	}
	if !ok {
		t.Errorf("%s: progress %v, want 1..%d once each in order", what, progress, steps)
	}
}
