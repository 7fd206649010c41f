package mcp_test

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Past MaxConcurrentPerPrincipal requests in flight, a principal's next request is
// answered too_many_requests and not run, whichever of its sessions sends it;
// other principals and sessions without one are unaffected; once one of its
// requests has finished, it may start another.
func TestMaxConcurrentPerPrincipal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var refused atomic.Int32
		core, err := mcp.New(blockServer(make(chan error, 16)), &mcp.Options{MaxConcurrentPerPrincipal: 2,
			OnRefused: func(tool string, authenticated bool, reason spec.Reason) {
				if tool == "block" && authenticated && reason == spec.ReasonTooManyRequests {
					refused.Add(1)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		alice, alice2 := dial(&mcp.SessionOptions{Principal: "alice"}), dial(&mcp.SessionOptions{Principal: "alice"})
		startBlock(t, alice, "1")
		startBlock(t, alice2, "1")
		for _, c := range []*e2etest.Client{alice, alice2} {
			c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block"}}`)
			if m, _ := c.Response("2"); m.Error == nil || m.Error.Reason != spec.ReasonTooManyRequests || m.Error.Code != spec.CodeRateLimited || m.Error.RetryAfterMs != 1000 {
				t.Fatalf("alice's third request: %s, want too_many_requests", m.Raw)
			}
		}
		bob, anon := dial(&mcp.SessionOptions{Principal: "bob"}), dial(nil)
		startBlock(t, bob, "1") // bob has his own count
		startBlock(t, bob, "2")
		for i := range 5 { // no principal: not counted
			startBlock(t, anon, fmt.Sprint(i))
		}

		alice.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
		synctest.Wait() // the handler has returned
		startBlock(t, alice2, "3")
		alice.Send(`{"jsonrpc":"2.0","id":4,"method":"ping"}`) // a ping is a request too
		if m, _ := alice.Response("4"); m.Error == nil || m.Error.Reason != spec.ReasonTooManyRequests {
			t.Fatalf("alice's ping at the cap: %s, want too_many_requests", m.Raw)
		}
		if n := refused.Load(); n != 2 {
			t.Errorf("%d tools/call refusals told, want 2 (a refused ping is no tool's)", n)
		}
	})
}

// While the server is overloaded (Options.Overloaded), a new tools/call is
// answered overloaded (-32023, retryable) and not run, a name no tool has
// told as ""; the call running goes on, its getStatus and the other requests
// are served; once it is not, calls run again.
func TestOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var over atomic.Bool
		var told []string
		core, err := mcp.New(blockServer(make(chan error, 16)), &mcp.Options{
			Overloaded: over.Load,
			OnRefused: func(tool string, _ bool, reason spec.Reason) {
				told = append(told, tool+" "+string(reason))
			}})
		if err != nil {
			t.Fatal(err)
		}
		c := serveAs(t, core)(nil)
		tok := startBlock(t, c, "1")
		over.Store(true)
		for id, tool := range map[string]string{"2": "block", "3": "nosuchtool"} {
			c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q}}`, id, tool)
			m, _ := c.Response(id)
			if m.Error == nil || m.Error.Reason != spec.ReasonOverloaded || m.Error.Code != spec.CodeRateLimited || m.Error.RetryAfterMs != mcp.OverloadedRetry.Milliseconds() {
				t.Fatalf("a call of %s while overloaded: %s, want overloaded", tool, m.Raw)
			}
		}
		c.Send(`{"jsonrpc":"2.0","id":4,"method":"requests/getStatus","params":{"requestId":1,"resumeToken":%q}}`, tok)
		if m, _ := c.Response("4"); m.Error != nil || !strings.Contains(string(m.Raw), "processing") {
			t.Fatalf("getStatus of the running call while overloaded: %s", m.Raw)
		}
		c.Send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
		if m, _ := c.Response("5"); m.Error != nil {
			t.Fatalf("ping while overloaded: %s", m.Raw)
		}
		over.Store(false)
		startBlock(t, c, "6")
		slices.Sort(told)
		if want := []string{" overloaded", "block overloaded"}; !slices.Equal(told, want) {
			t.Errorf("refusals told %q, want %q", told, want)
		}
	})
}

// Past the engine's MaxLivePerPrincipal a principal's new calls run without a
// resume policy, like past MaxLive; other principals' calls still get one.
func TestMaxLivePerPrincipalCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(blockServer(make(chan error, 16)), &mcp.Options{Engine: &resume.Options{MaxLivePerPrincipal: 1}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		alice, bob := dial(&mcp.SessionOptions{Principal: "alice"}), dial(&mcp.SessionOptions{Principal: "bob"})
		startBlock(t, alice, "1")
		alice.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.1,"steps":1}}}`)
		resp, before := alice.Response("2")
		if resp.Error != nil || e2etest.Text(resp) != "countdown done: 1 of 1 steps" {
			t.Fatalf("alice's second call: %s", resp.Raw)
		}
		for _, m := range before {
			if m.Method == spec.MethodResumePolicy {
				t.Fatalf("alice's second call got a resume policy past the cap: %s", m.Raw)
			}
		}
		startBlock(t, bob, "1")
	})
}

// Past the engine's byte budget the oldest kept result goes first, and its
// client is told why: expired, detail evicted.
func TestByteBudgetEvictsOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Engine: &resume.Options{MaxBytes: 6 << 10}, QuickCall: -1})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		big := strings.Repeat("x", 4<<10)
		var toks []string
		for range 2 {
			c := e2etest.NewClient(t, dial(t))
			c.Initialize(`{"resumableRequests":{}}`)
			c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, big)
			toks = append(toks, e2etest.PolicyOf(t, c.Next()).ResumeToken)
			c.Close() // gone before the result: it is kept
			synctest.Wait()
		}
		c := e2etest.NewClient(t, dial(t))
		c.Initialize(`{"resumableRequests":{}}`)
		if _, err := c.GetStatus("2", "1", toks[0]); err == nil || err.Reason != spec.ReasonExpired || err.Detail != "evicted" {
			t.Fatalf("the oldest result past the byte budget: %+v, want expired, detail evicted", err)
		}
		if st, err := c.GetStatus("3", "1", toks[1]); err != nil || st.Status != string(spec.StatusCompleted) {
			t.Fatalf("the newest result: %+v %v", st, err)
		}
	})
}
