package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/transport"
)

// A server author hands an existing mcp-go server, tools unchanged, to mcp.New and
// serves it on any connection. Here the client is the other end of an in-memory
// pipe; in a program it is transport/stdio (or HTTP, WebSocket).
func ExampleNew() {
	srv := server.NewMCPServer("weather", "1.0.0", server.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("forecast", mcpgo.WithString("city", mcpgo.Required())),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("sunny in " + req.GetString("city", "")), nil
		})

	// Every tools/call is resumable by default; one that answers within a
	// millisecond is answered plainly (Options.QuickCall), which this example,
	// whose tool answers at once, turns off.
	core, err := mcp.New(srv, &mcp.Options{QuickCall: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer core.Close()
	client, conn := transport.Pipe()
	done := make(chan struct{})
	go func() { defer close(done); _ = core.Serve(context.Background(), conn) }()
	defer func() { _ = client.Close(); <-done }()

	ctx := context.Background()
	send := func(s string) { _ = client.Write(ctx, []byte(s)) }
	recv := func() map[string]any {
		raw, _ := client.Read(ctx)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return m
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"demo","version":"1"}}}`)
	recv()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo"}}}`)

	policy := recv()
	fmt.Println(policy["method"])
	p := policy["params"].(map[string]any)
	fmt.Println("requestId:", p["requestId"], "token length:", len(p["resumeToken"].(string)))
	result := recv()["result"].(map[string]any)
	fmt.Println(result["content"].([]any)[0].(map[string]any)["text"])
	// Output:
	// notifications/requests/resumePolicy
	// requestId: 2 token length: 43
	// sunny in Oslo
}
