// Package demo holds the demo tools the mcp-resume binary serves and the end-to-end
// tests drive: countdown (progress), ask (elicitation), summarize (sampling), echo.
package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	resumemcp "github.com/mcp-resume/mcp-resume/mcp"
)

// Server returns an mcp-go server with the demo tools.
func Server(version string) *server.MCPServer {
	s := server.NewMCPServer("mcp-resume-demo", version, server.WithToolCapabilities(false), server.WithLogging())
	Add(s)
	return s
}

// Add registers the demo tools on s.
func Add(s *server.MCPServer) {
	s.AddTool(mcp.NewTool("countdown",
		mcp.WithDescription("Counts down for `seconds` in `steps` steps, with one progress notification per step when the call carries a progress token."),
		mcp.WithNumber("seconds", mcp.Description("total duration in seconds (default 10)")),
		mcp.WithNumber("steps", mcp.Description("number of steps (default 10)")),
		mcp.WithBoolean("fail", mcp.Description("end with a tool error instead of the result, after the countdown (to try failures)")),
	), countdown)
	s.AddTool(mcp.NewTool("ask",
		mcp.WithDescription("Asks the client a question (elicitation) and returns the answer."),
		mcp.WithString("question", mcp.Description("the question (default: What is your name?)")),
		mcp.WithNumber("delay", mcp.Description("seconds to wait before asking (default 0)")),
	), ask)
	s.AddTool(mcp.NewTool("summarize",
		mcp.WithDescription("Asks the client's model to summarize `text` (sampling) and returns its reply."),
		mcp.WithString("text", mcp.Required()),
	), summarize)
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Returns `text`."),
		mcp.WithString("text", mcp.Required()),
	), echo)
}

func countdown(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	for _, name := range []string{"seconds", "steps"} { // a value that is not a number is an error, not the default
		if v, ok := req.GetArguments()[name]; ok {
			if _, isNum := v.(float64); !isNum {
				return mcp.NewToolResultError(fmt.Sprintf("%s must be a number, got %v", name, v)), nil
			}
		}
	}
	seconds := req.GetFloat("seconds", 10)
	steps := req.GetInt("steps", 10)
	if steps < 1 || seconds < 0 {
		return mcp.NewToolResultError("steps must be at least 1 and seconds not negative"), nil
	}
	// What it needs of req is read now: req (its arguments' map) is not
	// kept while it runs.
	fail := req.GetBool("fail", false)
	var token mcp.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	srv := server.ServerFromContext(ctx)
	step := time.Duration(seconds * float64(time.Second) / float64(steps))
	t := time.NewTimer(step)
	defer t.Stop()
	for i := 1; i <= steps; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
			t.Reset(step)
		}
		if token != nil && srv != nil {
			_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
				"progressToken": token,
				"progress":      i,
				"total":         steps,
				"message":       fmt.Sprintf("step %d of %d", i, steps),
			})
		}
	}
	if fail {
		return mcp.NewToolResultError(fmt.Sprintf("countdown failed as asked: %d of %d steps", steps, steps)), nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("countdown done: %d of %d steps", steps, steps)), nil
}

func ask(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	q := req.GetString("question", "What is your name?")
	if d := time.Duration(req.GetFloat("delay", 0) * float64(time.Second)); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	srv := server.ServerFromContext(ctx)
	res, err := srv.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
		Message: q,
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"answer": map[string]any{"type": "string"}},
			"required":   []string{"answer"},
		},
	}})
	if err != nil {
		return mcp.NewToolResultError("elicitation failed: " + err.Error()), nil
	}
	if res.Action != mcp.ElicitationResponseActionAccept {
		return mcp.NewToolResultText("no answer (" + string(res.Action) + ")"), nil
	}
	content, _ := res.Content.(map[string]any)
	return mcp.NewToolResultText(fmt.Sprintf("answer: %v", content["answer"])), nil
}

func summarize(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	srv := server.ServerFromContext(ctx)
	res, err := srv.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
		Messages:  []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("Summarize: " + text)}},
		MaxTokens: 200,
	}})
	if err != nil {
		return mcp.NewToolResultError("sampling failed: " + err.Error()), nil
	}
	if tc, ok := res.Content.(mcp.TextContent); ok {
		return mcp.NewToolResultText("summary: " + tc.Text), nil
	}
	return mcp.NewToolResultText(fmt.Sprintf("summary: %v", res.Content)), nil
}

func echo(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(text), nil
}

// Policies are the resume policies the demo tools are served with: resumable from
// the start (the default), and countdown, ask and summarize become tasks for
// clients that declare the Tasks extension of 2026-07-28.
func Policies() map[string]resumemcp.Policy {
	task := resumemcp.Policy{Mode: resumemcp.Always, Task: resumemcp.AsTask}
	return map[string]resumemcp.Policy{"countdown": task, "ask": task, "summarize": task}
}
