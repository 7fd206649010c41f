package jsstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Durable requests: a NATS server embedded in the process keeps requests'
// messages and results in a directory (what `serve --data-dir` does), and the
// core is given the store. With an external NATS, connect with nats.Connect
// instead; every instance on it then serves any request (resume/cluster).
func ExampleNew() {
	dir, err := os.MkdirTemp("", "jsstore-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ns, err := embedded.Start(&embedded.Options{Dir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ns.Shutdown()
	nc, err := ns.Connect()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	st, err := jsstore.New(ctx, js, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close(ctx)

	srv := mcpserver.NewMCPServer("weather", "1.0.0", mcpserver.WithToolCapabilities(false))
	srv.AddTool(mcpgo.NewTool("forecast", mcpgo.WithString("city")),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("sunny in " + req.GetString("city", "")), nil
		})
	core, err := mcp.New(srv, &mcp.Options{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	defer core.Close()

	c, err := client.Connect(ctx, func(context.Context) (transport.Conn, error) {
		cc, sc := transport.Pipe()
		go func() { _ = core.Serve(context.Background(), sc) }()
		return cc, nil
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	res, err := c.CallTool(ctx, "forecast", map[string]any{"city": "Oslo"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(mcpgo.TextContent).Text)
	// Output: sunny in Oslo
}
