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
	// Task: whether a call may be answered with a task (the Tasks extension of
	// 2026-07-28). With AsTask or TaskRequired, a call from a client that
	// declares the extension becomes a task when Mode makes it resumable
	// (Always: at once; After: once it has run that long, answering normally
	// if it ends sooner). TaskRequired also refuses the tool to clients that
	// do not declare the extension (-32021).
	Task TaskMode
}

// TaskMode says whether a tool's calls may become tasks.
type TaskMode int

const (
	NoTask       TaskMode = iota // never a task (the default)
	AsTask                       // a task for clients that declare the extension
	TaskRequired                 // only as a task: other clients get -32021
)

func (o *Options) policy(tool string) Policy {
	if o.PolicyOf != nil {
		if p, ok := o.PolicyOf(tool); ok {
			return p
		}
	}
	if p, ok := o.Tools[tool]; ok {
		return p
	}
	return o.DefaultPolicy
}
