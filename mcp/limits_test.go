package mcp_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// Past MaxConcurrentPerPrincipal requests in flight, a principal's next request is
// answered too_many_requests and not run, whichever of its sessions sends it;
// other principals and sessions without one are unaffected; once one of its
// requests has finished, it may start another.
func TestMaxConcurrentPerPrincipal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := mcp.New(blockServer(make(chan error, 16)), &mcp.Options{MaxConcurrentPerPrincipal: 2})
		dial := serveAs(t, core)
		alice, alice2 := dial(&mcp.SessionOptions{Principal: "alice"}), dial(&mcp.SessionOptions{Principal: "alice"})
		startBlock(t, alice, "1")
		startBlock(t, alice2, "1")
		for _, c := range []*e2etest.Client{alice, alice2} {
			c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block"}}`)
			if m, _ := c.Response("2"); m.Error == nil || m.Error.Reason != spec.ReasonTooManyRequests || m.Error.Code != spec.CodeInvalidRequest {
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
	})
}

// Past the engine's MaxLivePerPrincipal a principal's new calls run without a
// resume policy, like past MaxLive; other principals' calls still get one.
func TestMaxLivePerPrincipalCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core := mcp.New(blockServer(make(chan error, 16)), &mcp.Options{Engine: &resume.Options{MaxLivePerPrincipal: 1}})
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
