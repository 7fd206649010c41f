package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
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
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

func TestEndToEndPipeDetachTools(t *testing.T) {
	core, dial := serve(t, &mcp.Options{Tools: demo.Policies(), DetachTools: true})
	e2etest.Run(t, e2etest.Harness{Dial: dial, Reconnect: true, Calls: core.Calls})
}

// dispatching reports whether a goroutine runs (or waits) inside mcp-go's
// dispatch of a message.
func dispatching() bool {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Contains(string(buf), "mcp-go/server.(*MCPServer).HandleMessage")
}

// With DetachTools, a request that lost its client keeps its tool's goroutine
// alone (no goroutine waits in mcp-go's dispatch), and its tool's result, or
// its panic, still passes through mcp-go once the tool returns: the
// middleware registered before the core's sees the result (its start twice,
// as Options.DetachTools says), mcp-go's after-hook sees it, and mcp-go's
// recovery takes the panic; the tool runs once. The client that resumes gets
// what mcp-go answered.
func TestDetachToolsKeepsMCPGoSemantics(t *testing.T) {
	var starts, ends, after, ran atomic.Int32
	var mu sync.Mutex
	var ended, afterSaw []string
	hooks := &server.Hooks{}
	hooks.AddAfterCallTool(func(_ context.Context, _ any, _ *mcpgo.CallToolRequest, result any) {
		after.Add(1)
		if r, ok := result.(*mcpgo.CallToolResult); ok && len(r.Content) > 0 {
			if tc, ok := r.Content[0].(mcpgo.TextContent); ok {
				mu.Lock()
				afterSaw = append(afterSaw, tc.Text)
				mu.Unlock()
			}
		}
	})
	srv := server.NewMCPServer("t", "1", server.WithToolCapabilities(false), server.WithRecovery(), server.WithHooks(hooks))
	srv.Use(func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			starts.Add(1)
			res, err := next(ctx, req)
			ends.Add(1)
			text := "error"
			if err == nil && res != nil && len(res.Content) > 0 {
				if tc, ok := res.Content[0].(mcpgo.TextContent); ok {
					text = tc.Text
				}
			}
			mu.Lock()
			ended = append(ended, text)
			mu.Unlock()
			return res, err
		}
	})
	release := make(chan struct{})
	srv.AddTool(mcpgo.NewTool("wait"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		ran.Add(1)
		<-release
		if req.GetString("then", "") == "panic" {
			panic("the tool broke")
		}
		return mcpgo.NewToolResultText("done"), nil
	})
	core, err := mcp.New(srv, &mcp.Options{DetachTools: true, QuickCall: -1})
	if err != nil {
		t.Fatal(err)
	}
	dial := serveCore(t, core)

	c := e2etest.NewClient(t, dial(t))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait","arguments":{}}}`)
	done := e2etest.PolicyOf(t, c.Next())
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait","arguments":{"then":"panic"}}}`)
	broke := e2etest.PolicyOf(t, c.Next())
	if !dispatching() {
		t.Fatal("no goroutine in mcp-go's dispatch while the calls' client is there")
	}
	c.Close() // the requests lose their client
	poll.Until(t, 10*time.Second, "the workers to leave mcp-go's dispatch", func() bool { return !dispatching() })
	if ran.Load() != 2 {
		t.Fatalf("the tools ran %d times before their release, want 2", ran.Load())
	}
	close(release)

	r := e2etest.NewClient(t, dial(t))
	r.Initialize(`{"resumableRequests":{}}`)
	r.Resume("1", done.ResumeToken)
	if m, _ := r.Response("1"); e2etest.Text(m) != "done" {
		t.Fatalf("the detached call's result: %s", m.Raw)
	}
	r.Resume("2", broke.ResumeToken)
	if m, _ := r.Response("2"); m.Error == nil && !strings.Contains(string(m.Raw), "isError") {
		t.Fatalf("the detached call whose tool panicked: %s, want mcp-go's recovery's error", m.Raw)
	}
	mu.Lock()
	defer mu.Unlock()
	// The panic passes the outer middleware by (as it does without
	// DetachTools): it ends, and mcp-go's after-hook runs, for the call that
	// returned.
	if ran.Load() != 2 || starts.Load() != 4 || ends.Load() != 1 || after.Load() != 1 {
		t.Errorf("tools ran %d, the outer middleware started %d and ended %d, the after-hook ran %d; want 2, 4 (each call twice), 1, 1",
			ran.Load(), starts.Load(), ends.Load(), after.Load())
	}
	if !strings.Contains(strings.Join(ended, ","), "done") || !strings.Contains(strings.Join(afterSaw, ","), "done") {
		t.Errorf("the outer middleware saw %q, the after-hook %q: want the tool's result", ended, afterSaw)
	}
}

// With DetachTools, mcp-go asks a 2025 client the questions of a tool's
// input_required answer on its own context for the call, which does not end
// with the call: a question left unanswered ends when the call is cancelled,
// and the call with it (it waited for good, and Close with it).
func TestDetachToolsQuestionEndsWithCall(t *testing.T) {
	srv := demo.Server("test")
	srv.AddTool(mcpgo.NewTool("name"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		schema := json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)
		return &mcpgo.CallToolResult{
			Result: mcpgo.Result{ResultType: mcpgo.ResultTypeInputRequired},
			MultiRoundTripResult: mcpgo.MultiRoundTripResult{InputRequests: mcpgo.InputRequests{
				"name": mcpgo.NewElicitationInputRequest(mcpgo.ElicitationParams{Message: "Your name?", RequestedSchema: schema}),
			}},
		}, nil
	})
	core, err := mcp.New(srv, &mcp.Options{DetachTools: true})
	if err != nil {
		t.Fatal(err)
	}
	c := e2etest.NewClient(t, serveCore(t, core)(t))
	c.Initialize(`{"resumableRequests":{},"elicitation":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"name","arguments":{}}}`)
	c.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" }) // left unanswered
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	poll.Until(t, 10*time.Second, "the cancelled call's end", func() bool { return core.Calls() == 0 })
}

// A tool that answers later (mcp.Later) holds no goroutine while its call
// waits: neither its own nor, once its request has no client, the dispatch's.
// Its completion answers a client that resumes the detached request, and an
// attached one; a call cancelled meanwhile ends with its completion; Close
// waits for a completion due; without DetachTools, Later is refused and the
// tool answers as it always did.
func TestLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type due struct {
			n        int
			complete func(*mcpgo.CallToolResult, error)
		}
		dues := make(chan due, 64)
		srv := demo.Server("test")
		srv.AddTool(mcpgo.NewTool("later", mcpgo.WithNumber("n")), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			complete, ok := mcp.Later(ctx)
			if !ok {
				return mcpgo.NewToolResultText("at once"), nil
			}
			context.AfterFunc(ctx, func() { complete(nil, ctx.Err()) }) // cancelled: ended with its context's error
			dues <- due{req.GetInt("n", 0), complete}
			return nil, nil // ignored
		})
		core, err := mcp.New(srv, &mcp.Options{DetachTools: true})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		synctest.Wait()
		before := runtime.NumGoroutine()

		const n = 20
		a := e2etest.NewClient(t, dial(t))
		a.Initialize(`{"resumableRequests":{}}`)
		for i := 1; i <= n; i++ {
			a.Send(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"later","arguments":{"n":%d}}}`, i, i)
		}
		tokens := map[string]string{}
		a.Until(func(m e2etest.Msg) bool {
			if m.Method == "notifications/requests/resumePolicy" {
				p := e2etest.PolicyOf(t, m)
				tokens[string(p.RequestID)] = p.ResumeToken
			}
			return len(tokens) == n
		})
		a.Close() // the requests detach
		// The server's workers that dispatched the calls idle for 10 s before
		// they go, and how many the calls started depends on the machine's
		// pace: past that, what is left is what the calls hold.
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if got := runtime.NumGoroutine() - before; got >= n/2 {
			t.Fatalf("%d goroutines for %d detached calls whose tools answer later, want none a call", got, n)
		}
		if core.Calls() != n {
			t.Fatalf("%d calls running, want %d", core.Calls(), n)
		}
		completes := map[int]func(*mcpgo.CallToolResult, error){}
		for range n {
			d := <-dues
			completes[d.n] = d.complete
		}
		for i, complete := range completes {
			complete(mcpgo.NewToolResultText(fmt.Sprint("done ", i)), nil)
			complete(mcpgo.NewToolResultText("twice"), nil) // ignored
		}
		synctest.Wait()

		b := e2etest.NewClient(t, dial(t))
		b.Initialize(`{"resumableRequests":{}}`)
		b.Resume("3", tokens["3"])
		if resp, _ := b.Response("3"); e2etest.Text(resp) != "done 3" {
			t.Fatalf("resumed after its tool answered later: %s", resp.Raw)
		}
		// Attached: answered where the client waits.
		b.Send(`{"jsonrpc":"2.0","id":"att","method":"tools/call","params":{"name":"later","arguments":{"n":100}}}`)
		d := <-dues
		d.complete(mcpgo.NewToolResultText("attached"), nil)
		if resp, _ := b.Response(`"att"`); e2etest.Text(resp) != "attached" {
			t.Fatalf("an attached call answered later: %s", resp.Raw)
		}
		// Cancelled: the completion its context's end makes ends it.
		b.Send(`{"jsonrpc":"2.0","id":"gone","method":"tools/call","params":{"name":"later","arguments":{"n":101}}}`)
		<-dues
		b.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"gone"}}`)
		synctest.Wait()
		if c := core.Calls(); c != 0 {
			t.Fatalf("%d calls running after every one was answered or cancelled", c)
		}

		// Close waits for a completion due.
		b.Send(`{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"later","arguments":{"n":102}}}`)
		d = <-dues
		closed := make(chan struct{})
		go func() {
			core.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed: // the call was cancelled by Close, and its AfterFunc completed it
		default:
			d.complete(nil, context.Canceled)
			<-closed
		}

		plain, err := mcp.New(srv, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, plain)(t))
		c.Initialize(`{"resumableRequests":{}}`)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"later"}}`)
		if resp, _ := c.Response("1"); e2etest.Text(resp) != "at once" {
			t.Fatalf("without DetachTools: %s, want the tool's own answer", resp.Raw)
		}
	})
}

// While the process is tight of memory (resume.Options.MemoryTight), the
// worker that dispatched a call leaves once the call is a request, even with
// its client attached: the call then holds its tool's goroutine alone, and
// its result still reaches the client that waits.
func TestTightWorkerLeaves(t *testing.T) {
	for _, tight := range []bool{false, true} {
		t.Run(fmt.Sprint("tight=", tight), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				release := make(chan struct{})
				srv := demo.Server("test")
				srv.AddTool(mcpgo.NewTool("wait"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
					<-release
					return mcpgo.NewToolResultText("done"), nil
				})
				core, err := mcp.New(srv, &mcp.Options{DetachTools: true, QuickCall: -1,
					Engine: &resume.Options{MemoryTight: func() bool { return tight }}})
				if err != nil {
					t.Fatal(err)
				}
				defer core.Close()
				dial := serveCore(t, core)
				synctest.Wait()
				before := runtime.NumGoroutine()

				const n = 20
				c := e2etest.NewClient(t, dial(t))
				c.Initialize(`{"resumableRequests":{}}`)
				for i := 1; i <= n; i++ {
					c.Send(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"wait"}}`, i)
				}
				policies := 0
				c.Until(func(m e2etest.Msg) bool {
					if m.Method == "notifications/requests/resumePolicy" {
						policies++
					}
					return policies == n
				})
				synctest.Wait()
				got := runtime.NumGoroutine() - before
				if want := 3 * n / 2; tight && got >= want || !tight && got < want {
					t.Fatalf("%d goroutines for %d attached requests (tight %v)", got, n, tight)
				}
				close(release)
				done := 0
				c.Until(func(m e2etest.Msg) bool {
					if m.Method == "" && m.ID != nil {
						if e2etest.Text(m) != "done" {
							t.Fatalf("answer: %s", m.Raw)
						}
						done++
					}
					return done == n
				})
			})
		})
	}
}
