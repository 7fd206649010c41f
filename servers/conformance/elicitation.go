package conformance

import (
	"context"
	"encoding/json"
	"fmt"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The requested schemas are JSON kept verbatim, so that integers stay integers
// (age's default is 30, not 30.0) and the keyword shapes the scenarios inspect
// are exactly as written.
const (
	// userSchema is what test_elicitation asks for: the fields the suite's client
	// answers with.
	userSchema = `{
		"type": "object",
		"properties": {
			"username": {"type": "string", "description": "User's response"},
			"email": {"type": "string", "description": "User's email address"}
		},
		"required": ["username", "email"]
	}`

	// defaultsSchema has a default for every primitive type (SEP-1034).
	defaultsSchema = `{
		"type": "object",
		"properties": {
			"name": {"type": "string", "description": "User name", "default": "John Doe"},
			"age": {"type": "integer", "description": "User age", "default": 30},
			"score": {"type": "number", "description": "User score", "default": 95.5},
			"status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
			"verified": {"type": "boolean", "description": "Verification status", "default": true}
		},
		"required": []
	}`

	// enumsSchema has the five enum variants of SEP-1330.
	enumsSchema = `{
		"type": "object",
		"properties": {
			"untitledSingle": {
				"type": "string", "description": "Select one option",
				"enum": ["option1", "option2", "option3"]
			},
			"titledSingle": {
				"type": "string", "description": "Select one option with titles",
				"oneOf": [
					{"const": "value1", "title": "First Option"},
					{"const": "value2", "title": "Second Option"},
					{"const": "value3", "title": "Third Option"}
				]
			},
			"legacyEnum": {
				"type": "string", "description": "Select one option (legacy)",
				"enum": ["opt1", "opt2", "opt3"],
				"enumNames": ["Option One", "Option Two", "Option Three"]
			},
			"untitledMulti": {
				"type": "array", "description": "Select multiple options",
				"minItems": 1, "maxItems": 3,
				"items": {"type": "string", "enum": ["option1", "option2", "option3"]}
			},
			"titledMulti": {
				"type": "array", "description": "Select multiple options with titles",
				"minItems": 1, "maxItems": 3,
				"items": {"anyOf": [
					{"const": "value1", "title": "First Choice"},
					{"const": "value2", "title": "Second Choice"},
					{"const": "value3", "title": "Third Choice"}
				]}
			}
		},
		"required": []
	}`
)

func elicitation(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	msg, err := req.RequireString("message")
	if err != nil {
		return mcpgo.NewToolResultError(err.Error()), nil
	}
	return elicit(ctx, msg, userSchema, "User response")
}

func elicitDefaults(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return elicit(ctx, "Please review and update the form fields with defaults", defaultsSchema, "Elicitation completed")
}

func elicitEnums(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	return elicit(ctx, "Please select options from the enum fields", enumsSchema, "Elicitation completed")
}

// elicit sends elicitation/create with message and schema and reports the answer
// as "<label>: action=<action>, content=<content as JSON>".
func elicit(ctx context.Context, message, schema, label string) (*mcpgo.CallToolResult, error) {
	res, err := server.ServerFromContext(ctx).RequestElicitation(ctx, mcpgo.ElicitationRequest{
		Params: mcpgo.ElicitationParams{Message: message, RequestedSchema: json.RawMessage(schema)},
	})
	if err != nil {
		return mcpgo.NewToolResultErrorf("elicitation/create failed: %v", err), nil
	}
	content := res.Content
	if content == nil {
		content = map[string]any{}
	}
	b, err := json.Marshal(content)
	if err != nil {
		return mcpgo.NewToolResultErrorf("encoding elicitation content: %v", err), nil
	}
	return mcpgo.NewToolResultText(fmt.Sprintf("%s: action=%s, content=%s", label, res.Action, b)), nil
}
