package stdio_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// A server on stdio: in a program the Conn reads os.Stdin and writes os.Stdout
// (logs go to stderr); here pipes stand in for them, and the client's side
// writes one JSON-RPC message per line and reads the answers.
func ExampleNew() {
	srv := server.NewMCPServer("echo", "1.0.0", server.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("text")),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText(req.GetString("text", "")), nil
		})
	// QuickCall -1: the echo answers at once, and would be answered as by a
	// plain MCP server by default; here it is resumable, policy first.
	core, err := mcp.New(srv, &mcp.Options{QuickCall: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer core.Close()

	stdin, toServer := io.Pipe()
	fromServer, stdout := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = core.Serve(context.Background(), stdio.New(stdin, stdout, nil)) // os.Stdin, os.Stdout
	}()

	lines := bufio.NewScanner(fromServer)
	next := func() (m struct {
		Method string
		Result struct{ Content []struct{ Text string } }
	}) {
		lines.Scan()
		_ = json.Unmarshal(lines.Bytes(), &m)
		return m
	}
	fmt.Fprintln(toServer, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"demo","version":"1"}}}`)
	next()
	fmt.Fprintln(toServer, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(toServer, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)
	fmt.Println(next().Method)
	fmt.Println(next().Result.Content[0].Text)

	_ = toServer.Close() // the client went away: Serve returns
	<-done
	// Output:
	// notifications/requests/resumePolicy
	// hello
}
