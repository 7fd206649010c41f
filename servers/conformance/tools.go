package conformance

import (
	"context"
	"encoding/json"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// jsonSchema202012 is the input schema of json_schema_2020_12_tool, listed as is:
// the scenario checks that $schema, $defs (with an $anchor), additionalProperties,
// composition (allOf with a nested anyOf) and conditionals (if/then/else)
// survive (SEP-1613, SEP-2106).
const jsonSchema202012 = `{
	"$schema": "https://json-schema.org/draft/2020-12/schema",
	"type": "object",
	"$defs": {
		"address": {
			"$anchor": "address",
			"type": "object",
			"properties": {"street": {"type": "string"}, "city": {"type": "string"}}
		}
	},
	"properties": {
		"name": {"type": "string"},
		"address": {"$ref": "#/$defs/address"},
		"contact": {"type": "string"},
		"kind": {"type": "string", "enum": ["person", "company"]},
		"vatId": {"type": "string"}
	},
	"allOf": [
		{"anyOf": [{"required": ["name"]}, {"required": ["contact"]}]}
	],
	"if": {"properties": {"kind": {"const": "company"}}, "required": ["kind"]},
	"then": {"required": ["vatId"]},
	"else": {"not": {"required": ["vatId"]}},
	"additionalProperties": false
}`

func addTools(s *server.MCPServer) {
	s.AddTools(
		tool("test_simple_text", "Returns one text content item.", simpleText),
		tool("test_image_content", "Returns one image content item (a 1x1 PNG).", imageContent),
		tool("test_audio_content", "Returns one audio content item (a WAV file).", audioContent),
		tool("test_embedded_resource", "Returns one embedded text resource.", embeddedResource),
		tool("test_multiple_content_types", "Returns text, image and embedded resource content together.", mixedContent),
		tool("test_error_handling", "Always fails: returns a result with isError set.", failing),
		tool("test_tool_with_logging", "Sends three info log notifications, 50ms apart, then returns.", withLogging),
		tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100, 50ms apart, when the call has a progress token.", withProgress),
		tool("test_reconnection", "Closes the call's SSE stream mid-call, waits briefly and returns: the client gets the result by reconnecting with Last-Event-ID (SEP-1699).", reconnection),
		tool("test_sampling", "Asks the client's model to answer prompt (sampling/createMessage) and returns its reply.", sampling,
			mcpgo.WithString("prompt", mcpgo.Required(), mcpgo.Description("The prompt to send to the model"))),
		tool("test_elicitation", "Asks the user for a username and an email (elicitation/create) and returns the answer.", elicitation,
			mcpgo.WithString("message", mcpgo.Required(), mcpgo.Description("The message to show the user"))),
		tool("test_elicitation_sep1034_defaults", "Asks the user with a default value for every primitive type (SEP-1034).", elicitDefaults),
		tool("test_elicitation_sep1330_enums", "Asks the user with the five enum schema variants (SEP-1330).", elicitEnums),
		server.ServerTool{
			Tool: mcpgo.NewToolWithRawSchema("json_schema_2020_12_tool",
				"Has an input schema with JSON Schema 2020-12 keywords ($schema, $defs, additionalProperties) (SEP-1613).",
				json.RawMessage(jsonSchema202012)),
			Handler: echoArguments,
		},
	)
}

// tool builds a tool whose handler only reads and returns data: the annotations
// say so instead of mcp-go's cautious defaults.
func tool(name, description string, h server.ToolHandlerFunc, opts ...mcpgo.ToolOption) server.ServerTool {
	opts = append([]mcpgo.ToolOption{
		mcpgo.WithDescription(description),
		mcpgo.WithReadOnlyHintAnnotation(true),
		mcpgo.WithDestructiveHintAnnotation(false),
		mcpgo.WithOpenWorldHintAnnotation(false),
	}, opts...)
	return server.ServerTool{Tool: mcpgo.NewTool(name, opts...), Handler: h}
}

func simpleText(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return mcpgo.NewToolResultText("This is a simple text response for testing."), nil
}

func imageContent(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return result(mcpgo.NewImageContent(pngPixel, "image/png")), nil
}

func audioContent(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return result(mcpgo.NewAudioContent(wavSample, "audio/wav")), nil
}

func embeddedResource(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return result(mcpgo.NewEmbeddedResource(mcpgo.TextResourceContents{
		URI:      "test://embedded-resource",
		MIMEType: "text/plain",
		Text:     "This is an embedded resource content.",
	})), nil
}

func mixedContent(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return result(
		mcpgo.NewTextContent("Multiple content types test:"),
		mcpgo.NewImageContent(pngPixel, "image/png"),
		mcpgo.NewEmbeddedResource(mcpgo.TextResourceContents{
			URI:      "test://mixed-content-resource",
			MIMEType: "application/json",
			Text:     `{"test":"data","value":123}`,
		}),
	), nil
}

// failing reports a tool execution error: a result with isError, not a JSON-RPC
// error (mcp-go turns a handler's error into the latter).
func failing(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return mcpgo.NewToolResultError("This tool intentionally returns an error for testing"), nil
}

func echoArguments(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	args := req.GetArguments()
	if args == nil {
		args = map[string]any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return mcpgo.NewToolResultErrorf("encoding arguments: %v", err), nil
	}
	return mcpgo.NewToolResultText("JSON Schema 2020-12 tool called with: " + string(b)), nil
}

func result(content ...mcpgo.Content) *mcpgo.CallToolResult {
	return &mcpgo.CallToolResult{Content: content}
}
