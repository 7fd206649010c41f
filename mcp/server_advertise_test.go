package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	clienttransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// mcp-go's own client, in both eras: unpinned it negotiates 2026-07-28 through
// server/discover and finds the extension there; pinned to 2025-11-25 it
// initializes and finds the capability under experimental. Either way it
// declares the capability, and gets a resume policy and its result.
func TestMCPGoClient(t *testing.T) {
	t.Run("2026-07-28", func(t *testing.T) { testMCPGoClient(t, true) })
	t.Run("2025-11-25", func(t *testing.T) { testMCPGoClient(t, false) })
}

func testMCPGoClient(t *testing.T, modern bool) {
	core, err := mcp.New(demo.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = core.Serve(context.Background(), stdio.New(toServer, fromServer, nil))
	}()
	t.Cleanup(func() { core.Close(); wg.Wait() })

	var opts []client.ClientOption
	if !modern {
		opts = append(opts, client.WithProtocolVersion("2025-11-25"))
	}
	c := client.NewClient(clienttransport.NewIO(toClient, fromClient, nil), opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var policies []map[string]any
	c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		if n.Method == spec.MethodResumePolicy {
			mu.Lock()
			policies = append(policies, n.Params.AdditionalFields)
			mu.Unlock()
		}
	})
	init := mcpgo.InitializeRequest{}
	init.Params.ProtocolVersion = mcpgo.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcpgo.Implementation{Name: "mcp-go", Version: "test"}
	init.Params.Capabilities.Experimental = map[string]any{spec.CapabilityName: map[string]any{}}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	adv := res.Capabilities.Experimental[spec.CapabilityName]
	if modern {
		if res.ProtocolVersion != spec.Version2026 {
			t.Errorf("negotiated %q, want %s", res.ProtocolVersion, spec.Version2026)
		}
		adv = res.Capabilities.Extensions[spec.ExtensionResumable]
	}
	if adv == nil {
		t.Errorf("no resume advertisement in %+v", res.Capabilities)
	}
	call := mcpgo.CallToolRequest{}
	call.Params.Name = "countdown"
	call.Params.Arguments = map[string]any{"seconds": 0.05, "steps": 2}
	out, err := c.CallTool(ctx, call)
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if tc, ok := out.Content[0].(mcpgo.TextContent); !ok || tc.Text != "countdown done: 2 of 2 steps" {
		t.Fatalf("result %+v", out.Content)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(policies) != 1 {
		t.Fatalf("got %d resume policies, want 1", len(policies))
	}
	if b, _ := json.Marshal(policies[0]["requestId"]); string(b) == "" || policies[0]["resumeToken"] == "" {
		t.Fatalf("policy %v", policies[0])
	}
}
