package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
)

// A tool the upstream adds while the gateway runs: the upstream says its list
// changed (on its GET stream), the gateway lists again, tells its own clients,
// and serves the new tool.
func TestListChangedFollowed(t *testing.T) {
	upSrv := server.NewMCPServer("up", "1", server.WithToolCapabilities(true))
	demo.Add(upSrv)
	up, err := mcp.New(upSrv, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, up)
	r := newRig(t, gateway.Options{URL: hs.URL})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"l0","method":"tools/list"}`)
	if m, _ := c.Response(`"l0"`); strings.Contains(string(m.Result), `"late"`) || !strings.Contains(string(m.Result), `"countdown"`) {
		t.Fatalf("tools/list before: %s", m.Raw)
	}

	upSrv.AddTool(mcpgo.NewTool("late", mcpgo.WithString("text")), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("late tool ran"), nil
	})
	c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/tools/list_changed" })
	i := 0
	poll.Until(t, 10*time.Second, "the new tool served", func() bool {
		i++
		id := fmt.Sprintf(`"l%d"`, i)
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/list"}`, id)
		m, _ := c.Response(id)
		return strings.Contains(string(m.Result), `"late"`)
	})
	c.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"late","arguments":{}}}`)
	if m, _ := c.Response(`"c"`); e2etest.Text(m) != "late tool ran" {
		t.Fatalf("the new tool: %s", m.Raw)
	}
}

// A client's cancel reaches the upstream: the upstream's handler of the call
// stops (its core counts no call), over a Streamable HTTP upstream.
func TestCancelGoesUpstream(t *testing.T) {
	up, err := mcp.New(demo.Server("up"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, up)
	r := newRig(t, gateway.Options{URL: hs.URL})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":"k","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":30,"steps":30},"_meta":{"progressToken":"pk"}}}`)
	c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/progress" })
	if n := up.Calls(); n != 1 {
		t.Fatalf("the upstream runs %d calls, want 1", n)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"k"}}`)
	poll.Until(t, 10*time.Second, "the upstream's call to stop", func() bool { return up.Calls() == 0 })
}

// The gateway's own upstream credentials (Options.Wrap, a round tripper that
// sets them on each request or handshake) reach an upstream that wants an API
// key, over Streamable HTTP and WebSocket; Header's Authorization gives way to
// them.
func TestUpstreamAuthorization(t *testing.T) {
	keys, err := transport.ParseKeys("gw:gateway-key-0123456789")
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := upstreamOursKeyed(t, nil, keys)
	var asked atomic.Int32
	wrap := func(base http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			asked.Add(1)
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer gateway-key-0123456789")
			return base.RoundTrip(r)
		})
	}
	for _, url := range []string{"http://" + addr + "/mcp", "ws://" + addr + "/ws"} {
		r := newRig(t, gateway.Options{URL: url, Wrap: wrap, Header: http.Header{"Authorization": {"Bearer wrong"}}})
		c := e2etest.NewClient(t, r.dialWS(t))
		c.Initialize(`{}`)
		c.Send(`{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"text":"through"}}}`)
		if m, _ := c.Response(`"e"`); e2etest.Text(m) != "through" {
			t.Fatalf("%s: %s", url, m.Raw)
		}
	}
	if asked.Load() < 2 {
		t.Fatalf("the credentials were asked %d times", asked.Load())
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The upstream's URL means what its scheme says in any case (RFC 3986 §3.1:
// WS:// is a WebSocket, HTTP:// Streamable HTTP), and an address that is no
// URL of an MCP transport is refused by New at once, naming it, rather than
// tried as a connection.
func TestUpstreamURL(t *testing.T) {
	addr, _ := upstreamOurs(t)
	for _, url := range []string{"HTTP://" + addr + "/mcp", "WS://" + addr + "/ws"} {
		g, err := gateway.New(t.Context(), &gateway.Options{URL: url, ConnectTimeout: 5 * time.Second})
		if err != nil {
			t.Errorf("%s: %v", url, err)
			continue
		}
		_ = g.Close()
	}
	for _, url := range []string{"ftp://" + addr + "/mcp", addr + "/mcp", "http://"} {
		g, err := gateway.New(t.Context(), &gateway.Options{URL: url, ConnectTimeout: 5 * time.Second})
		if err == nil {
			_ = g.Close()
		}
		var start *gateway.StartError
		if err == nil || errors.As(err, &start) || !strings.Contains(err.Error(), fmt.Sprintf("%q", url)) {
			t.Errorf("%s: %v; want an error naming the URL, before any connection", url, err)
		}
	}
}
