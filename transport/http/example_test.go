package http_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// An mcp-go server served over Streamable HTTP with resumable requests, and a
// call from the Go client. In a program the handler goes to http.ListenAndServe
// (behind TLS where clients are not on the same machine).
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
	h := httptransport.NewHandler(core, nil)
	defer h.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ts := httptest.NewServer(mux)
	defer ts.Close()

	ctx := context.Background()
	c, err := client.Connect(ctx, func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(ts.URL+"/mcp", nil), nil
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
