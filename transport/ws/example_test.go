package ws_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// An mcp-go server served over WebSocket (subprotocol "mcp", one message per
// text frame), and a call from the Go client, which resumes its calls on a new
// connection when one is lost.
func ExampleNewHandler() {
	srv := mcpserver.NewMCPServer("greeter", "1.0.0", mcpserver.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("greet", mcpgo.WithString("name")),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("hello, " + req.GetString("name", "you")), nil
		})
	core, err := mcp.New(srv, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer core.Close()
	h := ws.NewHandler(core, nil)
	defer h.Close()
	ts := httptest.NewServer(h)
	defer ts.Close()

	ctx := context.Background()
	url := "ws" + strings.TrimPrefix(ts.URL, "http")
	c, err := client.Connect(ctx, func(ctx context.Context) (transport.Conn, error) {
		return ws.Dial(ctx, url, nil)
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	res, err := c.CallTool(ctx, "greet", map[string]any{"name": "Ada"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(mcpgo.TextContent).Text)
	// Output: hello, Ada
}
