package mcp

import (
	"sync"
	"time"

	"github.com/mcp-resume/mcp-resume/audit"
)

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

// Policy is what the server does with a tool's calls: whether and when they
// become resumable, and the operator's limits on them (a timeout, how many run
// at once, how many each principal starts per period).
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
	// Timeout, when not 0, bounds a call's run from its tool's start: past it
	// the call ends with the error timeout (reason "timeout") and its tool's
	// context is cancelled, whether its client is attached, detached, polling
	// a task or awaiting a deferred answer. A request keeps the deadline in its
	// record: run again after a restart, or by another instance, it still ends
	// then.
	Timeout time.Duration
	// Concurrency bounds how many of the tool's calls run at once on this
	// server.
	Concurrency Concurrency
	// Rate bounds how many calls of the tool each principal starts per period
	// (with Options.Rates, across the instances of a cluster).
	Rate Rate
	// Arguments is what the audit trail (Options.Audit) writes of a call's
	// arguments: their hash, their keys, or themselves; "": nothing.
	Arguments audit.Rule
}

// Concurrency bounds the calls of a tool that run at once: past a bound, a
// call waits for a place, in order of arrival, or is refused with the error
// concurrency_limit (-32023, HTTP 429).
type Concurrency struct {
	// Max bounds the calls of all principals together; PerPrincipal those of
	// each principal (the clients of a server without authentication are one
	// principal). 0: no bound.
	Max, PerPrincipal int
	// Queue is how many calls past a bound may wait for a place (0: refused at
	// once), each up to Wait.
	Queue int
	Wait  time.Duration
}

// bounded reports whether c bounds anything.
func (c Concurrency) bounded() bool { return c.Max > 0 || c.PerPrincipal > 0 }

// Rate bounds how many calls of a tool a principal starts: Calls per Per, as a
// token bucket that holds Calls and refills at Calls/Per (a burst of Calls,
// then one each Per/Calls). A call past it is refused with the error
// rate_limited (-32023, HTTP 429) saying when the next one is allowed.
// Calls 0: no bound.
type Rate struct {
	Calls int
	Per   time.Duration
}

// TaskMode says whether a tool's calls may become tasks.
type TaskMode int

const (
	NoTask       TaskMode = iota // never a task (the default)
	AsTask                       // a task for clients that declare the extension
	TaskRequired                 // only as a task: other clients get -32021
)

// policyTable is the policies in effect: Options.Tools and DefaultPolicy at
// first, then each SetPolicies'.
// A table's policies are shared by the calls that got them: never changed.
type policyTable struct {
	def   *Policy
	tools map[string]*Policy

	// adjusted holds what Options.PolicyOf last made of each tool's policy
	// when it changed it, shared by the calls it makes the same for (a
	// gateway's calls of a task tool); at most maxAdjusted tools, let go
	// when full.
	mu       sync.Mutex
	adjusted map[string]*Policy
}

// maxAdjusted bounds the tools whose adjusted policy a table keeps.
const maxAdjusted = 1024

// noPolicy is the policy of a call that is not a tools/call, and of a request
// run again after a restart (its limits applied at its first start).
var noPolicy Policy

// policy returns tool's policy: its own, else the default, as PolicyOf
// adjusts it to the tool as it is now. It is shared: a caller that changes
// it changes a copy.
func (s *Server) policy(tool string) *Policy {
	t := s.table.Load()
	p, ok := t.tools[tool]
	if !ok {
		p = t.def
	}
	if s.opts.PolicyOf == nil {
		return p
	}
	adjusted := s.opts.PolicyOf(tool, *p)
	if adjusted == *p {
		return p
	}
	return t.share(tool, adjusted)
}

// share returns the policy p that PolicyOf made for tool: the one kept when
// it is the same, else p, kept.
func (t *policyTable) share(tool string, p Policy) *Policy {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q := t.adjusted[tool]; q != nil && *q == p {
		return q
	}
	if t.adjusted == nil || len(t.adjusted) >= maxAdjusted {
		t.adjusted = make(map[string]*Policy)
	}
	t.adjusted[tool] = &p
	return &p
}

// Policy returns tool's policy in effect: what a call of it that starts now
// gets.
func (s *Server) Policy(tool string) Policy { return *s.policy(tool) }

// SetPolicies puts def and tools in effect in place of DefaultPolicy and
// Tools (a configuration reloaded): each call from now on gets its tool's
// policy from them; a call that runs keeps the one it started with. Whether
// the server offers Tasks stays as New found it, and the await tool keeps its
// own policy.
func (s *Server) SetPolicies(def Policy, tools map[string]Policy) {
	t := &policyTable{def: &def, tools: make(map[string]*Policy, len(tools)+1)}
	for name, p := range tools {
		t.tools[name] = &p
	}
	if s.awaitTool != "" {
		p := awaitPolicy
		t.tools[s.awaitTool] = &p
	}
	s.table.Store(t)
}

// policies returns the policies in effect, as SetPolicies takes them.
func (t *policyTable) policies() (def Policy, tools map[string]Policy) {
	tools = make(map[string]Policy, len(t.tools))
	for name, p := range t.tools {
		tools[name] = *p
	}
	return *t.def, tools
}
