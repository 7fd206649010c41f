package gateway_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// A call through the gateway whose client went holds no goroutine while its
// upstream runs it: none waits in the gateway's tool (mcp.Later) nor in the
// upstream client's call (client.Go), over a WebSocket upstream (one over
// Streamable HTTP keeps a reader of its POST's stream). A client that comes
// back resumes it, and gets its progress and its result.
func TestDetachedCallHoldsNoGoroutine(t *testing.T) {
	addr, _ := upstreamOurs(t)
	r := newRig(t, gateway.Options{URL: "ws://" + addr + "/ws"})
	const n = 20
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{"resumableRequests":{}}`)
	for i := 1; i <= n; i++ {
		c.Send(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%d,"steps":2},"_meta":{"progressToken":%d}}}`, i, 600+i, i)
	}
	c.Send(`{"jsonrpc":"2.0","id":"short","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":2,"steps":2},"_meta":{"progressToken":"s"}}}`)
	tokens := map[string]string{}
	c.Until(func(m e2etest.Msg) bool {
		if m.Method == "notifications/requests/resumePolicy" {
			p := e2etest.PolicyOf(t, m)
			tokens[string(p.RequestID)] = p.ResumeToken
		}
		return len(tokens) == n+1
	})
	c.Close()

	waiting := func() int {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		k := 0
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "gateway.(*Gateway).callTool") || strings.Contains(g, "client.(*Client).run(") {
				k++
			}
		}
		return k
	}
	poll.Until(t, 10*time.Second, "no goroutine waiting for the upstream", func() bool { return waiting() == 0 })
	if r.core.Calls() != n+1 {
		t.Fatalf("%d calls running, want %d", r.core.Calls(), n+1)
	}

	back := e2etest.NewClient(t, r.dialWS(t))
	back.Initialize(`{"resumableRequests":{}}`)
	back.Resume(`"short"`, tokens[`"short"`])
	resp, before := back.Response(`"short"`)
	if got := e2etest.Text(resp); got != "countdown done: 2 of 2 steps" {
		t.Fatalf("resumed through the gateway: %s", resp.Raw)
	}
	if got := progressOf(before); len(got) == 0 || got[len(got)-1] != 2 {
		t.Errorf("progress %v before the result, want it up to 2", got)
	}
}
