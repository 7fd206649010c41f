package mcp_test

import (
	"context"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
)

// roots/list, the third kind of server-to-client request, travels like sampling
// and elicitation: asked while nobody is connected, it waits in the request's
// outbox with its sequence number, goes out on resume, and the answer given on the
// new connection reaches the tool.
func TestRootsWhileDetached(t *testing.T) {
	s := demo.Server("test")
	s.AddTool(mcpgo.NewTool("roots"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		res, err := server.ServerFromContext(ctx).RequestRoots(ctx, mcpgo.ListRootsRequest{})
		if err != nil {
			return mcpgo.NewToolResultError("roots: " + err.Error()), nil
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return mcpgo.NewToolResultText("roots: " + strings.Join(uris, " ")), nil
	})
	core, err := mcp.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	dial := serveCore(t, core)
	const caps = `{"resumableRequests":{},"roots":{"listChanged":false}}`

	a := e2etest.NewClient(t, dial(t))
	a.Initialize(caps)
	a.Send(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"roots","arguments":{}}}`)
	pol := e2etest.PolicyOf(t, a.Next())
	a.Close()

	b := e2etest.NewClient(t, dial(t))
	b.Initialize(caps)
	st := b.WaitStatus(`"r"`, pol.ResumeToken, func(s e2etest.Status) bool { return s.HasInputRequest })
	if st.Status != "processing" {
		t.Errorf("status %+v, want processing with the roots request pending", st)
	}
	b.Resume(`"r"`, pol.ResumeToken)
	req := b.Next()
	if req.Method != "roots/list" || req.Seq() != 1 {
		t.Fatalf("want roots/list with seq 1, got %s", req.Raw)
	}
	b.Send(`{"jsonrpc":"2.0","id":%s,"result":{"roots":[{"uri":"file:///work","name":"work"},{"uri":"file:///tmp"}]}}`, req.ID)
	resp, _ := b.Response(`"r"`)
	if got := e2etest.Text(resp); got != "roots: file:///work file:///tmp" {
		t.Errorf("result %s, want both roots", resp.Raw)
	}
}
