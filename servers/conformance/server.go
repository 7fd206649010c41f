package conformance

import (
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// serverName is the name reported in the initialize result.
const serverName = "mcp-resume-conformance"

// Delays of the tools that send messages during a call. The suite's scenarios
// expect about 50ms between notifications and a short pause after a stream is
// closed.
const (
	stepDelay      = 50 * time.Millisecond
	reconnectDelay = 100 * time.Millisecond
)

// Server returns an mcp-go server with the tools, resources and prompts of the
// conformance suite, reporting version.
func Server(version string) *server.MCPServer {
	s := server.NewMCPServer(serverName, version,
		server.WithToolCapabilities(false),
		server.WithResourceCapabilities(true, false),
		server.WithPromptCapabilities(false),
		server.WithLogging(),
		server.WithCompletions(),
		server.WithPromptCompletionProvider(completer{}),
		server.WithResourceCompletionProvider(completer{}),
	)
	addTools(s)
	addResources(s)
	addPrompts(s)
	addMRTR(s)
	addHeaderTool(s)
	addStatelessTools(s)
	addTaskTools(s)
	return s
}
