package mcp_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
)

// gate holds every tool call before the core's middleware sees it, until
// open: a test orders a call's start against what its client sends.
type gate struct {
	once sync.Once
	ch   chan struct{}
}

func newGate() *gate { return &gate{ch: make(chan struct{})} }

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) middleware(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		<-g.ch
		return next(ctx, req)
	}
}

// A call cancelled by its client before the core applied its policy is never
// made a request of the engine: whatever its kind (plain with a quick window,
// resumable from its start, keyed, a task of either era) and whatever it does
// next (the tool asks its client at once, or runs on), nothing stays
// processing and no policy goes out.
func TestCancelAtOnce(t *testing.T) {
	const key = `"io.mcp-resume/key":"k7Xq2mP9vR4tY8wZ1nB6cD3fH5jL0sAx"`
	tasks := fmt.Sprintf(`{"elicitation":{},"extensions":{%q:{}}}`, spec.ExtensionTasks)
	resumableCaps := fmt.Sprintf(`{"elicitation":{},"extensions":{%q:{"extensions":[%q]}}}`, spec.ExtensionResumable, spec.ExtensionAck)
	for _, tc := range []struct {
		name   string
		opts   mcp.Options
		tool   string
		modern bool
		meta   string // members of the call's _meta (2025) or envelope extras (2026)
		caps   string
		task   bool // 2025: params.task
	}{
		{name: "2025 plain ask", tool: "ask"},
		{name: "2025 plain countdown", tool: "countdown"},
		{name: "2025 from its start ask", opts: mcp.Options{QuickCall: -1}, tool: "ask"},
		{name: "2025 from its start countdown", opts: mcp.Options{QuickCall: -1}, tool: "countdown"},
		{name: "2025 keyed ask", tool: "ask", meta: key},
		{name: "2025 task", opts: mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Always, Task: mcp.AsTask}}, tool: "ask", task: true},
		{name: "2026 plain ask", tool: "ask", modern: true, caps: `{"elicitation":{}}`},
		{name: "2026 resumable ask", tool: "ask", modern: true, caps: resumableCaps},
		{name: "2026 keyed countdown", tool: "countdown", modern: true, caps: resumableCaps, meta: key},
		{name: "2026 task", opts: mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Always, Task: mcp.AsTask}}, tool: "ask", modern: true, caps: tasks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGate()
				srv := demo.Server("test")
				srv.Use(g.middleware) // before the core's: outside it
				opts := tc.opts
				core, err := mcp.New(srv, &opts)
				if err != nil {
					t.Fatal(err)
				}
				c := e2etest.NewClient(t, serveCore(t, core)(t))
				args := `{"question":"now?"}`
				if tc.tool == "countdown" {
					args = `{"seconds":30,"steps":30}`
				}
				switch {
				case tc.modern:
					extra := []string{}
					if tc.meta != "" {
						extra = append(extra, tc.meta)
					}
					c.Modern(`"c"`, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tc.tool, args), tc.caps, extra...)
				default:
					c.Initialize(`{"resumableRequests":{"extensions":["io.mcp-resume/ack"]},"elicitation":{}}`)
					params := fmt.Sprintf(`"name":%q,"arguments":%s`, tc.tool, args)
					if tc.meta != "" {
						params += `,"_meta":{` + tc.meta + `}`
					}
					if tc.task {
						params += `,"task":{"ttl":60000}`
					}
					c.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{%s}}`, params)
				}
				synctest.Wait() // the call waits at the gate
				c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}`)
				synctest.Wait()
				g.open()
				synctest.Wait()
				time.Sleep(time.Minute) // past every window and timer
				synctest.Wait()
				if st := core.Engine().Stats(); st.Processing != 0 {
					t.Errorf("after the cancel: %+v, want nothing processing", st)
				}
				for _, m := range c.Quiet(`"q"`) {
					if m.Method == spec.MethodResumePolicy || m.Method == "elicitation/create" || string(m.ID) == `"c"` {
						t.Errorf("after the cancel the client got %s", m.Raw)
					}
				}
			})
		})
	}
}
