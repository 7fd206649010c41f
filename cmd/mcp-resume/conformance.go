package main

import (
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/servers/conformance"
)

// conformanceServer serves the MCP conformance suite's fixture set (--conformance).
func conformanceServer(version string) *server.MCPServer { return conformance.Server(version) }
