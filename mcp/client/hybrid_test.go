package client_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
)

// hybridOpts is a client of a 2025-11-25 session that asks each connection's
// server/discover whether the server speaks 2026-07-28 too, declares
// elicitation for its Calls' handlers and answers what they do not with
// "nobody".
func hybridOpts(global *atomic.Int32) *client.Options {
	o := fastOpts()
	o.ProtocolVersion = "2025-11-25"
	o.Discover = true
	o.Capabilities = map[string]any{"elicitation": map[string]any{}}
	o.OnRequest = answerWith("nobody", global)
	return o
}

// A client of a 2025 session whose server speaks 2026-07-28 too sends a
// Call with an Envelope in that era: the server's question is the call's
// input_required answer, returned as it is when ReturnInputRequired says so,
// else answered by the Call's handler and sent again. A Call without one
// goes on the session, where the question is a request of the server's.
func TestEnvelopeOnSession(t *testing.T) {
	s := newPipeServer(t, nil)
	var global, own atomic.Int32
	c := connect(t, s.dial, hybridOpts(&global))
	if !c.Modern() || c.ProtocolVersion() != "2025-11-25" {
		t.Fatalf("modern %v, version %s: want a 2025-11-25 session on a server of both eras", c.Modern(), c.ProtocolVersion())
	}
	env := &client.Envelope{Capabilities: json.RawMessage(`{"elicitation":{}}`)}
	raw, err := c.Call(t.Context(), spec.MethodToolsCall, map[string]any{"name": "ask", "arguments": map[string]any{"question": "Name?"}},
		&client.CallOptions{Envelope: env, OnRequest: answerWith("Ada", &own), ReturnInputRequired: func() bool { return true }})
	in, asked := spec.AskedInput(raw)
	if err != nil || !asked || len(in.InputRequests) != 1 || in.RequestState == "" || own.Load() != 0 {
		t.Fatalf("%s, %v: want the question as the call's input_required answer, unanswered", raw, err)
	}
	for _, tc := range []struct {
		name string
		env  *client.Envelope
	}{{"2026", env}, {"session", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			own.Store(0)
			res, err := c.CallTool(t.Context(), "ask", map[string]any{"question": "Name?"},
				&client.CallOptions{Envelope: tc.env, OnRequest: answerWith("Ada", &own), ReturnInputRequired: func() bool { return false }})
			if err != nil || text(t, res) != "answer: Ada" || own.Load() != 1 || global.Load() != 0 {
				t.Fatalf("%v %v; the call's handler answered %d, the client's %d", res, err, own.Load(), global.Load())
			}
		})
	}
}

// The log level a 2026-07-28 request names is the one it gets log messages
// at: a Call's Envelope carries it; one that names none gets none. Two Calls'
// log messages alike (the same text at the same number) are each delivered.
func TestEnvelopeLogLevel(t *testing.T) {
	s := newPipeServerOf(t, gatedServer(nil), nil)
	var global atomic.Int32
	c := connect(t, s.dial, hybridOpts(&global))
	for _, level := range []string{"", "info", "info", "error"} {
		var mu sync.Mutex
		var logs []string
		_, err := c.CallTool(t.Context(), "logged", nil, &client.CallOptions{
			Envelope: &client.Envelope{LogLevel: level},
			OnLog:    logsTo(&mu, &logs),
		})
		mu.Lock()
		if want := map[string]int{"info": 1}[level]; err != nil || len(logs) != want {
			t.Errorf("level %q: %v, logs %q, want %d", level, err, logs, want)
		}
		mu.Unlock()
	}
}

// A tools/call AsTask to a server that runs the tool only as a task: on a
// 2025 session the call asks for one (params.task) and waits for its result
// with tasks/result, the task's progress delivered under the call's token;
// in the 2026-07-28 era it declares the Tasks extension, the server makes it
// a task, and the client polls it, answering its question with tasks/update.
// OnTask is told of the task either way.
func TestAsTask(t *testing.T) {
	for _, era := range []string{"2025", "2026"} {
		t.Run(era, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { asTask(t, era == "2026") })
		})
	}
}

func asTask(t *testing.T, modern bool) {
	policy := mcp.Policy{Mode: mcp.Always, Task: mcp.TaskRequired}
	s := newPipeServer(t, &mcp.Options{Tools: map[string]mcp.Policy{"countdown": policy, "ask": policy}})
	var global, own atomic.Int32
	c := connect(t, s.dial, hybridOpts(&global))
	var env *client.Envelope
	if modern {
		env = &client.Envelope{Capabilities: json.RawMessage(`{"elicitation":{}}`)}
	}
	var task string
	var progress []float64
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.2, "steps": 4}, &client.CallOptions{
		AsTask:   true,
		Envelope: env,
		OnTask:   func(id string) { task = id },
		Progress: func(p client.Progress) { progress = append(progress, p.Progress) },
	})
	if err != nil || text(t, res) != "countdown done: 4 of 4 steps" || task == "" {
		t.Fatalf("%v %v, task %q", res, err, task)
	}
	if !modern && fmt.Sprint(progress) != "[1 2 3 4]" {
		t.Errorf("progress %v, want every step once", progress)
	}
	task = ""
	res, err = c.CallTool(t.Context(), "ask", map[string]any{"question": "Name?"}, &client.CallOptions{
		AsTask: true, Envelope: env, OnTask: func(id string) { task = id }, OnRequest: answerWith("Ada", &own),
	})
	if err != nil || text(t, res) != "answer: Ada" || task == "" || own.Load() != 1 || global.Load() != 0 {
		t.Fatalf("%v %v, task %q; the call's handler answered %d, the client's %d", res, err, task, own.Load(), global.Load())
	}
}

// A call that is not AsTask never declares the Tasks extension, whatever its
// Envelope's capabilities say: the server runs it as a call.
func TestEnvelopeTasksOnlyAsTask(t *testing.T) {
	s := newPipeServer(t, &mcp.Options{Tools: demo.Policies()}) // countdown may be a task
	var global atomic.Int32
	c := connect(t, s.dial, hybridOpts(&global))
	caps := fmt.Sprintf(`{"extensions":{%q:{}}}`, spec.ExtensionTasks)
	raw, err := c.Call(t.Context(), spec.MethodToolsCall, map[string]any{"name": "countdown", "arguments": map[string]any{"seconds": 0.05, "steps": 1}},
		&client.CallOptions{Envelope: &client.Envelope{Capabilities: json.RawMessage(caps)}})
	if err != nil || strings.Contains(string(raw), "taskId") {
		t.Fatalf("%s %v: want the tool's result, no task", raw, err)
	}
	var res mcpgo.CallToolResult
	if json.Unmarshal(raw, &res) != nil || text(t, &res) != "countdown done: 1 of 1 steps" {
		t.Fatalf("result %s", raw)
	}
}

// Without a 2026 server (a WebSocket, or Discover off) an Envelope changes
// nothing: the call goes on the session.
func TestEnvelopeWithoutModernServer(t *testing.T) {
	s := newPipeServer(t, nil)
	var global, own atomic.Int32
	o := hybridOpts(&global)
	o.Discover = false
	c := connect(t, s.dial, o)
	res, err := c.CallTool(t.Context(), "ask", map[string]any{"question": "Name?"}, &client.CallOptions{
		Envelope: &client.Envelope{}, OnRequest: answerWith("Ada", &own), ReturnInputRequired: func() bool { return true },
	})
	if c.Modern() || err != nil || text(t, res) != "answer: Ada" || own.Load() != 1 {
		t.Fatalf("modern %v; %v %v, answered %d", c.Modern(), res, err, own.Load())
	}
}
