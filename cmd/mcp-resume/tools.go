package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp/client"
)

const toolsUsage = `usage: mcp-resume tools [--url URL | --ws URL | --stdio CMD] [--json]

Lists the server's tools: a line each, its name and the first line of its
description (--json: the whole tools/list result).

` + keyNote + `flags:
`

// tools is `mcp-resume tools`.
func tools(args []string, stdout, stderr io.Writer) error {
	var (
		tg     target
		asJSON bool
	)
	stderr = syncWriter(stderr)
	fs := tg.flagSet("tools", toolsUsage, stderr, &asJSON, "print the tools/list result as JSON")
	if err := parseAnywhere(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("tools: unexpected arguments %q", fs.Args())
	}
	ctx, c, done, err := tg.open(&client.Options{ClientInfo: mcpgo.Implementation{Name: "mcp-resume tools", Version: version}}, stderr)
	if err != nil {
		return err
	}
	defer done()
	all, err := listTools(ctx, c)
	if err != nil {
		return err
	}
	if asJSON {
		raws := make([]json.RawMessage, len(all))
		for i, t := range all {
			raws[i] = t.raw
		}
		b, _ := json.MarshalIndent(map[string]any{"tools": raws}, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	for _, t := range all {
		desc, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(stdout, "%-20s %s\n", t.Name, desc)
		if args := t.schema.describe(); args != "" {
			fmt.Fprintf(stdout, "%-20s arguments: %s\n", "", args)
		}
	}
	return nil
}

// toolInfo is one tool of a tools/list: its name, description, input schema
// and the tool as the server gave it.
type toolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	schema      inputSchema
	raw         json.RawMessage
}

// listTools reads every page of the server's tools/list.
func listTools(ctx context.Context, c *client.Client) ([]toolInfo, error) {
	var all []toolInfo
	var cursor string
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := c.Call(ctx, "tools/list", params, nil)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("tools/list result: %w", err)
		}
		for _, r := range page.Tools {
			var t toolInfo
			if err := json.Unmarshal(r, &t); err != nil {
				return nil, fmt.Errorf("tools/list result: %w", err)
			}
			_ = json.Unmarshal(t.InputSchema, &t.schema) // an odd schema is not checked
			t.raw = r
			all = append(all, t)
		}
		if cursor = page.NextCursor; cursor == "" {
			return all, nil
		}
	}
}
