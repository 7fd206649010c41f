package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
)

// burstServer has a tool that sends count progress notifications as fast as it
// can and ignores mcp-go's refusals, as most tools do, except for the last one,
// which it repeats until it is taken. refused counts the notifications lost to
// refusals.
func burstServer(refused *atomic.Int64) *server.MCPServer {
	s := demo.Server("test")
	s.AddTool(mcpgo.NewTool("burst", mcpgo.WithNumber("count")), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		n := req.GetInt("count", 0)
		srv := server.ServerFromContext(ctx)
		token := req.Params.Meta.ProgressToken
		for i := 1; i <= n; i++ {
			for {
				err := srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": token, "progress": i, "total": n})
				if err == nil {
					break
				}
				if !errors.Is(err, server.ErrNotificationChannelBlocked) {
					return nil, err
				}
				if i < n {
					refused.Add(1)
					break // lost
				}
			}
		}
		return mcpgo.NewToolResultText("done"), nil
	})
	return s
}

// A tool that notifies in a tight loop, faster than its notifications are written:
// mcp-go refuses none of them (the core holds the tool back until there is room,
// see callSession.UpgradeToSSEWhenReceiveNotification), and the client gets every
// one, in order, then the result.
func TestProgressBurst(t *testing.T) {
	var refused atomic.Int64
	core, err := mcp.New(burstServer(&refused), nil)
	if err != nil {
		t.Fatal(err)
	}
	dial := serveCore(t, core)
	for _, caps := range []string{`{}`, `{"resumableRequests":{}}`} {
		c := e2etest.NewClient(t, dial(t))
		c.Initialize(caps)
		const n = 3000
		refused.Store(0)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"burst","arguments":{"count":%d},"_meta":{"progressToken":"b"}}}`, n)
		resp, before := c.Response("1")
		if resp.Result == nil {
			t.Fatalf("%s: response %s", caps, resp.Raw)
		}
		last, got := 0, 0
		for _, m := range before {
			if m.Method != "notifications/progress" {
				continue
			}
			var p struct{ Progress int }
			if err := json.Unmarshal(m.Params, &p); err != nil {
				t.Fatal(err)
			}
			if p.Progress <= last {
				t.Fatalf("%s: progress %d after %d", caps, p.Progress, last)
			}
			last = p.Progress
			got++
		}
		if r := refused.Load(); r != 0 || got != n || last != n {
			t.Errorf("%s: %d of %d progress notifications arrived, the last %d; mcp-go refused %d", caps, got, n, last, r)
		}
		c.Close()
	}
}

// What a detached request's notification costs the server: its tool's
// progress is queued for the client's return, and nothing of the way there is
// made anew for each notification but the message itself and mcp-go's
// channel made for it, which holds one: its params are encoded into a scratch
// buffer, its drainer is a goroutine of the server's pool that finds it sent
// (no channel to wait on), and the request's index of it lives in the
// request's own array. The countdowns run in virtual time, a step a second.
func TestDetachedNotificationCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{DetachTools: true})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		const n, steps = 20, 100
		a := e2etest.NewClient(t, dial(t))
		a.Initialize(`{"resumableRequests":{}}`)
		for i := 1; i <= n; i++ {
			a.Send(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1000,"steps":1000},"_meta":{"progressToken":%d}}}`, i, i)
		}
		policies := 0
		a.Until(func(m e2etest.Msg) bool {
			if m.Method == "notifications/requests/resumePolicy" {
				policies++
			}
			return policies == n
		})
		a.Close() // the requests detach
		time.Sleep(20 * time.Second)
		synctest.Wait()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		time.Sleep(steps * time.Second)
		synctest.Wait()
		runtime.ReadMemStats(&after)
		per := float64(after.TotalAlloc-before.TotalAlloc) / (n * steps)
		t.Logf("%.0f bytes allocated a notification", per)
		// The countdown's own (its params' map, its message) is about 430 B,
		// the queued message 176 B and mcp-go's channel about 190 B. (The
		// race detector's runtime lets the pool drop scratch buffers.)
		bound := 950.0
		if race {
			bound = 1150
		}
		if per > bound {
			t.Errorf("%.0f bytes allocated a detached request's notification, want at most %.0f", per, bound)
		}
	})
}

// heldConn is a server's end of a connection, with a cleanup that tells when
// the server let it go.
type heldConn struct {
	transport.Conn
	_ [64]byte // its own allocation, not a tiny one shared with others
}

// A request that outlives its connection holds nothing of it: a client whose
// machine slept leaves one detached call on a connection of its own, so what
// a closed connection keeps (a WebSocket's buffers, 8 KB and more) would
// count per detached call.
func TestDetachedHoldsNoConnection(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), &mcp.Options{DetachTools: true})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()
	client, srv := transport.Pipe()
	held := &heldConn{Conn: srv}
	released := make(chan struct{})
	runtime.AddCleanup(held, func(ch chan struct{}) { close(ch) }, released)
	served := make(chan struct{})
	go func(conn transport.Conn) {
		defer close(served)
		_ = core.ServeWith(context.Background(), conn, nil)
	}(held)
	held = nil
	a := e2etest.NewClient(t, client)
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":600,"steps":600},"_meta":{"progressToken":1}}}`)
	a.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/requests/resumePolicy" })
	a.Close()
	<-served
	if n := core.Engine().Stats().Detached; n != 1 {
		t.Fatalf("%d detached requests, want the countdown's", n)
	}
	// A cleanup runs on a goroutine of its own once a collection found the
	// connection unreachable.
	poll.Until(t, 10*time.Second, "the detached request's connection to be collected", func() bool {
		runtime.GC()
		select {
		case <-released:
			return true
		default:
			return false
		}
	})
}
