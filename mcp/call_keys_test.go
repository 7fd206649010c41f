package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
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

const callKey = "k3y-of-a-call_chosen-at-random-0123456789"

// countingServer has a tool "steps" that sends progress 1-3, one a second, and
// counts how often it runs.
func countingServer(runs *atomic.Int32) *server.MCPServer {
	s := demo.Server("test")
	s.AddTool(mcpgo.NewTool("steps"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		runs.Add(1)
		srv := server.ServerFromContext(ctx)
		for i := 1; i <= 3; i++ {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Second):
			}
			_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": i})
		}
		return mcpgo.NewToolResultText("done"), nil
	})
	return s
}

// holdFirst holds srv's first tool call before its tool runs until the
// returned channel is closed. Registered before mcp.New's own middleware, it
// runs first: the call is held with its key taken, not yet a request of the
// engine.
func holdFirst(srv *server.MCPServer) chan struct{} {
	gate := make(chan struct{})
	var first atomic.Bool
	srv.Use(func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			if first.CompareAndSwap(false, true) {
				<-gate
			}
			return next(ctx, req)
		}
	})
	return gate
}

const keyedCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"steps","_meta":{"progressToken":"p","io.mcp-resume/key":%q}}}`

// A call named with a key whose connection is lost, before or after its policy
// came, is found by its key: getStatus with the key as token answers, and the
// same tools/call sent again attaches to the running call (its policy again,
// then every message from the first, nothing twice) instead of running the tool
// a second time.
func TestCallKeySentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		core, err := mcp.New(countingServer(&runs), nil)
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		a := e2etest.NewClient(t, dial(t))
		init := a.Initialize(`{"resumableRequests":{}}`)
		if !strings.Contains(string(init.Raw), spec.ExtensionKey) {
			t.Fatalf("initialize does not advertise %s: %s", spec.ExtensionKey, init.Raw)
		}
		a.Send(keyedCall, callKey)
		if pol := e2etest.PolicyOf(t, a.Next()); pol.ResumeToken != callKey {
			t.Fatalf("the policy's token is not the call's key")
		}
		if m := a.Next(); m.Method != spec.MethodProgress || m.Seq() != 1 {
			t.Fatalf("first connection: %s, want progress 1", m.Raw)
		}
		a.Close() // lost with progress 1 in its buffers, say, and the policy

		b := e2etest.NewClient(t, dial(t))
		b.Initialize(`{"resumableRequests":{}}`)
		if st, err := b.GetStatus("9", "7", callKey); err != nil || st.Status != string(spec.StatusProcessing) {
			t.Fatalf("getStatus by key: %+v %v", st, err)
		}
		time.Sleep(time.Second) // progress 2 queued while detached
		sendKeyedAgain(t, b, &runs)
	})
}

// sendKeyedAgain sends keyedCall again on c and checks that it attached to the
// running call: the policy again, progress 1, 2 and 3 (the first from the
// replay window), the result, and one run of the tool.
func sendKeyedAgain(t *testing.T, c *e2etest.Client, runs *atomic.Int32) {
	t.Helper()
	c.Send(keyedCall, callKey)
	if pol := e2etest.PolicyOf(t, c.Next()); pol.ResumeToken != callKey {
		t.Fatalf("the policy sent again does not carry the key")
	}
	resp, before := c.Response("7")
	var progress []uint64
	for _, m := range before {
		if m.Method == spec.MethodProgress {
			progress = append(progress, m.Seq())
		}
	}
	if len(progress) != 3 || progress[0] != 1 || progress[2] != 3 || resp.Error != nil {
		t.Fatalf("sent again: progress seqs %v, response %s; want 1, 2, 3 and the result", progress, resp.Raw)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
}

// A key that is not one, or that names another request, is refused with a
// reason, and the tool does not run.
func TestCallKeyRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		core, err := mcp.New(countingServer(&runs), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{"resumableRequests":{}}`)
		c.Send(keyedCall, "short")
		if m, _ := c.Response("7"); m.Error == nil || m.Error.Reason != spec.ReasonInvalidKey {
			t.Fatalf("a short key: %s, want invalid_key", m.Raw)
		}
		c.Send(keyedCall, callKey)
		e2etest.PolicyOf(t, c.Next())
		c.Send(strings.Replace(keyedCall, `"id":7`, `"id":8`, 1), callKey)
		if m, _ := c.Response("8"); m.Error == nil || m.Error.Reason != spec.ReasonKeyInUse {
			t.Fatalf("the key of another call: %s, want key_in_use", m.Raw)
		}
		c.Response("7")
		if n := runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times, want once", n)
		}
	})
}

// A keyed call of a tool that is never resumable runs once: sent again while it
// runs, it is refused not_resumable; once its connection is gone (which cancels
// it), cancelled.
func TestCallKeyNotResumable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 2)
		core, err := mcp.New(blockServer(causes), &mcp.Options{Tools: map[string]mcp.Policy{"block": {Mode: mcp.Never}}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		a := e2etest.NewClient(t, dial(t))
		a.Initialize(`{"resumableRequests":{}}`)
		const call = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"block","_meta":{"io.mcp-resume/key":%q}}}`
		a.Send(call, callKey)
		synctest.Wait() // running, plainly

		b := e2etest.NewClient(t, dial(t))
		b.Initialize(`{"resumableRequests":{}}`)
		b.Send(call, callKey)
		if m, _ := b.Response("7"); m.Error == nil || m.Error.Reason != spec.ReasonNotResumable {
			t.Fatalf("sent again while it runs plainly: %s, want not_resumable", m.Raw)
		}
		a.Close()
		<-causes // cancelled with its connection
		synctest.Wait()
		b.Send(call, callKey)
		if m, _ := b.Response("7"); m.Error == nil || m.Error.Reason != spec.ReasonCancelled {
			t.Fatalf("sent again after its connection was lost: %s, want cancelled", m.Raw)
		}
		synctest.Wait()
		if n := core.Calls(); n != 0 {
			t.Fatalf("%d calls running: the tool ran a second time", n)
		}
	})
}

// A keyed call sent again while the first copy has not started yet (its
// connection lost before its tool ran, so before it became a request) waits
// for that copy to start and attaches to it: one run, every message once.
func TestCallKeySentBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		srv := countingServer(&runs)
		gate := holdFirst(srv)
		core, err := mcp.New(srv, nil)
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		a := e2etest.NewClient(t, dial(t))
		a.Initialize(`{"resumableRequests":{}}`)
		a.Send(keyedCall, callKey)
		synctest.Wait()
		a.Close()
		synctest.Wait()

		b := e2etest.NewClient(t, dial(t))
		b.Initialize(`{"resumableRequests":{}}`)
		b.Send(keyedCall, callKey)
		synctest.Wait()
		close(gate)
		if pol := e2etest.PolicyOf(t, b.Next()); pol.ResumeToken != callKey {
			t.Fatalf("the policy does not carry the key")
		}
		resp, before := b.Response("7")
		var progress []uint64
		for _, m := range before {
			if m.Method == spec.MethodProgress {
				progress = append(progress, m.Seq())
			}
		}
		if len(progress) != 3 || progress[0] != 1 || progress[2] != 3 || resp.Error != nil {
			t.Fatalf("progress seqs %v, response %s; want 1, 2, 3 and the result", progress, resp.Raw)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times, want once", n)
		}
	})
}

const keyedTask = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"steps","_meta":{"progressToken":"p","io.mcp-resume/key":%q},"task":{}}}`

// A keyed task call sent again (its client lost the answer that named the
// task) is answered with the task its key made, in its status now, never a
// second task: sent again while the first copy is held before its tool starts,
// while the task runs, and once it has completed.
func TestCallKeyTaskSentAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		srv := countingServer(&runs)
		gate := holdFirst(srv)
		core, err := mcp.New(srv, &mcp.Options{Tools: map[string]mcp.Policy{"steps": {Mode: mcp.Always, Task: mcp.AsTask}}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		created := func(c *e2etest.Client) (id, status string) {
			t.Helper()
			m, _ := c.Response("7")
			var res struct {
				Task struct{ TaskID, Status string }
			}
			if err := json.Unmarshal(m.Result, &res); err != nil || res.Task.TaskID == "" {
				t.Fatalf("CreateTaskResult: %s", m.Raw)
			}
			return res.Task.TaskID, res.Task.Status
		}

		a := e2etest.NewClient(t, dial(t))
		a.Initialize(`{}`)
		a.Send(keyedTask, callKey)
		synctest.Wait()
		a.Close() // lost before its tool started: no answer came

		b := e2etest.NewClient(t, dial(t))
		b.Initialize(`{}`)
		b.Send(keyedTask, callKey)
		synctest.Wait()
		close(gate)
		task, status := created(b)
		if status != "working" {
			t.Fatalf("the task sent again while held: %s, want working", status)
		}
		time.Sleep(1500 * time.Millisecond)
		b.Send(keyedTask, callKey)
		if again, status := created(b); again != task || status != "working" {
			t.Fatalf("sent again while it runs: %s %s, want the same task, working", again, status)
		}
		b.Send(`{"jsonrpc":"2.0","id":"r","method":"tasks/result","params":{"taskId":%q}}`, task)
		if resp, _ := b.Response(`"r"`); e2etest.Text(resp) != "done" {
			t.Fatalf("tasks/result: %s", resp.Raw)
		}
		b.Send(keyedTask, callKey)
		if again, status := created(b); again != task || status != "completed" {
			t.Fatalf("sent again once completed: %s %s, want the same task, completed", again, status)
		}
		if n := runs.Load(); n != 1 {
			t.Fatalf("the tool ran %d times, want once", n)
		}
	})
}
