package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp/client"
)

// What each scenario does once connected (steps).

// listTools lists the server's tools and does nothing with them.
func listTools(ctx context.Context, c *client.Client, _ *scenario) error {
	_, err := c.ListTools(ctx)
	return err
}

// callAddNumbers calls add_numbers with 2 and 3, the scenario's only tool.
func callAddNumbers(ctx context.Context, c *client.Client, _ *scenario) error {
	tools, err := c.ListTools(ctx)
	if err != nil {
		return err
	}
	if len(tools) == 0 {
		return errors.New("the server lists no tool")
	}
	return called(c.CallTool(ctx, tools[0].Name, map[string]any{"a": 2, "b": 3}, nil))
}

// callTool calls one tool without arguments.
func callTool(name string) func(context.Context, *client.Client, *scenario) error {
	return func(ctx context.Context, c *client.Client, _ *scenario) error {
		if _, err := c.ListTools(ctx); err != nil {
			return err
		}
		return called(c.CallTool(ctx, name, map[string]any{}, nil))
	}
}

// callEachTool lists the tools and calls each, without arguments.
func callEachTool(ctx context.Context, c *client.Client, _ *scenario) error {
	tools, err := c.ListTools(ctx)
	if err != nil {
		return err
	}
	for _, t := range tools {
		if err := called(c.CallTool(ctx, t.Name, map[string]any{}, nil)); err != nil {
			return err
		}
	}
	return nil
}

// callListed calls every tool ListTools kept (those with valid x-mcp-header
// annotations), with a region.
func callListed(ctx context.Context, c *client.Client, _ *scenario) error {
	tools, err := c.ListTools(ctx)
	if err != nil {
		return err
	}
	if len(tools) == 0 {
		return errors.New("no tool left to call")
	}
	for _, t := range tools {
		if err := called(c.CallTool(ctx, t.Name, map[string]any{"region": "us-west1"}, nil)); err != nil {
			return err
		}
	}
	return nil
}

// echoSchema sends the input schema of json_schema_2020_12_tool, as listed,
// to json_schema_echo.
func echoSchema(ctx context.Context, c *client.Client, _ *scenario) error {
	tools, err := c.ListTools(ctx)
	if err != nil {
		return err
	}
	for _, t := range tools {
		if t.Name == "json_schema_2020_12_tool" {
			return called(c.CallTool(ctx, "json_schema_echo", map[string]any{"schema": t.RawInputSchema}, nil))
		}
	}
	return errors.New("the server lists no json_schema_2020_12_tool")
}

// multiRound calls the four tools of multi round-trip requests: two that ask
// for input (one with a requestState, one without), one between them that asks
// for nothing, one whose result names no type.
func multiRound(ctx context.Context, c *client.Client, _ *scenario) error {
	if _, err := c.ListTools(ctx); err != nil {
		return err
	}
	for _, name := range []string{"test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"} {
		if err := called(c.CallTool(ctx, name, map[string]any{}, nil)); err != nil {
			return err
		}
	}
	return nil
}

// everyKind lists and uses one of each kind: a tool called, a resource read,
// a prompt got.
func everyKind(ctx context.Context, c *client.Client, _ *scenario) error {
	tools, err := c.ListTools(ctx)
	if err != nil {
		return err
	}
	if len(tools) > 0 {
		if err := called(c.CallTool(ctx, tools[0].Name, map[string]any{}, nil)); err != nil {
			return err
		}
	}
	raw, err := c.Call(ctx, "resources/list", nil, nil)
	if err != nil {
		return err
	}
	var resources mcpgo.ListResourcesResult
	if err := json.Unmarshal(raw, &resources); err != nil {
		return fmt.Errorf("resources/list: %w", err)
	}
	if len(resources.Resources) > 0 {
		if _, err := c.Call(ctx, "resources/read", map[string]any{"uri": resources.Resources[0].URI}, nil); err != nil {
			return err
		}
	}
	if raw, err = c.Call(ctx, "prompts/list", nil, nil); err != nil {
		return err
	}
	var prompts mcpgo.ListPromptsResult
	if err := json.Unmarshal(raw, &prompts); err != nil {
		return fmt.Errorf("prompts/list: %w", err)
	}
	if len(prompts.Prompts) > 0 {
		if _, err := c.Call(ctx, "prompts/get", map[string]any{"name": prompts.Prompts[0].Name}, nil); err != nil {
			return err
		}
	}
	return nil
}

// contextCalls lists the tools and makes the calls the scenario's context
// names, with their arguments as given.
func contextCalls(ctx context.Context, c *client.Client, sc *scenario) error {
	var data struct {
		ToolCalls []struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"toolCalls"`
	}
	if err := json.Unmarshal(sc.Context, &data); err != nil || len(data.ToolCalls) == 0 {
		return errors.New("MCP_CONFORMANCE_CONTEXT names no toolCalls")
	}
	if _, err := c.ListTools(ctx); err != nil {
		return err
	}
	for _, tc := range data.ToolCalls {
		if err := called(c.CallTool(ctx, tc.Name, tc.Arguments, nil)); err != nil {
			return err
		}
	}
	return nil
}

// called is a call's error: its own, or the tool's when the result is one.
func called(res *mcpgo.CallToolResult, err error) error {
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("the tool failed: %v", res.Content)
	}
	return nil
}
