package mcp_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// operations keeps what Options.OnOperation is told.
type operations struct {
	mu  sync.Mutex
	ops []mcp.Operation
}

func (o *operations) add(op mcp.Operation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, op)
}

func (o *operations) got() []mcp.Operation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ops)
}

// Options.OnOperation, without tracing: one Operation per request as it ends,
// with the conventions' attributes, bounded whatever the client sends (a
// method MCP does not have is _OTHER; a tool the server does not have is not
// named); a resumable call dropped and resumed is one operation, as long as
// the request lasted, once its result reached the new session.
func TestOperations(t *testing.T) {
	var rec operations
	core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies(), OnOperation: rec.add})
	if err != nil {
		t.Fatal(err)
	}
	dial := serveSessions(t, core)
	stdio := &mcp.SessionOptions{Transport: mcp.TransportStdio}

	a := e2etest.NewClient(t, dial(t, stdio))
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	a.Response(`1`)
	a.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":1,"fail":true}}}`)
	a.Response(`2`)
	a.Send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"no-such-tool-3f9a","arguments":{}}}`)
	a.Response(`3`)
	a.Send(`{"jsonrpc":"2.0","id":4,"method":"made/up-1b2c","params":{}}`)
	a.Response(`4`)
	a.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.5,"steps":5},"_meta":{"progressToken":"p"}}}`)
	pol := e2etest.PolicyOf(t, a.Next())
	a.Until(func(m e2etest.Msg) bool { return e2etest.Progress(m) == 2 })
	a.Close()
	b := e2etest.NewClient(t, dial(t, nil))
	b.Initialize(`{"resumableRequests":{}}`)
	b.Resume(`5`, pol.ResumeToken)
	b.Response(`5`)

	var ops []mcp.Operation
	poll.Until(t, 10*time.Second, "an operation per request (two initialize, six more)", func() bool {
		ops = rec.got()
		return len(ops) == 8
	})
	byTool := map[string][]mcp.Operation{}
	for _, op := range ops {
		byTool[op.Method+" "+op.Tool] = append(byTool[op.Method+" "+op.Tool], op)
	}
	want := []struct {
		key, errorType, transport string
	}{
		{"initialize ", "", "pipe"},
		{"tools/call echo", "", "pipe"},
		{"requests/resume ", "", ""},
	}
	for _, w := range want {
		got := byTool[w.key]
		if len(got) == 0 || got[0].ErrorType != w.errorType || got[0].Transport != w.transport || got[0].ProtocolVersion != "2025-06-18" {
			t.Errorf("operations %q: %+v; want error.type %q, transport %q, version 2025-06-18", w.key, got, w.errorType, w.transport)
		}
	}
	if cd := byTool["tools/call countdown"]; len(cd) != 2 {
		t.Errorf("countdown operations %+v, want the failed one and the resumed one", cd)
	} else {
		slices.SortFunc(cd, func(x, y mcp.Operation) int { return int(x.Duration - y.Duration) })
		if cd[0].ErrorType != "tool_error" {
			t.Errorf("the failed countdown: %+v, want error.type tool_error", cd[0])
		}
		if cd[1].ErrorType != "" || cd[1].Duration < 500*time.Millisecond {
			t.Errorf("the resumed countdown: %+v; want one operation of the request's whole life (at least 0.5 s)", cd[1])
		}
	}
	if op := byTool["tools/call "]; len(op) != 1 {
		t.Errorf("a call of a tool the server does not have: %+v; want one operation naming no tool", op)
	}
	if op := byTool["_OTHER "]; len(op) != 1 {
		t.Errorf("a method MCP does not have: %+v; want one _OTHER operation", op)
	}
	for _, op := range ops {
		if op.Tool == "no-such-tool-3f9a" || op.Method == "made/up-1b2c" {
			t.Errorf("an operation names what the client made up: %+v", op)
		}
	}
}
