package mcp

import "time"

// Mode says when a tools/call becomes resumable.
type Mode int

const (
	// Always: resumable from the start (the default for tools/call).
	Always Mode = iota
	// Never: answered directly, like a plain MCP server.
	Never
	// After: resumable once it has run longer than Policy.After; a call that
	// finishes sooner is answered directly with no policy notification.
	After
)

// Policy decides whether a tool's calls are resumable.
type Policy struct {
	Mode  Mode
	After time.Duration // for Mode After
	// Restartable: with a durable store, a call of this tool that was running when
	// its server stopped is run again by the next server (from the stored request)
	// instead of failing with server_restarted; its client resumes it as usual.
	// Only for tools that are safe to run twice.
	Restartable bool
}

func (o *Options) policy(tool string) Policy {
	if p, ok := o.Tools[tool]; ok {
		return p
	}
	return o.DefaultPolicy
}
