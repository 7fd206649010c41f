package client_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
)

// A flaky network: 200 concurrent countdowns through a proxy that cuts every
// connection 100-700 ms after it opened, whatever it carries, from clients that
// acknowledge only when they resume (they do not declare the ack extension) and
// name their calls with keys. Every call returns its result, with every progress
// value exactly once and in order: a message lost in a cut connection's buffers
// comes again from the server's replay window, and a call cut before its policy
// came is sent again with its key and attaches to the call already running.
func TestFlakyNetworkHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newNetServer(t, nil)
	p := faultproxy.NewTimed(t, s.addr(), 100*time.Millisecond, 700*time.Millisecond)
	flaky(t, p, httpDialer(t, "http://"+p.Addr()+"/mcp"))
}

func TestFlakyNetworkWebSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	s := newNetServer(t, nil)
	p := faultproxy.NewTimed(t, s.addr(), 100*time.Millisecond, 700*time.Millisecond)
	flaky(t, p, wsDialer("ws://"+p.Addr()+"/ws"))
}

func flaky(t *testing.T, p *faultproxy.Proxy, dial client.Dialer) {
	const (
		clients = 20
		perCli  = 10
		steps   = 20
		seconds = 2.0
	)
	start := time.Now()
	var wg sync.WaitGroup
	var results, resumes, resent atomic.Int64
	for i := range clients {
		wg.Go(func() {
			c := connectThroughCuts(t, dial, &client.Options{MinBackoff: time.Millisecond, MaxBackoff: 50 * time.Millisecond, NoAckExtension: true})
			if c == nil {
				return
			}
			defer func() { _ = c.Close() }()
			var cwg sync.WaitGroup
			for j := range perCli {
				cwg.Go(func() {
					var progress []int
					res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": seconds, "steps": steps}, &client.CallOptions{
						Progress: func(p client.Progress) { progress = append(progress, int(p.Progress)) },
						Resumed:  func() { resumes.Add(1) },
						Resent:   func() { resent.Add(1) },
					})
					if err != nil {
						t.Errorf("call %d/%d: %v (progress %v)", i, j, err, progress)
						return
					}
					results.Add(1)
					checkCountdown(t, fmt.Sprintf("call %d/%d", i, j), res, progress, steps)
				})
			}
			cwg.Wait()
		})
	}
	wg.Wait()
	t.Logf("%d calls: %d results, %d connections cut, %d resumes, %d calls sent again by key, %v",
		clients*perCli, results.Load(), p.Cuts(), resumes.Load(), resent.Load(), time.Since(start).Round(time.Millisecond))
	if results.Load() != clients*perCli {
		t.Errorf("%d results, want %d", results.Load(), clients*perCli)
	}
}
