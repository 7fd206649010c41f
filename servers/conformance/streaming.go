package conformance

import (
	"context"
	"fmt"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/mcp"
)

// The tools here send messages while the call runs. A notification that cannot be
// sent (mcp-go drops it when the session's channel is full) fails the call with a
// tool error naming it, rather than vanishing.

// logMessages are the three info messages of test_tool_with_logging.
var logMessages = []string{"Tool execution started", "Tool processing data", "Tool execution completed"}

func withLogging(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	srv := server.ServerFromContext(ctx)
	for i, msg := range logMessages {
		if i > 0 {
			if !backoff.Sleep(ctx, stepDelay) {
				return nil, ctx.Err()
			}
		}
		// SendLogMessageToClient applies the session's level (logging/setLevel).
		n := mcpgo.NewLoggingMessageNotification(mcpgo.LoggingLevelInfo, serverName, msg)
		if err := srv.SendLogMessageToClient(ctx, n); err != nil {
			return mcpgo.NewToolResultErrorf("sending log message %q: %v", msg, err), nil
		}
	}
	return mcpgo.NewToolResultText("Tool with logging executed successfully"), nil
}

// progressSteps are the progress values of test_tool_with_progress, out of 100.
var progressSteps = []int{0, 50, 100}

func withProgress(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	var token mcpgo.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	srv := server.ServerFromContext(ctx)
	for i, p := range progressSteps {
		if i > 0 {
			if !backoff.Sleep(ctx, stepDelay) {
				return nil, ctx.Err()
			}
		}
		if token == nil {
			continue // progress goes only to a caller that asked for it
		}
		err := srv.SendNotificationToClient(ctx, string(mcpgo.MethodNotificationProgress), map[string]any{
			"progressToken": token,
			"progress":      p,
			"total":         100,
			"message":       fmt.Sprintf("Completed step %d of 100", p),
		})
		if err != nil {
			return mcpgo.NewToolResultErrorf("sending progress %d of 100: %v", p, err), nil
		}
	}
	if token == nil {
		return mcpgo.NewToolResultText("Progress tool completed (no progress token, no progress sent)"), nil
	}
	return mcpgo.NewToolResultText(fmt.Sprintf("Progress tool completed: 3 notifications for token %v", token)), nil
}

// reconnection closes the stream the call's messages travel on, so that the
// result can only arrive after the client reconnects with Last-Event-ID.
func reconnection(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	closed := mcp.CloseStream(ctx)
	if !backoff.Sleep(ctx, reconnectDelay) {
		return nil, ctx.Err()
	}
	text := "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure."
	if !closed {
		text = "Reconnection test completed, but this transport had no stream to close: the result came without a reconnection."
	}
	return mcpgo.NewToolResultText(text), nil
}
