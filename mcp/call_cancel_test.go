package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// A cancel that overtakes its call (on Streamable HTTP each is a POST of its
// own, and the cancel's may be handled first) ends the call as it comes: it
// is born cancelled, never runs, and gets no answer. A keyed call whose
// request runs already (its first copy) cancels that request; a task is
// never made.
func TestCancelBeforeItsCall(t *testing.T) {
	const key = `"io.mcp-resume/key":"k7Xq2mP9vR4tY8wZ1nB6cD3fH5jL0sAy"`
	for _, tc := range []struct {
		name, caps, params string
	}{
		{"plain", `{}`, `"name":"countdown","arguments":{"seconds":5,"steps":1}`},
		{"resumable", `{"resumableRequests":{}}`, `"name":"countdown","arguments":{"seconds":5,"steps":1}`},
		{"task", `{"tasks":{}}`, `"name":"countdown","arguments":{"seconds":5,"steps":1},"task":{"ttl":60000}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var runs atomic.Int32
				srv := demo.Server("test")
				srv.Use(countRuns(&runs, "countdown"))
				core, err := mcp.New(srv, &mcp.Options{Tools: demo.Policies()})
				if err != nil {
					t.Fatal(err)
				}
				c := e2etest.NewClient(t, serveCore(t, core)(t))
				c.Initialize(tc.caps)
				c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
				c.Send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{%s}}`, tc.params)
				time.Sleep(10 * time.Second) // long past the countdown's end
				for _, m := range c.Quiet(`"after"`) {
					if string(m.ID) == "7" {
						t.Fatalf("the cancelled call answered: %s", m.Raw)
					}
				}
				if n := runs.Load(); n != 0 {
					t.Errorf("the cancelled call's tool ran %d times", n)
				}
				if st := core.Engine().Stats(); st.Processing+st.Completed+st.Failed != 0 {
					t.Errorf("the engine holds %+v after a call born cancelled", st)
				}
			})
		})
	}
	t.Run("keyed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			core, err := mcp.New(demo.Server("test"), nil)
			if err != nil {
				t.Fatal(err)
			}
			dial := serveCore(t, core)
			first := e2etest.NewClient(t, dial(t))
			first.Initialize(`{"resumableRequests":{}}`)
			first.Send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":2},"_meta":{%s}}}`, key)
			time.Sleep(time.Second) // a request now, keyed
			again := e2etest.NewClient(t, dial(t))
			again.Initialize(`{"resumableRequests":{}}`)
			again.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
			again.Send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":2},"_meta":{%s}}}`, key)
			synctest.Wait()
			if st := core.Engine().Stats(); st.Processing != 0 {
				t.Fatalf("the keyed call's request runs on after its copy came cancelled: %+v", st)
			}
		})
	})
}

// A cancel that comes as the call is deferred (Options.AnswerWithin, the
// same instant) leaves no deferred answer out after the cancel was taken:
// the call ends cancelled either way, and an await says so.
func TestCancelAtTheDeferral(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{}`)
		c.Send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":2}}}`)
		time.Sleep(10 * time.Second)
		c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
		synctest.Wait()
		ms := c.Quiet(`"after"`)
		for _, m := range ms {
			if string(m.ID) != "7" {
				continue
			}
			d, ok := deferredOf(t, m)
			if !ok {
				t.Fatalf("the cancelled call answered: %s", m.Raw)
			}
			c.Send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":%q,"arguments":{"handle":%q}}}`, d.Tool, d.Arguments.Handle)
			if resp, _ := c.Response(`8`); !strings.Contains(string(resp.Raw), `"`+string(spec.ReasonCancelled)+`"`) {
				t.Fatalf("the await of a call cancelled as it was deferred: %s, want cancelled", resp.Raw)
			}
		}
		if st := core.Engine().Stats(); st.Processing != 0 {
			t.Fatalf("the call runs on after its cancel: %+v", st)
		}
	})
}
