package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/mcp"
)

// The tools of the suite's tasks-* scenarios (the Tasks extension of 2026-07-28).
// They are plain mcp-go tools: whether a call becomes a task is the resume
// layer's decision, by the policies in Policies.

// Policies are the resume policies the fixture set is served with: the task
// tools become tasks for clients that declare the extension; greet never does.
func Policies() map[string]mcp.Policy {
	return map[string]mcp.Policy{
		"greet":               {Mode: mcp.Never},
		"slow_compute":        {Mode: mcp.Always, Task: mcp.AsTask},
		"failing_job":         {Mode: mcp.Always, Task: mcp.TaskRequired},
		"protocol_error_job":  {Mode: mcp.Always, Task: mcp.AsTask},
		"confirm_delete":      {Mode: mcp.Always, Task: mcp.AsTask},
		"multi_input":         {Mode: mcp.Always, Task: mcp.AsTask},
		"test_tool_with_task": {Mode: mcp.After, After: 100 * time.Millisecond, Task: mcp.TaskRequired},
	}
}

func addTaskTools(s *server.MCPServer) {
	s.AddTool(mcpgo.NewTool("greet", mcpgo.WithDescription("Greets, at once (never a task)"), mcpgo.WithString("name")),
		func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return mcpgo.NewToolResultText("Hello, " + req.GetString("name", "world") + "!"), nil
		})
	s.AddTool(mcpgo.NewTool("slow_compute", mcpgo.WithDescription("Sleeps seconds, then answers (a task)"), mcpgo.WithNumber("seconds")),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			d := time.Duration(req.GetFloat("seconds", 1) * float64(time.Second))
			if !backoff.Sleep(ctx, d) {
				return nil, ctx.Err()
			}
			return mcpgo.NewToolResultText(fmt.Sprintf("computed in %v", d)), nil
		})
	s.AddTool(mcpgo.NewTool("failing_job", mcpgo.WithDescription("Reports a tool error after a second (a task only)")),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			if !backoff.Sleep(ctx, time.Second) {
				return nil, ctx.Err()
			}
			return mcpgo.NewToolResultError("the job failed"), nil
		})
	s.AddTool(mcpgo.NewTool("protocol_error_job", mcpgo.WithDescription("Fails with a JSON-RPC error (a task)")),
		func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			return nil, errors.New("protocol_error_job: an internal failure")
		})
	s.AddTool(mcpgo.NewTool("confirm_delete", mcpgo.WithDescription("Asks for a confirmation, then deletes (a task)")),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			ok, err := confirm(ctx, "Delete the file?", "confirm")
			if err != nil {
				return nil, err
			}
			return mcpgo.NewToolResultText(fmt.Sprintf("deleted: %v", ok)), nil
		})
	s.AddTool(mcpgo.NewTool("multi_input", mcpgo.WithDescription("Asks two questions at once (a task)")),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			var wg sync.WaitGroup
			answers := make([]bool, 2)
			errs := make([]error, 2)
			for i, q := range []string{"First question?", "Second question?"} {
				wg.Go(func() { answers[i], errs[i] = confirm(ctx, q, "ok") })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return nil, err
			}
			return mcpgo.NewToolResultText(fmt.Sprintf("answers: %v %v", answers[0], answers[1])), nil
		})
	s.AddTool(mcpgo.NewTool("test_tool_with_task", mcpgo.WithDescription("Asks for a name (input_required), then works on as a task")),
		func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			name, ok := elicited(server.ElicitationResponse(req.Params.InputResponses, "user_name"), "name")
			if !ok {
				return inputRequired(mcpgo.InputRequests{"user_name": elicitRequest("What is your name?", "name")}, ""), nil
			}
			if !backoff.Sleep(ctx, 500*time.Millisecond) { // long enough to become a task
				return nil, ctx.Err()
			}
			return mcpgo.NewToolResultText("Hello, " + name + ", from a task!"), nil
		})
}

// confirm asks the client a yes/no question (2025-era API; a task's question
// waits in its outbox for tasks/update).
func confirm(ctx context.Context, message, field string) (bool, error) {
	req := mcpgo.ElicitationRequest{}
	req.Params.Message = message
	req.Params.RequestedSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{%q:{"type":"boolean"}},"required":[%q]}`, field, field))
	res, err := server.ServerFromContext(ctx).RequestElicitation(ctx, req)
	if err != nil {
		return false, err
	}
	if res.Action != mcpgo.ElicitationResponseActionAccept {
		return false, nil
	}
	content, _ := res.Content.(map[string]any)
	v, _ := content[field].(bool)
	return v, nil
}
