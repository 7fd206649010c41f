package client_test

import (
	"context"
	"fmt"
	"log"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/transport"
)

// A tool call with progress. The server runs in process on in-memory pipes; in a
// program the Dialer returns httptransport.Dial(url, &httptransport.ClientOptions{
// FailOnStreamLoss: true}), transport/ws.Dial(ctx, url, nil) or
// transport/stdio.Command(exec.Command("my-server")).
func ExampleClient_CallTool() {
	srv := server.NewMCPServer("steps", "1.0.0", server.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("count", mcpgo.WithNumber("to")),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			to := req.GetInt("to", 3)
			for i := 1; i <= to; i++ {
				_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress", map[string]any{
					"progressToken": req.Params.Meta.ProgressToken, "progress": i, "total": to,
				})
			}
			return mcpgo.NewToolResultText(fmt.Sprintf("counted to %d", to)), nil
		})
	core, err := mcp.New(srv, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer core.Close()
	dial := func(ctx context.Context) (transport.Conn, error) {
		c, s := transport.Pipe()
		go func() { _ = core.Serve(context.Background(), s) }()
		return c, nil
	}

	ctx := context.Background()
	c, err := client.Connect(ctx, dial, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println("server offers resumable requests:", c.Resumable() != nil)
	res, err := c.CallTool(ctx, "count", map[string]any{"to": 3}, &client.CallOptions{
		Policy:   func(p client.Policy) { fmt.Println("resumable, maxWait", p.MaxWait) },
		Progress: func(p client.Progress) { fmt.Printf("progress %v/%v (seq %d)\n", p.Progress, p.Total, p.Seq) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(mcpgo.TextContent).Text)
	// Output:
	// server offers resumable requests: true
	// resumable, maxWait 10m0s
	// progress 1/3 (seq 1)
	// progress 2/3 (seq 2)
	// progress 3/3 (seq 3)
	// counted to 3
}
