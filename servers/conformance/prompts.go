package conformance

import (
	"context"
	"fmt"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func addPrompts(s *server.MCPServer) {
	s.AddPrompt(mcpgo.NewPrompt("test_simple_prompt",
		mcpgo.WithPromptTitle("Simple Test Prompt"),
		mcpgo.WithPromptDescription("A prompt without arguments."),
	), simplePrompt)
	s.AddPrompt(mcpgo.NewPrompt("test_prompt_with_arguments",
		mcpgo.WithPromptTitle("Prompt With Arguments"),
		mcpgo.WithPromptDescription("A prompt with two required arguments, substituted into its text."),
		mcpgo.WithArgument("arg1", mcpgo.RequiredArgument(), mcpgo.ArgumentDescription("First test argument")),
		mcpgo.WithArgument("arg2", mcpgo.RequiredArgument(), mcpgo.ArgumentDescription("Second test argument")),
	), argumentsPrompt)
	s.AddPrompt(mcpgo.NewPrompt("test_prompt_with_embedded_resource",
		mcpgo.WithPromptTitle("Prompt With Embedded Resource"),
		mcpgo.WithPromptDescription("A prompt that embeds a text resource under the URI given."),
		mcpgo.WithArgument("resourceUri", mcpgo.RequiredArgument(), mcpgo.ArgumentDescription("URI of the resource to embed")),
	), embeddedResourcePrompt)
	s.AddPrompt(mcpgo.NewPrompt("test_prompt_with_image",
		mcpgo.WithPromptTitle("Prompt With Image"),
		mcpgo.WithPromptDescription("A prompt with image content."),
	), imagePrompt)
}

func simplePrompt(context.Context, mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
	return prompt(mcpgo.NewTextContent("This is a simple prompt for testing.")), nil
}

func argumentsPrompt(_ context.Context, req mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
	args := req.Params.Arguments
	return prompt(mcpgo.NewTextContent(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args["arg1"], args["arg2"]))), nil
}

func embeddedResourcePrompt(_ context.Context, req mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
	uri := req.Params.Arguments["resourceUri"]
	if uri == "" {
		return nil, fmt.Errorf("prompt %q: argument resourceUri is required", req.Params.Name)
	}
	return prompt(
		mcpgo.NewEmbeddedResource(mcpgo.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: "Embedded resource content for testing."}),
		mcpgo.NewTextContent("Please process the embedded resource above."),
	), nil
}

func imagePrompt(context.Context, mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
	return prompt(
		mcpgo.NewImageContent(pngPixel, "image/png"),
		mcpgo.NewTextContent("Please analyze the image above."),
	), nil
}

// prompt returns a prompt result with one user message per content item.
func prompt(content ...mcpgo.Content) *mcpgo.GetPromptResult {
	msgs := make([]mcpgo.PromptMessage, len(content))
	for i, c := range content {
		msgs[i] = mcpgo.NewPromptMessage(mcpgo.RoleUser, c)
	}
	return &mcpgo.GetPromptResult{Messages: msgs}
}
