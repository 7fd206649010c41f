package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

// childEnv makes the test binary an upstream of the 2026-07-28 era on its
// stdio (serveChild), with a tool that runs only as a task and asks its
// client a question while it runs.
const childEnv = "GATEWAY_TEST_CHILD"

func serveChild() {
	s := server.NewMCPServer("child", "1", server.WithToolCapabilities(false))
	s.AddTool(mcpgo.NewTool("decide", mcpgo.WithDescription("Asks whether to go on, as a task")),
		func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			res, err := mcp.Ask(ctx, "elicitation/create", json.RawMessage(`{"message":"Go on?","requestedSchema":{"type":"object","properties":{"go":{"type":"boolean"}}}}`))
			if err != nil {
				return nil, err
			}
			return mcpgo.NewToolResultText("decided: " + string(res)), nil
		})
	core, err := mcp.New(s, &mcp.Options{Tools: map[string]mcp.Policy{"decide": {Mode: mcp.Always, Task: mcp.TaskRequired}}})
	if err != nil {
		log.Fatal(err)
	}
	defer core.Close()
	_ = core.Serve(context.Background(), stdio.New(os.Stdin, os.Stdout, nil))
}

// A task-required tool of an upstream of the 2026-07-28 era, through the
// gateway: the upstream makes the call its task, the gateway's call becomes
// the gateway's task, the upstream task's question reaches the 2026 client
// through the gateway's task (input_required, answered with tasks/update),
// and the answer goes to the upstream's task, whose result ends the
// gateway's.
func TestUpstreamTask2026Question(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, gateway.Options{Command: []string{exe}, Env: []string{childEnv + "=1", "GORACE"}})
	c := e2etest.NewClient(t, r.dialHTTP(t))
	caps := `{"elicitation":{},"extensions":{"` + spec.ExtensionTasks + `":{}}}`
	c.Modern(`"call"`, "tools/call", `"name":"decide","arguments":{}`, caps)
	resp, _ := c.Response(`"call"`)
	var created struct {
		ResultType string `json:"resultType"`
		TaskID     string `json:"taskId"`
	}
	if resp.Error != nil || json.Unmarshal(resp.Result, &created) != nil || created.ResultType != "task" || created.TaskID == "" {
		t.Fatalf("the call's answer %s, want a CreateTaskResult", resp.Raw)
	}
	get := func(n int) (status string, raw json.RawMessage) {
		t.Helper()
		id := fmt.Sprintf(`"get-%d"`, n)
		c.Modern(id, "tasks/get", `"taskId":"`+created.TaskID+`"`, caps)
		m, _ := c.Response(id)
		var task struct {
			Status string `json:"status"`
		}
		if m.Error != nil || json.Unmarshal(m.Result, &task) != nil {
			t.Fatalf("tasks/get: %s", m.Raw)
		}
		return task.Status, m.Result
	}
	var asked struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	n := 0
	poll.Until(t, 30*time.Second, "the task's question", func() bool {
		n++
		status, raw := get(n)
		if status != "working" && status != "input_required" {
			t.Fatalf("task %s before its question", raw)
		}
		return status == "input_required" && json.Unmarshal(raw, &asked) == nil
	})
	if len(asked.InputRequests) != 1 {
		t.Fatalf("input requests %v, want the upstream's one question", asked.InputRequests)
	}
	var answers []string
	for key := range asked.InputRequests {
		answers = append(answers, `"`+key+`":{"action":"accept","content":{"go":true}}`)
	}
	c.Modern(`"update"`, "tasks/update", `"taskId":"`+created.TaskID+`","inputResponses":{`+strings.Join(answers, ",")+`}`, caps)
	if m, _ := c.Response(`"update"`); m.Error != nil {
		t.Fatalf("tasks/update: %s", m.Raw)
	}
	poll.Until(t, 30*time.Second, "the task to complete", func() bool {
		n++
		status, raw := get(n)
		if status == "completed" {
			if !strings.Contains(string(raw), `decided: {\"action\":\"accept\"`) {
				t.Fatalf("task %s, want the upstream's result with the answer", raw)
			}
			return true
		}
		if status != "working" && status != "input_required" {
			t.Fatalf("task %s, want it completed", raw)
		}
		return false
	})
}

// A Streamable HTTP upstream of the 2026-07-28 era gets a 2026 client's call in
// that era: its question is the call's own input_required answer, passed on
// with the upstream's state (wrapped as the gateway's: gw1.), and the retry
// with the answer goes back to it; a retry with the state tampered with is
// refused, whether it still decodes (the upstream refuses it) or not (the
// gateway does).
func TestHTTPUpstream2026(t *testing.T) {
	addr, _ := upstreamOurs(t)
	r := newRig(t, gateway.Options{URL: "http://" + addr + "/mcp"})
	c := e2etest.NewClient(t, r.dialHTTP(t))
	const caps = `{"elicitation":{}}`
	c.Modern(`"q"`, "tools/call", `"name":"ask","arguments":{"question":"Name?"}`, caps)
	m, _ := c.Response(`"q"`)
	var ir e2etest.InputRequired
	if m.Error != nil || json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 {
		t.Fatalf("the call's answer %s, want input_required with one question", m.Raw)
	}
	if !strings.HasPrefix(ir.RequestState, "gw1.") {
		t.Fatalf("requestState %q, want the upstream's, wrapped (gw1.): the upstream asked in the 2026 era", ir.RequestState)
	}
	var key string
	for k := range ir.InputRequests {
		key = k
	}
	// A state of the gateway's form changed so that it no longer decodes
	// (SEP-2322's tamper: a suffix) is refused by the gateway itself.
	for i, tampered := range []string{ir.RequestState + "-TAMPERED", ir.RequestState + "-TAMPERE", ir.RequestState + "-TAMPER", ir.RequestState + "-TAMPERED!"} {
		id := fmt.Sprintf(`"t%d"`, i)
		c.Modern(id, "tools/call", fmt.Sprintf(`"name":"ask","arguments":{"question":"Name?"},"inputResponses":{%q:{"action":"accept","content":{"answer":"Ada"}}},"requestState":%q`, key, tampered), caps)
		if m, _ := c.Response(id); m.Error == nil {
			t.Fatalf("a tampered requestState %q: %s, want an error", tampered, m.Raw)
		}
	}
	c.Modern(`"a"`, "tools/call", fmt.Sprintf(`"name":"ask","arguments":{"question":"Name?"},"inputResponses":{%q:{"action":"accept","content":{"answer":"Ada"}}},"requestState":%q`, key, ir.RequestState), caps)
	if m, _ := c.Response(`"a"`); e2etest.Text(m) != "answer: Ada" {
		t.Fatalf("the retry's answer %s, want the upstream's result", m.Raw)
	}
}
