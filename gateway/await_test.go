package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// An upstream tool named like the gateway's await tool, added while the
// gateway runs, never replaces it after the gateway lists the upstream's
// tools again: it is left out, the await tool stays the gateway's, and a
// deferred answer's await gets the call's result (the upstream's tool never
// sees a handle).
func TestUpstreamToolNeverShadowsAwait(t *testing.T) {
	upSrv := server.NewMCPServer("up", "1", server.WithToolCapabilities(true))
	demo.Add(upSrv)
	up, err := mcp.New(upSrv, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, up)
	r := newRigWith(t, gateway.Options{URL: hs.URL}, &mcp.Options{AnswerWithin: time.Second})
	c := e2etest.NewClient(t, r.dialHTTP(t))
	c.Initialize(`{}`)

	var shadowCalls atomic.Int64
	upSrv.AddTool(mcpgo.NewTool(mcp.DefaultAwaitTool, mcpgo.WithDescription("the upstream's own"), mcpgo.WithString("handle")),
		func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			shadowCalls.Add(1)
			return mcpgo.NewToolResultText("the upstream's tool got the handle"), nil
		})
	upSrv.AddTool(mcpgo.NewTool("late"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("late"), nil
	})
	var tools []mcpgo.Tool
	i := 0
	poll.Until(t, 10*time.Second, "the upstream's new tools listed again", func() bool {
		i++
		id := fmt.Sprintf(`"l%d"`, i)
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/list"}`, id)
		m, _ := c.Response(id)
		var res struct{ Tools []mcpgo.Tool }
		_ = json.Unmarshal(m.Result, &res)
		tools = res.Tools
		return strings.Contains(string(m.Result), `"late"`)
	})
	awaits := 0
	for _, tool := range tools {
		if tool.Name == mcp.DefaultAwaitTool {
			awaits++
			if strings.Contains(tool.Description, "the upstream's own") {
				t.Errorf("the await tool listed is the upstream's: %+v", tool)
			}
		}
	}
	if awaits != 1 {
		t.Fatalf("%d tools named %s listed, want 1 (the gateway's)", awaits, mcp.DefaultAwaitTool)
	}

	c.Send(`{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":3,"steps":3}}}`)
	resp, _ := c.Response(`"d"`)
	var res struct {
		Meta map[string]struct {
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(resp.Result, &res); err != nil || res.Meta[spec.MetaDeferred].Tool != mcp.DefaultAwaitTool {
		t.Fatalf("a 3 s countdown: %s, want a deferred answer naming %s", resp.Raw, mcp.DefaultAwaitTool)
	}
	for n := 0; ; n++ {
		id := fmt.Sprintf(`"a%d"`, n)
		c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, mcp.DefaultAwaitTool, res.Meta[spec.MetaDeferred].Arguments)
		m, _ := c.Response(id)
		if text := e2etest.Text(m); text == "countdown done: 3 of 3 steps" {
			break
		} else if n > 8 || strings.Contains(text, "upstream") {
			t.Fatalf("await %d: %s", n, m.Raw)
		}
	}
	if n := shadowCalls.Load(); n != 0 {
		t.Fatalf("the upstream's %s was called %d times", mcp.DefaultAwaitTool, n)
	}
}

// An upstream that defers its answers (serve --answer-within 1s) behind a
// gateway that does not: the gateway's client gets the call's own result,
// never the upstream's deferred answer and its handle, and every progress
// value once (the gateway follows the upstream's awaits); behind a gateway
// that defers too (2 s), the client's deferred answer is the gateway's own,
// whose await gets the result.
func TestUpstreamDeferredFollowed(t *testing.T) {
	up, err := mcp.New(demo.Server("up"), &mcp.Options{AnswerWithin: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, up)
	t.Run("gateway waits", func(t *testing.T) {
		r := newRigWith(t, gateway.Options{URL: hs.URL}, nil)
		c := e2etest.NewClient(t, r.dialHTTP(t))
		c.Initialize(`{}`)
		c.Send(`{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":3,"steps":6},"_meta":{"progressToken":"p"}}}`)
		resp, before := c.Response(`"d"`)
		if e2etest.Text(resp) != "countdown done: 6 of 6 steps" || strings.Contains(string(resp.Raw), spec.MetaDeferred) {
			t.Fatalf("a 3 s countdown through a gateway in front of an upstream deferring after 1 s: %s, want the countdown's own result", resp.Raw)
		}
		var progress []int
		for _, m := range before {
			if m.Method == "notifications/progress" {
				progress = append(progress, e2etest.Progress(m))
			}
		}
		if fmt.Sprint(progress) != "[1 2 3 4 5 6]" {
			t.Fatalf("progress %v, want 1..6 once each", progress)
		}
	})
	t.Run("gateway defers", func(t *testing.T) {
		r := newRigWith(t, gateway.Options{URL: hs.URL}, &mcp.Options{AnswerWithin: 2 * time.Second})
		c := e2etest.NewClient(t, r.dialHTTP(t))
		c.Initialize(`{}`)
		c.Send(`{"jsonrpc":"2.0","id":"d","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":4,"steps":4}}}`)
		resp, _ := c.Response(`"d"`)
		var res struct {
			Meta map[string]struct {
				Tool      string          `json:"tool"`
				Arguments json.RawMessage `json:"arguments"`
				ElapsedMs int64           `json:"elapsedMs"`
			} `json:"_meta"`
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil || res.Meta[spec.MetaDeferred].ElapsedMs < 2000 {
			t.Fatalf("a 4 s countdown: %s, want the gateway's deferred answer, after 2 s", resp.Raw)
		}
		for n := 0; ; n++ {
			id := fmt.Sprintf(`"a%d"`, n)
			c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, res.Meta[spec.MetaDeferred].Tool, res.Meta[spec.MetaDeferred].Arguments)
			m, _ := c.Response(id)
			if e2etest.Text(m) == "countdown done: 4 of 4 steps" {
				break
			} else if n > 4 {
				t.Fatalf("await %d: %s", n, m.Raw)
			}
		}
	})
}
