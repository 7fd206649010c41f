package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
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

// deferred is the _meta["io.mcp-resume/deferred"] of a deferred answer.
type deferred struct {
	Tool      string `json:"tool"`
	Arguments struct {
		Handle string `json:"handle"`
	} `json:"arguments"`
	Progress *struct {
		Progress float64  `json:"progress"`
		Total    *float64 `json:"total"`
		Message  string   `json:"message"`
	} `json:"progress"`
	InputRequested bool `json:"inputRequested"`
}

// deferredOf reads m, a response, as a deferred answer; ok is false for any
// other answer.
func deferredOf(t testing.TB, m e2etest.Msg) (d deferred, ok bool) {
	t.Helper()
	var r struct {
		IsError bool                       `json:"isError"`
		Meta    map[string]json.RawMessage `json:"_meta"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil {
		return d, false
	}
	raw, ok := r.Meta[spec.MetaDeferred]
	if !ok {
		return d, false
	}
	if err := json.Unmarshal(raw, &d); err != nil || d.Tool == "" || d.Arguments.Handle == "" || r.IsError {
		t.Fatalf("a deferred answer that is not one: %s", m.Raw)
	}
	return d, true
}

// caller sends tools/call requests in one era: 2025 (a session initialized
// first) or 2026 (each request with its envelope).
type caller struct {
	c      *e2etest.Client
	modern bool
	caps   string
}

func (k caller) call(id, tool, args, meta string) {
	if k.modern {
		var extra []string
		if meta != "" {
			extra = append(extra, meta)
		}
		k.c.Modern(id, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args), k.caps, extra...)
		return
	}
	params := fmt.Sprintf(`"name":%q,"arguments":%s`, tool, args)
	if meta != "" {
		params += `,"_meta":{` + meta + `}`
	}
	k.c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{%s}}`, id, params)
}

// A call that runs past AnswerWithin is answered in time with a deferred
// answer (its latest progress in it); the await tool, called with its handle
// again and again, each time within AnswerWithin, forwards its progress to the
// await call's own token and ends with its result. The tool runs once. Both
// eras.
func TestDeferredAnswer(t *testing.T) {
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: "2025", true: "2026"}[modern], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var runs atomic.Int32
				srv := demo.Server("test")
				srv.Use(countRuns(&runs, "countdown"))
				core, err := mcp.New(srv, &mcp.Options{AnswerWithin: 45 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				k := caller{c: e2etest.NewClient(t, serveCore(t, core)(t)), modern: modern, caps: `{}`}
				if !modern {
					k.c.Initialize(`{}`)
				}
				start := time.Now()
				k.call(`"c"`, "countdown", `{"seconds":150,"steps":15}`, `"progressToken":"p"`)
				resp, before := k.c.Response(`"c"`)
				if d := time.Since(start); d != 45*time.Second {
					t.Fatalf("answered after %v, want 45s", d)
				}
				d, ok := deferredOf(t, resp)
				if !ok {
					t.Fatalf("after 45s: %s, want a deferred answer", resp.Raw)
				}
				if len(before) != 4 || d.Progress == nil || d.Progress.Progress != 4 || d.Progress.Message != "step 4 of 15" {
					t.Fatalf("deferred answer %s after %d progress notifications, want the 4th as its latest", resp.Raw, len(before))
				}
				text := e2etest.Text(resp)
				for _, want := range []string{"still running", d.Tool, d.Arguments.Handle, "45s"} {
					if !strings.Contains(text, want) {
						t.Errorf("the deferred answer's text %q does not say %q", text, want)
					}
				}
				if modern && !strings.Contains(string(resp.Raw), `"resultType":"complete"`) {
					t.Errorf("a 2026 deferred answer without resultType: %s", resp.Raw)
				}
				var progress []int
				for i := 0; ; i++ {
					id := fmt.Sprintf(`"a%d"`, i)
					k.call(id, d.Tool, fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle), `"progressToken":"q"`)
					resp, before := k.c.Response(id)
					for _, m := range before {
						if m.Method == spec.MethodProgress {
							if !strings.Contains(string(m.Params), `"progressToken":"q"`) {
								t.Fatalf("progress under another token: %s", m.Raw)
							}
							progress = append(progress, e2etest.Progress(m))
						}
					}
					if next, ok := deferredOf(t, resp); ok {
						if next.Arguments.Handle != d.Arguments.Handle || i > 3 {
							t.Fatalf("await %d: %s", i, resp.Raw)
						}
						continue
					}
					if e2etest.Text(resp) != "countdown done: 15 of 15 steps" {
						t.Fatalf("await %d: %s, want the result", i, resp.Raw)
					}
					break
				}
				if fmt.Sprint(progress) != "[5 6 7 8 9 10 11 12 13 14 15]" {
					t.Errorf("progress through the awaits %v, want 5..15", progress)
				}
				if d := time.Since(start); d != 150*time.Second {
					t.Errorf("the result came after %v, want 150s", d)
				}
				if n := runs.Load(); n != 1 {
					t.Errorf("the tool ran %d times", n)
				}
			})
		})
	}
}

// countRuns counts the runs of tool (a tool middleware).
func countRuns(n *atomic.Int32, tool string) server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			if req.Params.Name == tool {
				n.Add(1)
			}
			return next(ctx, req)
		}
	}
}

// A question the tool asks after its deferred answer, while nobody awaits,
// waits: the deferred answers say so, and the next await call carries it (a
// server-to-client request on the await call in the 2025 era, its
// input_required answer in the 2026 era); the answer reaches the tool, whose
// result is the await's. Both eras.
func TestDeferredQuestion(t *testing.T) {
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: "2025", true: "2026"}[modern], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 45 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				k := caller{c: e2etest.NewClient(t, serveCore(t, core)(t)), modern: modern, caps: `{"elicitation":{}}`}
				if !modern {
					k.c.Initialize(`{"elicitation":{}}`)
				}
				k.call(`"c"`, "ask", `{"question":"Name?","delay":60}`, "")
				time.Sleep(45 * time.Second) // the client's reads time out after 20s
				resp, _ := k.c.Response(`"c"`)
				d, ok := deferredOf(t, resp)
				if !ok || d.InputRequested {
					t.Fatalf("after 45s: %s, want a deferred answer, no question yet", resp.Raw)
				}
				time.Sleep(30 * time.Second) // the tool asks at 60s, while nobody awaits
				synctest.Wait()
				args := fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle)
				k.call(`"a1"`, d.Tool, args, "")
				if !modern {
					asked := k.c.Until(func(m e2etest.Msg) bool { return m.Method == "elicitation/create" })
					q := asked[len(asked)-1]
					if !strings.Contains(string(q.Params), "Name?") || strings.Contains(string(q.Params), "io.mcp-resume/seq") {
						t.Fatalf("the question on the await call: %s", q.Raw)
					}
					k.c.Send(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, q.ID)
					resp, _ = k.c.Response(`"a1"`)
				} else {
					m, _ := k.c.Response(`"a1"`)
					var ir e2etest.InputRequired
					if json.Unmarshal(m.Result, &ir) != nil || ir.ResultType != "input_required" || len(ir.InputRequests) != 1 {
						t.Fatalf("the await call: %s, want the question as input_required", m.Raw)
					}
					for key := range ir.InputRequests {
						k.c.Modern(`"a2"`, "tools/call", fmt.Sprintf(`"name":%q,"arguments":%s,"inputResponses":{%q:{"action":"accept","content":{"answer":"Ada"}}},"requestState":%q`,
							d.Tool, args, key, ir.RequestState), k.caps)
					}
					resp, _ = k.c.Response(`"a2"`)
				}
				if e2etest.Text(resp) != "answer: Ada" {
					t.Fatalf("the await's result %s, want the tool's", resp.Raw)
				}
			})
		})
	}
}

// The await tool with a handle of another principal's call, a malformed one,
// one of no call, and one of a call it cancelled: a tool error with its
// reason in _meta, at once.
func TestAwaitRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 45 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveSessions(t, core)
		alice := e2etest.NewClient(t, dial(t, &mcp.SessionOptions{Principal: "alice"}))
		bob := e2etest.NewClient(t, dial(t, &mcp.SessionOptions{Principal: "bob"}))
		alice.Initialize(`{}`)
		bob.Initialize(`{}`)
		alice.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":600,"steps":1}}}`)
		time.Sleep(45 * time.Second) // the client's reads time out after 20s
		resp, _ := alice.Response(`1`)
		d, ok := deferredOf(t, resp)
		if !ok {
			t.Fatalf("%s, want a deferred answer", resp.Raw)
		}
		refused := func(c *e2etest.Client, id, args string, reason spec.Reason) {
			t.Helper()
			start := time.Now()
			c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, d.Tool, args)
			resp, _ := c.Response(id)
			var r struct {
				IsError bool                       `json:"isError"`
				Meta    map[string]json.RawMessage `json:"_meta"`
			}
			if json.Unmarshal(resp.Result, &r) != nil || !r.IsError || string(r.Meta[spec.MetaReason]) != `"`+string(reason)+`"` {
				t.Errorf("await %s: %s, want a tool error with reason %s", args, resp.Raw, reason)
			}
			if time.Since(start) != 0 {
				t.Errorf("await %s answered after %v, want at once", args, time.Since(start))
			}
		}
		refused(bob, `"b1"`, fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle), spec.ReasonNotFound)
		refused(alice, `"a1"`, `{"handle":"dh1.garbage"}`, spec.ReasonInvalidHandle)
		refused(alice, `"a2"`, `{"handle":"not a handle"}`, spec.ReasonInvalidHandle)
		refused(alice, `"a3"`, `{}`, spec.ReasonInvalidHandle)
		alice.Send(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":%q,"arguments":{"handle":%q,"cancel":true}}}`, d.Tool, d.Arguments.Handle)
		if resp, _ := alice.Response(`"x"`); !strings.Contains(e2etest.Text(resp), "cancelled") {
			t.Fatalf("cancel: %s", resp.Raw)
		}
		refused(alice, `"a4"`, fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle), spec.ReasonCancelled)
		if st := core.Engine().Stats(); st.Processing != 0 {
			t.Errorf("after the cancel: %+v", st)
		}
	})
}

// A call that ends exactly as its time to answer comes is answered once:
// with its result, or with a deferred answer whose await gives the result.
func TestDeferredAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 45 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{}`)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":45,"steps":1}}}`)
		time.Sleep(45 * time.Second) // the client's reads time out after 20s
		resp, _ := c.Response(`1`)
		if d, ok := deferredOf(t, resp); ok {
			c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":{"handle":%q}}}`, d.Tool, d.Arguments.Handle)
			resp, _ = c.Response(`2`)
		}
		if e2etest.Text(resp) != "countdown done: 1 of 1 steps" {
			t.Fatalf("%s, want the result", resp.Raw)
		}
		if extra := c.Quiet(`"q"`); len(extra) != 0 {
			t.Fatalf("after the answer: %s", extra[0].Raw)
		}
	})
}

// A result an await delivered is delivered again to the next await within
// the delivered-retention, then answered expired (no longer kept); a call nobody awaits
// expires as a detached one does, and leaves nothing (goleak).
func TestAwaitAgainAndNever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: 45 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{}`)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":50,"steps":1}}}`)
		time.Sleep(45 * time.Second) // the client's reads time out after 20s
		resp, _ := c.Response(`1`)
		d, ok := deferredOf(t, resp)
		if !ok {
			t.Fatalf("%s, want a deferred answer", resp.Raw)
		}
		await := func(id string) e2etest.Msg {
			c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"handle":%q}}}`, id, d.Tool, d.Arguments.Handle)
			resp, _ := c.Response(id)
			return resp
		}
		for _, id := range []string{`"a1"`, `"a2"`} {
			if resp := await(id); e2etest.Text(resp) != "countdown done: 1 of 1 steps" {
				t.Fatalf("await %s: %s, want the result", id, resp.Raw)
			}
		}
		time.Sleep(2 * time.Minute) // past --delivered-retention
		if resp := await(`"a3"`); !strings.Contains(string(resp.Raw), `"`+string(spec.ReasonExpired)+`"`) {
			t.Fatalf("await after the retention: %s, want expired", resp.Raw)
		}

		c.Send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":1}}}`)
		time.Sleep(45 * time.Second)
		if _, ok := deferredOf(t, func() e2etest.Msg { m, _ := c.Response(`5`); return m }()); !ok {
			t.Fatal("want a deferred answer")
		}
		time.Sleep(time.Hour) // nobody awaits: it ends, and its result goes with the retention
		synctest.Wait()
		if st := core.Engine().Stats(); st.Processing+st.Completed+st.Failed != 0 {
			t.Errorf("an unawaited call after an hour: %+v", st)
		}
	})
}

// The shared deferral cases on in-memory connections.
func TestDeferralEndToEndPipe(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), &mcp.Options{AnswerWithin: e2etest.DeferralWithin})
	if err != nil {
		t.Fatal(err)
	}
	e2etest.RunDeferral(t, e2etest.Harness{Dial: serveCore(t, core), Reconnect: true})
}
