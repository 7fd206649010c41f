package mcp_test

import (
	"context"
	"encoding/json"
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
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
)

// refusedWith checks that m is a -32023 refusal with reason and a retryAfterMs
// of want.
func refusedWith(t *testing.T, m e2etest.Msg, reason spec.Reason, want time.Duration) {
	t.Helper()
	if m.Error == nil || m.Error.Code != spec.CodeRateLimited || m.Error.Reason != reason ||
		m.Error.RetryAfterMs != want.Milliseconds() || m.Error.RetryAfter != (want.Milliseconds()+999)/1000 {
		t.Fatalf("%s, want -32023 %s with retryAfterMs %d", m.Raw, reason, want.Milliseconds())
	}
}

// A tool's timeout ends its call, whatever the call has become by then: a plain
// call (policy Never) and a resumable one its client waits on get the timeout
// error; a detached request ends with it, stored for its resume; a 2025 task
// fails with it; a deferred call's await gets it. Its tool's context is
// cancelled each time. A call that ends in time is not touched. Virtual time.
func TestToolTimeout(t *testing.T) {
	countdown := `{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%d,"steps":%d}%s}}`
	for _, tc := range []struct {
		name string
		opts mcp.Options
		run  func(t *testing.T, c *e2etest.Client, dial func() *e2etest.Client) e2etest.Msg
	}{
		{"plain", mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Never, Timeout: 5 * time.Second}},
			func(t *testing.T, c *e2etest.Client, _ func() *e2etest.Client) e2etest.Msg {
				c.Send(countdown, "1", 20, 20, "")
				resp, _ := c.Response(`"1"`)
				return resp
			}},
		{"attached", mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Always, Timeout: 5 * time.Second}},
			func(t *testing.T, c *e2etest.Client, _ func() *e2etest.Client) e2etest.Msg {
				c.Send(countdown, "1", 20, 20, "")
				resp, _ := c.Response(`"1"`)
				return resp
			}},
		{"detached", mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Always, Timeout: 5 * time.Second}},
			func(t *testing.T, c *e2etest.Client, dial func() *e2etest.Client) e2etest.Msg {
				c.Send(countdown, "1", 20, 20, `,"_meta":{"progressToken":"p"}`)
				pol := e2etest.PolicyOf(t, c.Next())
				c.Close()
				time.Sleep(10 * time.Second)
				b := dial()
				if _, e := b.GetStatus("7", `"1"`, pol.ResumeToken); e != nil {
					t.Fatalf("getStatus: %v", e)
				}
				b.Resume(`"1"`, pol.ResumeToken)
				resp, _ := b.Response(`"1"`)
				return resp
			}},
		{"task", mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Always, Task: mcp.AsTask, Timeout: 5 * time.Second}},
			func(t *testing.T, c *e2etest.Client, _ func() *e2etest.Client) e2etest.Msg {
				c.Send(countdown, "1", 20, 20, `,"task":{}`)
				created, _ := c.Response(`"1"`)
				var res struct {
					Task struct {
						TaskID string `json:"taskId"`
					} `json:"task"`
				}
				if err := json.Unmarshal(created.Result, &res); err != nil || res.Task.TaskID == "" {
					t.Fatalf("CreateTaskResult: %s", created.Raw)
				}
				time.Sleep(10 * time.Second)
				c.Send(`{"jsonrpc":"2.0","id":"g","method":"tasks/get","params":{"taskId":%q}}`, res.Task.TaskID)
				if got, _ := c.Response(`"g"`); !strings.Contains(string(got.Result), `"status":"failed"`) {
					t.Errorf("tasks/get after the timeout: %s, want failed", got.Raw)
				}
				c.Send(`{"jsonrpc":"2.0","id":"r","method":"tasks/result","params":{"taskId":%q}}`, res.Task.TaskID)
				resp, _ := c.Response(`"r"`)
				return resp
			}},
		{"deferred", mcp.Options{AnswerWithin: 2 * time.Second, DefaultPolicy: mcp.Policy{Mode: mcp.Always, Timeout: 5 * time.Second}},
			func(t *testing.T, c *e2etest.Client, _ func() *e2etest.Client) e2etest.Msg {
				c.Send(countdown, "1", 20, 20, "")
				resp, _ := c.Response(`"1"`)
				d, ok := deferredOf(t, resp)
				if !ok {
					t.Fatalf("after 2s: %s, want a deferred answer", resp.Raw)
				}
				for i := 0; ; i++ { // each await waits up to 2s
					id := fmt.Sprintf(`"a%d"`, i)
					c.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"handle":%q}}}`, id, d.Tool, d.Arguments.Handle)
					if resp, _ = c.Response(id); i > 5 {
						t.Fatalf("still deferred after %d awaits", i)
					}
					if _, again := deferredOf(t, resp); !again {
						return resp
					}
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := demo.Server("test")
				ended := make(chan error, 4)
				core, err := mcp.New(srv, &tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				// After the core's: inside it, it sees the context the tool
				// runs on (a request's, once the call is one).
				srv.Use(toolEnds(ended))
				dial := serveCore(t, core)
				newClient := func() *e2etest.Client {
					c := e2etest.NewClient(t, dial(t))
					c.Initialize(`{"resumableRequests":{}}`)
					return c
				}
				start := time.Now()
				resp := tc.run(t, newClient(), newClient)
				if !timedOut(resp) {
					t.Fatalf("%s, want the timeout error", resp.Raw)
				}
				synctest.Wait()
				select {
				case err := <-ended:
					if err == nil {
						t.Fatalf("the tool returned without its context cancelled")
					}
				default:
					t.Fatalf("the tool still runs after its timeout")
				}
				if d := time.Since(start); d > 11*time.Second {
					t.Errorf("took %v", d)
				}

				// A call that ends in time is answered as usual.
				c := newClient()
				c.Send(countdown, "2", 4, 4, "")
				resp, _ = c.Response(`"2"`)
				if _, ok := deferredOf(t, resp); ok {
					c.Close()
					return
				}
				if e2etest.Text(resp) != "countdown done: 4 of 4 steps" {
					t.Fatalf("a call within its timeout: %s", resp.Raw)
				}
			})
		})
	}
}

// timedOut reports whether m is the answer of a call that ran past its 5s
// timeout: the error, or, from the await tool, the error result that carries
// its reason.
func timedOut(m e2etest.Msg) bool {
	if e := m.Error; e != nil {
		return e.Reason == spec.ReasonTimeout && strings.Contains(e.Message, "5s")
	}
	var r struct {
		IsError bool                       `json:"isError"`
		Meta    map[string]json.RawMessage `json:"_meta"`
	}
	return json.Unmarshal(m.Result, &r) == nil && r.IsError && string(r.Meta[spec.MetaReason]) == `"timeout"` &&
		strings.Contains(e2etest.Text(m), "5s")
}

// toolEnds is a tool middleware that reports, as each countdown returns, its
// context's error.
func toolEnds(ended chan<- error) server.ToolHandlerMiddleware {
	return func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
		return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			res, err := next(ctx, req)
			if req.Params.Name == "countdown" {
				ended <- ctx.Err()
			}
			return res, err
		}
	}
}

// Past a tool's Concurrency.Max calls running, the next waits in order of
// arrival (Queue, up to Wait) and runs when one ends; past the queue, a call
// is refused at once, and one that waits longer than Wait is refused then,
// -32023 concurrency_limit with a retryAfterMs. PerPrincipal bounds each
// principal apart. Virtual time.
func TestToolConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: map[string]mcp.Policy{
			"countdown": {Mode: mcp.Never, Concurrency: mcp.Concurrency{Max: 2, PerPrincipal: 1, Queue: 1, Wait: 5 * time.Second}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		alice, bob, carol, dave := dial(&mcp.SessionOptions{Principal: "alice"}), dial(&mcp.SessionOptions{Principal: "bob"}),
			dial(&mcp.SessionOptions{Principal: "carol"}), dial(&mcp.SessionOptions{Principal: "dave"})
		countdown := func(c *e2etest.Client, id string, seconds int) {
			c.Send(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%d,"steps":1}}}`, id, seconds)
		}
		start := time.Now()
		countdown(alice, "a1", 3)
		countdown(bob, "b1", 10)
		synctest.Wait()
		countdown(carol, "c1", 1) // queued: two run
		synctest.Wait()
		countdown(dave, "d1", 1) // the queue is full
		resp, _ := dave.Response(`"d1"`)
		refusedWith(t, resp, spec.ReasonConcurrencyLimit, 5*time.Second)
		if time.Since(start) != 0 {
			t.Fatalf("refused after %v, want at once", time.Since(start))
		}
		if resp, _ := alice.Response(`"a1"`); e2etest.Text(resp) != "countdown done: 1 of 1 steps" {
			t.Fatalf("a1: %s", resp.Raw)
		}
		resp, _ = carol.Response(`"c1"`)
		if e2etest.Text(resp) != "countdown done: 1 of 1 steps" || time.Since(start) != 4*time.Second {
			t.Fatalf("the queued call: %s after %v, want its result after 3s + 1s", resp.Raw, time.Since(start))
		}
		// bob runs one: his second waits for his own (PerPrincipal), and
		// gives up after Wait, though a place is free.
		countdown(bob, "b2", 1)
		resp, _ = bob.Response(`"b2"`)
		refusedWith(t, resp, spec.ReasonConcurrencyLimit, 5*time.Second)
		if time.Since(start) != 9*time.Second {
			t.Fatalf("refused after %v, want after 4s + the 5s wait", time.Since(start))
		}
		// Meanwhile others are not held back by bob's waiting call.
		if resp, _ := bob.Response(`"b1"`); e2etest.Text(resp) != "countdown done: 1 of 1 steps" {
			t.Fatalf("b1: %s", resp.Raw)
		}
		countdown(bob, "b3", 1)
		if resp, _ := bob.Response(`"b3"`); e2etest.Text(resp) != "countdown done: 1 of 1 steps" {
			t.Fatalf("b3 once b1 ended: %s", resp.Raw)
		}
	})
}

// Two servers that serve one tool under two names share its limits through
// Options.Limits, Rates and LimitName: a call on one holds the place a call
// on the other wants, and a rate spent on one is spent on the other.
// Virtual time.
func TestSharedLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		limits, rates := mcp.NewLimits(), mcp.NewMemoryRates()
		pol := mcp.Policy{Mode: mcp.Never, Concurrency: mcp.Concurrency{Max: 1}, Rate: mcp.Rate{Calls: 2, Per: time.Hour}}
		key := func(tool string) string { return "up/" + strings.TrimPrefix(tool, "up__") }
		plain, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: map[string]mcp.Policy{"countdown": pol}, Limits: limits, Rates: rates, LimitName: key})
		if err != nil {
			t.Fatal(err)
		}
		srv := server.NewMCPServer("agg", "1", server.WithToolCapabilities(true))
		for _, st := range demo.Server("test").ListTools() {
			tl := st.Tool
			tl.Name = "up__" + tl.Name
			srv.AddTool(tl, st.Handler)
		}
		agg, err := mcp.New(srv, &mcp.Options{Tools: map[string]mcp.Policy{"up__countdown": pol}, Limits: limits, Rates: rates, LimitName: key})
		if err != nil {
			t.Fatal(err)
		}
		a := serveAs(t, plain)(&mcp.SessionOptions{Principal: "alice"})
		b := serveAs(t, agg)(&mcp.SessionOptions{Principal: "alice"})
		a.Send(`{"jsonrpc":"2.0","id":"a1","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":3,"steps":1}}}`)
		synctest.Wait()
		b.Send(`{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"up__countdown","arguments":{"seconds":1,"steps":1}}}`)
		resp, _ := b.Response(`"b1"`)
		refusedWith(t, resp, spec.ReasonConcurrencyLimit, time.Second)
		if plain.Queued() != agg.Queued() {
			t.Errorf("Queued: %d and %d, want one count", plain.Queued(), agg.Queued())
		}
		if resp, _ := a.Response(`"a1"`); e2etest.Text(resp) != "countdown done: 1 of 1 steps" {
			t.Fatalf("a1: %s", resp.Raw)
		}
		// Two calls were taken of the rate (b1 was refused after its take).
		b.Send(`{"jsonrpc":"2.0","id":"b2","method":"tools/call","params":{"name":"up__countdown","arguments":{"seconds":1,"steps":1}}}`)
		resp, _ = b.Response(`"b2"`)
		refusedWith(t, resp, spec.ReasonRateLimited, 30*time.Minute-3*time.Second)
	})
}

// A tool's Rate: a principal starts Calls per Per, then is refused -32023
// rate_limited with a retryAfterMs until its bucket has a call again; each
// principal has its own bucket. Virtual time.
func TestToolRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var refusals []string
		var rec auditEvents
		core, err := mcp.New(demo.Server("test"), &mcp.Options{
			Audit: rec.add,
			Tools: map[string]mcp.Policy{"echo": {Mode: mcp.Never, Rate: mcp.Rate{Calls: 2, Per: time.Minute}}},
			OnRefused: func(tool string, authenticated bool, reason spec.Reason) {
				mu.Lock()
				defer mu.Unlock()
				refusals = append(refusals, fmt.Sprintf("%s %v %s", tool, authenticated, reason))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveAs(t, core)
		alice, bob := dial(&mcp.SessionOptions{Principal: "alice"}), dial(&mcp.SessionOptions{Principal: "bob"})
		echo := func(c *e2etest.Client, id string) e2etest.Msg {
			c.Send(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, id, id)
			resp, _ := c.Response(fmt.Sprintf("%q", id))
			return resp
		}
		for _, id := range []string{"1", "2"} {
			if resp := echo(alice, id); e2etest.Text(resp) != id {
				t.Fatalf("echo %s: %s", id, resp.Raw)
			}
		}
		refusedWith(t, echo(alice, "3"), spec.ReasonRateLimited, 30*time.Second)
		if resp := echo(bob, "b"); e2etest.Text(resp) != "b" {
			t.Fatalf("bob's first: %s", resp.Raw)
		}
		time.Sleep(20 * time.Second)
		refusedWith(t, echo(alice, "4"), spec.ReasonRateLimited, 10*time.Second)
		time.Sleep(10 * time.Second)
		if resp := echo(alice, "5"); e2etest.Text(resp) != "5" {
			t.Fatalf("after 30s: %s", resp.Raw)
		}
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(refusals) != "[echo true rate_limited echo true rate_limited]" {
			t.Errorf("refusals told %v", refusals)
		}
		var trail []string // in any order: an event is told as its span ends
		for _, e := range rec.got() {
			trail = append(trail, fmt.Sprintf("%s:%s:%s:%s", e.Principal, e.RequestID, e.Outcome, e.Reason))
		}
		slices.Sort(trail)
		if fmt.Sprint(trail) != "[alice:1:ok: alice:2:ok: alice:3:refused:rate_limited alice:4:refused:rate_limited alice:5:ok: bob:b:ok:]" {
			t.Errorf("audit trail %v", trail)
		}
	})
}

// SetPolicies puts new policies in effect for the calls that start after it;
// a call that runs keeps its own.
func TestSetPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Never}})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{"resumableRequests":{}}`)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":10,"steps":1}}}`)
		synctest.Wait()
		core.SetPolicies(mcp.Policy{Mode: mcp.Never}, map[string]mcp.Policy{"countdown": {Mode: mcp.Never, Timeout: 2 * time.Second}})
		c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":10,"steps":1}}}`)
		if resp, _ := c.Response("2"); resp.Error == nil || resp.Error.Reason != spec.ReasonTimeout {
			t.Fatalf("a call after the change: %s, want the timeout", resp.Raw)
		}
		if resp, _ := c.Response("1"); e2etest.Text(resp) != "countdown done: 1 of 1 steps" {
			t.Fatalf("a call from before the change: %s, want its result", resp.Raw)
		}
	})
}

// A task's client gets its task at once, whatever the tool's limits: past its
// rate the task fails with rate_limited; past its concurrency it waits for its
// place as a working task, then runs.
func TestToolLimitsTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: map[string]mcp.Policy{
			"echo":      {Mode: mcp.Always, Task: mcp.AsTask, Rate: mcp.Rate{Calls: 1, Per: time.Minute}},
			"countdown": {Mode: mcp.Always, Task: mcp.AsTask, Concurrency: mcp.Concurrency{Max: 1, Queue: 1, Wait: time.Minute}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{}`)
		task := func(id, tool, args string) string {
			t.Helper()
			c.Send(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":%s,"task":{}}}`, id, tool, args)
			created, _ := c.Response(fmt.Sprintf("%q", id))
			var res struct {
				Task struct {
					TaskID string `json:"taskId"`
					Status string `json:"status"`
				} `json:"task"`
			}
			if err := json.Unmarshal(created.Result, &res); err != nil || res.Task.TaskID == "" || res.Task.Status != "working" {
				t.Fatalf("%s: %s, want a working task", id, created.Raw)
			}
			return res.Task.TaskID
		}
		result := func(id, tid string) e2etest.Msg {
			t.Helper()
			c.Send(`{"jsonrpc":"2.0","id":%q,"method":"tasks/result","params":{"taskId":%q}}`, id, tid)
			resp, _ := c.Response(fmt.Sprintf("%q", id))
			return resp
		}
		first := task("e1", "echo", `{"text":"a"}`)
		// A task takes its place once its client has it: the first's is
		// taken before the second is sent.
		synctest.Wait()
		second := task("e2", "echo", `{"text":"b"}`)
		if resp := result("r1", first); e2etest.Text(resp) != "a" {
			t.Fatalf("the first echo task: %s", resp.Raw)
		}
		if resp := result("r2", second); resp.Error == nil || resp.Error.Reason != spec.ReasonRateLimited || resp.Error.RetryAfterMs != 60_000 {
			t.Fatalf("the second echo task: %s, want it failed rate_limited", resp.Raw)
		}
		start := time.Now()
		long := task("c1", "countdown", `{"seconds":5,"steps":1}`)
		queued := task("c2", "countdown", `{"seconds":1,"steps":1}`)
		synctest.Wait()
		if n := core.Queued(); n != 1 {
			t.Fatalf("%d calls queued, want the second countdown task", n)
		}
		result("r3", long)
		if resp := result("r4", queued); e2etest.Text(resp) != "countdown done: 1 of 1 steps" || time.Since(start) != 6*time.Second {
			t.Fatalf("the queued task: %s after %v, want its result after 5 s + 1 s", resp.Raw, time.Since(start))
		}
	})
}
