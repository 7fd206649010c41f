package conformance

import (
	"context"
	"encoding/json"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func sampling(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	prompt, err := req.RequireString("prompt")
	if err != nil {
		return mcpgo.NewToolResultError(err.Error()), nil
	}
	res, err := server.ServerFromContext(ctx).RequestSampling(ctx, mcpgo.CreateMessageRequest{
		CreateMessageParams: mcpgo.CreateMessageParams{
			Messages:  []mcpgo.SamplingMessage{{Role: mcpgo.RoleUser, Content: mcpgo.NewTextContent(prompt)}},
			MaxTokens: 100,
		},
	})
	if err != nil {
		return mcpgo.NewToolResultErrorf("sampling/createMessage failed: %v", err), nil
	}
	return mcpgo.NewToolResultText("LLM response: " + samplingText(res.Content)), nil
}

// samplingText returns the text of a sampling result's content, which mcp-go
// hands over as a content value, a pointer to one, a decoded JSON map or a list
// of them, depending on the transport. Texts of a list are joined by newlines.
func samplingText(content any) string {
	b, err := json.Marshal(content)
	if err != nil {
		return ""
	}
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	var one text
	if json.Unmarshal(b, &one) == nil {
		return one.Text
	}
	var many []text
	if json.Unmarshal(b, &many) != nil {
		return ""
	}
	var texts []string
	for _, c := range many {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "\n")
}
