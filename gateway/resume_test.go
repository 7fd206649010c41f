package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/internal/demo"
	"github.com/mcp-resume/mcp-resume/internal/faultproxy"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/transport/streamable"
)

// upstreamOurs serves the demo tools with resumable requests (SEP-975) over
// Streamable HTTP on loopback, with keepalives every 200 ms on its streams (so
// a client's default Silence window is 500 ms), and returns its address.
func upstreamOurs(t *testing.T) (addr string, core *mcp.Server) {
	t.Helper()
	core = mcp.New(demo.Server("up"), nil)
	h := streamable.NewHandler(core, &streamable.Options{KeepAlive: 200 * time.Millisecond})
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		hs.Close()
		core.Close()
	})
	return hs.Listener.Addr().String(), core
}

// A call through the gateway whose upstream connection goes silent (a stall:
// no FIN, no RST, nothing) after its first progress notification: the gateway
// takes the silence for a loss after its default Silence window (2.5 times the
// keepalive the upstream announces), takes the call up again, and the client
// gets every progress value once and the result, exactly once.
func TestUpstreamStallResumed(t *testing.T) {
	addr, up := upstreamOurs(t)
	p := faultproxy.NewStaller(t, addr)
	r := newRig(t, gateway.Options{URL: "http://" + p.Addr() + "/mcp", StreamIdle: 500 * time.Millisecond})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":3,"steps":6},"_meta":{"progressToken":"ps"}}}`)
	c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/progress" })
	if n := p.Stall(); n == 0 {
		t.Fatal("nothing to stall")
	}
	resp, before := c.Response(`"s"`)
	if e2etest.Text(resp) != "countdown done: 6 of 6 steps" {
		t.Fatalf("the call through a stalled upstream: %s", resp.Raw)
	}
	seen := []int{1}
	for _, m := range before {
		if m.Method == "notifications/progress" {
			seen = append(seen, e2etest.Progress(m))
		}
	}
	if fmt.Sprint(seen) != "[1 2 3 4 5 6]" {
		t.Fatalf("progress through the stall: %v, want 1 to 6 once each", seen)
	}
	if n := up.Calls(); n != 0 {
		t.Errorf("the upstream still runs %d calls", n)
	}
}

// The upstream's connection is cut (the network gone for a moment) during a
// call: the call is resumed on the next connection and completes exactly once.
func TestUpstreamCutResumed(t *testing.T) {
	addr, _ := upstreamOurs(t)
	p := faultproxy.New(t, addr, faultproxy.NoCut, faultproxy.NoCut)
	r := newRig(t, gateway.Options{URL: "http://" + p.Addr() + "/mcp", Client: &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{}).DialContext}}})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"k","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":2,"steps":4},"_meta":{"progressToken":"pk"}}}`)
	c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/progress" })
	p.Down()
	time.Sleep(300 * time.Millisecond)
	p.Up()
	resp, before := c.Response(`"k"`)
	if e2etest.Text(resp) != "countdown done: 4 of 4 steps" {
		t.Fatalf("the call through a cut: %s", resp.Raw)
	}
	seen := []int{1}
	for _, m := range before {
		if m.Method == "notifications/progress" {
			seen = append(seen, e2etest.Progress(m))
		}
	}
	if fmt.Sprint(seen) != "[1 2 3 4]" {
		t.Fatalf("progress through the cut: %v, want 1 to 4 once each", seen)
	}
}
