package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
)

// askTool asks the client for its roots (2025-era API) and reports them, or the
// error the question ended with.
func rootsServer(ended chan<- error) *server.MCPServer {
	s := demo.Server("test")
	s.AddTool(mcpgo.NewTool("roots"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		res, err := server.ServerFromContext(ctx).RequestRoots(ctx, mcpgo.ListRootsRequest{})
		if ended != nil {
			ended <- err
		}
		if err != nil {
			return nil, err
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return mcpgo.NewToolResultText("roots: " + strings.Join(uris, " ")), nil
	})
	return s
}

func inputKey(t *testing.T, m e2etest.Msg) (key, state string) {
	t.Helper()
	var ir e2etest.InputRequired
	if json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 {
		t.Fatalf("want input_required with one input request, got %s", m.Raw)
	}
	for k := range ir.InputRequests {
		key = k
	}
	return key, ir.RequestState
}

// A 2026 client answers roots/list through a retry, from another principal's
// session the state is refused as unknown, and a tool whose client never
// retries is ended when maxWait has passed: the waiting handler is bounded in
// time.
func TestModernRootsRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ended := make(chan error, 4)
		core, err := mcp.New(rootsServer(ended), &mcp.Options{Engine: &resume.Options{MaxWait: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		alice, eve := dial(&mcp.SessionOptions{Principal: "alice"}), dial(&mcp.SessionOptions{Principal: "eve"})
		const caps = `{"roots":{}}`

		alice.Modern(`1`, "tools/call", `"name":"roots","arguments":{}`, caps)
		m, _ := alice.Response(`1`)
		key, state := inputKey(t, m)
		eve.Modern(`2`, "tools/call", fmt.Sprintf(`"name":"roots","arguments":{},"inputResponses":{%q:{"roots":[]}},"requestState":%q`, key, state), caps)
		if m, _ := eve.Response(`2`); m.Error == nil || m.Error.Reason != spec.ReasonInvalidState {
			t.Fatalf("another principal's retry: %s, want %s", m.Raw, spec.ReasonInvalidState)
		}
		alice.Modern(`3`, "tools/call", fmt.Sprintf(`"name":"roots","arguments":{},"inputResponses":{%q:{"roots":[{"uri":"file:///a"},{"uri":"file:///b"}]}},"requestState":%q`, key, state), caps)
		if m, _ := alice.Response(`3`); e2etest.Text(m) != "roots: file:///a file:///b" {
			t.Fatalf("result %s", m.Raw)
		}
		if err := <-ended; err != nil {
			t.Fatalf("the answered question ended with %v", err)
		}

		// Nobody retries: maxWait after the round, the tool's question ends.
		alice.Modern(`4`, "tools/call", `"name":"roots","arguments":{}`, caps)
		m, _ = alice.Response(`4`)
		_, state = inputKey(t, m)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		select {
		case err := <-ended:
			t.Fatalf("the question ended before maxWait: %v", err)
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if err := <-ended; err == nil {
			t.Fatal("the question ended without an error after maxWait")
		}
		alice.Modern(`5`, "tools/call", fmt.Sprintf(`"name":"roots","arguments":{},"requestState":%q`, state), caps)
		if m, _ := alice.Response(`5`); m.Error == nil || m.Error.Reason != spec.ReasonInvalidState {
			t.Fatalf("a retry after maxWait: %s, want %s", m.Raw, spec.ReasonInvalidState)
		}
	})
}

// subscriptions/listen: the acknowledgement first, then only the list changes the
// filter asked for, each tagged with the listen's id; notifications/cancelled
// ends it. Without a listen, a 2026 client on the same connection gets none.
func TestModernListen(t *testing.T) {
	s := demo.Server("test")
	server.WithToolCapabilities(true)(s)
	core, err := mcp.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	dial := serveCore(t, core)
	c := e2etest.NewClient(t, dial(t))
	c.Modern(`"tools"`, spec.MethodSubscriptionsListen, `"notifications":{"toolsListChanged":true,"promptsListChanged":true}`, `{}`)
	ack := c.Next()
	if ack.Method != "notifications/subscriptions/acknowledged" || !strings.Contains(string(ack.Params), `"`+spec.MetaSubscriptionID+`":"tools"`) {
		t.Fatalf("first message %s, want the acknowledgement tagged with the listen's id", ack.Raw)
	}
	s.AddTool(mcpgo.NewTool("late"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) { return nil, nil })
	n := c.Next()
	if n.Method != "notifications/tools/list_changed" || !strings.Contains(string(n.Params), `"`+spec.MetaSubscriptionID+`":"tools"`) {
		t.Fatalf("got %s, want a tagged tools/list_changed", n.Raw)
	}
	// The cancel is handled before the next message is read: once the echo is
	// answered, the listen has ended, and a list change reaches nobody.
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"tools"}}`)
	c.Modern(`"ok"`, "tools/call", `"name":"echo","arguments":{"text":"hi"}`, `{}`)
	if resp, before := c.Response(`"ok"`); e2etest.Text(resp) != "hi" || len(before) > 0 {
		t.Fatalf("echo: %s after %d messages", resp.Raw, len(before))
	}
	s.AddTool(mcpgo.NewTool("later"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) { return nil, nil })
	c.Modern(`"ok2"`, "tools/call", `"name":"echo","arguments":{"text":"hi"}`, `{}`)
	if _, before := c.Response(`"ok2"`); len(before) > 0 {
		t.Fatalf("after the listen ended: %s", before[0].Raw)
	}
}

// Tasks are bound to their principal and to time: another principal's task id is
// answered exactly as an unknown one, and a task lives for its ttl
// (Options.TaskTTL), polled or not (maxWait does not apply to it), reported the
// same on every read; then it is unknown.
func TestTaskPrincipalAndExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies(), TaskTTL: 3 * time.Minute, Engine: &resume.Options{MaxWait: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		alice, eve := dial(&mcp.SessionOptions{Principal: "alice"}), dial(&mcp.SessionOptions{Principal: "eve"})
		ext := fmt.Sprintf(`{"extensions":{%q:{}}}`, spec.ExtensionTasks)
		alice.Modern(`1`, "tools/call", `"name":"countdown","arguments":{"seconds":600,"steps":2}`, ext)
		m, _ := alice.Response(`1`)
		var created struct {
			TaskID string
			TTLMs  int64
		}
		if err := json.Unmarshal(m.Result, &created); err != nil || created.TaskID == "" || created.TTLMs != 180000 {
			t.Fatalf("no task with a ttl of 3 minutes: %s", m.Raw)
		}
		get := func(c *e2etest.Client, id, taskID string) e2etest.Msg {
			c.Modern(id, spec.MethodTasksGet, fmt.Sprintf(`"taskId":%q`, taskID), ext)
			m, _ := c.Response(id)
			return m
		}
		foreign, unknown := get(eve, `2`, created.TaskID), get(eve, `3`, "tk1.eyJpIjoxLCJ0IjoieCJ9")
		if foreign.Error == nil || unknown.Error == nil || foreign.Error.Error() != unknown.Error.Error() {
			t.Fatalf("another principal's task: %s; an unknown one: %s; want the same error", foreign.Raw, unknown.Raw)
		}
		// Left alone past maxWait, it lives on; its ttl reads the same.
		time.Sleep(179 * time.Second)
		synctest.Wait()
		if m := get(alice, `"p"`, created.TaskID); m.Error != nil || !strings.Contains(string(m.Result), `"working"`) || !strings.Contains(string(m.Result), `"ttlMs":180000`) {
			t.Fatalf("task before its ttl: %s", m.Raw)
		}
		// At its ttl, it ends.
		time.Sleep(time.Second)
		synctest.Wait()
		if m := get(alice, `4`, created.TaskID); m.Error == nil || m.Error.Reason != spec.ReasonUnknownTask {
			t.Fatalf("task after its ttl: %s, want unknown_task", m.Raw)
		}
	})
}

// FuzzTaskID: whatever a client puts in taskId, tasks/get answers -32602 (or
// the task), never anything else, and the connection goes on.
func FuzzTaskID(f *testing.F) {
	for _, s := range []string{"", "tk1.", "tk1.eyJpIjoxLCJ0IjoieCJ9", "tk1.!!", "tk1.eyJpIjpudWxsfQ", "tk1.eyJpIjoiYSIsInQiOiJ4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHgiLCJjIjotMX0", "x"} {
		f.Add(s)
	}
	core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies(), TokenFailureBurst: -1})
	if err != nil {
		f.Fatal(err)
	}
	dial := serveCore(f, core)
	ext := fmt.Sprintf(`{"extensions":{%q:{}}}`, spec.ExtensionTasks)
	f.Fuzz(func(t *testing.T, id string) {
		c := e2etest.NewClient(t, dial(t))
		b, _ := json.Marshal(id)
		c.Modern(`"f"`, spec.MethodTasksGet, `"taskId":`+string(b), ext)
		m, _ := c.Response(`"f"`)
		if m.Error == nil || m.Error.Code != spec.CodeInvalidParams {
			t.Fatalf("taskId %q: %s, want -32602", id, m.Raw)
		}
	})
}

// The 2025-11-25 form: a tasks/result waiting on one connection keeps the task
// while another connection reads its state with tasks/get: the question the
// task asks reaches the waiting tasks/result, whose answer completes the task
// under the tasks/result's id.
func TestTaskResultWhileGet(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: demo.Policies()})
	if err != nil {
		t.Fatal(err)
	}
	dial := serveCore(t, core)
	a, b := e2etest.NewClient(t, dial(t)), e2etest.NewClient(t, dial(t))
	a.Initialize(`{"elicitation":{}}`)
	b.Initialize(`{}`)
	a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"question":"Name?"},"task":{"ttl":60000}}}`)
	m, _ := a.Response(`1`)
	var created struct {
		Task struct{ TaskID string } `json:"task"`
	}
	if err := json.Unmarshal(m.Result, &created); err != nil || created.Task.TaskID == "" {
		t.Fatalf("CreateTaskResult: %s", m.Raw)
	}
	id := created.Task.TaskID
	a.Send(`{"jsonrpc":"2.0","id":"r","method":"tasks/result","params":{"taskId":%q}}`, id)
	var statuses []string // notifications/tasks/status on the creating connection
	status := func(m e2etest.Msg) {
		var p struct{ Status string }
		if m.Method == "notifications/tasks/status" && json.Unmarshal(m.Params, &p) == nil {
			statuses = append(statuses, p.Status)
		}
	}
	msgs := a.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" })
	for _, m := range msgs {
		status(m)
	}
	q := msgs[len(msgs)-1]
	if !strings.Contains(string(q.Params), `"io.modelcontextprotocol/related-task":{"taskId":"`+id+`"}`) {
		t.Errorf("the task's question does not name its task: %s", q.Raw)
	}
	b.Send(`{"jsonrpc":"2.0","id":"g","method":"tasks/get","params":{"taskId":%q}}`, id)
	if g, _ := b.Response(`"g"`); !strings.Contains(string(g.Result), `"input_required"`) {
		t.Fatalf("tasks/get meanwhile: %s", g.Raw)
	}
	a.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, q.ID)
	r, before := a.Response(`"r"`)
	if e2etest.Text(r) != "answer: Ada" {
		t.Fatalf("tasks/result: %s", r.Raw)
	}
	for _, m := range before {
		status(m)
	}
	if !slices.Contains(statuses, "input_required") {
		t.Errorf("status notifications %v: want input_required among them", statuses)
	}
	b.Send(`{"jsonrpc":"2.0","id":"l","method":"tasks/list","params":{}}`)
	if l, _ := b.Response(`"l"`); !strings.Contains(string(l.Result), id) {
		t.Fatalf("tasks/list: %s", l.Raw)
	}
}

// A tool that asks two questions at once (from two goroutines) has both in one
// input_required round of a 2026 client; the retry that answers both completes
// the call.
func TestModernQuestionsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := demo.Server("test")
		s.AddTool(mcpgo.NewTool("two"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			srv := server.ServerFromContext(ctx)
			answers := make([]string, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() {
					res, err := srv.RequestElicitation(ctx, mcpgo.ElicitationRequest{Params: mcpgo.ElicitationParams{
						Message:         fmt.Sprint("question ", i),
						RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}},
					}})
					if err == nil {
						answers[i] = fmt.Sprint(res.Content)
					}
					errs[i] = err
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return nil, err
			}
			return mcpgo.NewToolResultText(strings.Join(answers, " ")), nil
		})
		core, err := mcp.New(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		const caps = `{"elicitation":{}}`
		c.Modern(`1`, "tools/call", `"name":"two","arguments":{}`, caps)
		m, _ := c.Response(`1`)
		var ir e2etest.InputRequired
		if json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 2 {
			t.Fatalf("want input_required with both questions, got %s", m.Raw)
		}
		var responses []string
		for key := range ir.InputRequests {
			responses = append(responses, fmt.Sprintf(`%q:{"action":"accept","content":{"a":%q}}`, key, key))
		}
		c.Modern(`2`, "tools/call", fmt.Sprintf(`"name":"two","arguments":{},"inputResponses":{%s},"requestState":%q`, strings.Join(responses, ","), ir.RequestState), caps)
		if m, _ := c.Response(`2`); m.Error != nil || !strings.Contains(e2etest.Text(m), "map[a:") {
			t.Fatalf("the retry with both answers: %s", m.Raw)
		}
	})
}
