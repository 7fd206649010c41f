package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
)

// blockServer is the demo server plus a tool that waits for its context to end and
// reports why.
func blockServer(causes chan<- error) *server.MCPServer {
	s := demo.Server("test")
	s.AddTool(mcpgo.NewTool("block"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	return s
}

// A detached request expires after maxWait of virtual time: its handler's context
// is cancelled with resume.ErrExpired, the request is freed, and getStatus and
// resume say expired. getStatus before that resets the clock.
func TestMaxWaitExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 1)
		core, err := mcp.New(blockServer(causes), &mcp.Options{Engine: &resume.Options{MaxWait: 30 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)

		a := e2etest.NewClient(t, dial(t))
		a.Initialize(`{"resumableRequests":{}}`)
		a.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block"}}`)
		pol := e2etest.PolicyOf(t, a.Next())
		if *pol.MaxWait != 30 {
			t.Fatalf("maxWait %d, want 30", *pol.MaxWait)
		}
		a.Close()

		b := e2etest.NewClient(t, dial(t))
		b.Initialize(`{"resumableRequests":{}}`)
		time.Sleep(20 * time.Second)
		if st, e := b.GetStatus("2", "1", pol.ResumeToken); e != nil || st.Status != "processing" {
			t.Fatalf("after 20s: %+v %v, want processing", st, e)
		}
		time.Sleep(20 * time.Second) // 40s after the drop, 20s after the reset
		synctest.Wait()
		select {
		case c := <-causes:
			t.Fatalf("handler cancelled (%v) before maxWait after the reset", c)
		default:
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if c := <-causes; !errors.Is(c, resume.ErrExpired) {
			t.Fatalf("handler context cause %v, want ErrExpired", c)
		}
		if n := core.Engine().Live(); n != 0 {
			t.Fatalf("%d live requests after expiry", n)
		}
		if _, e := b.GetStatus("3", "1", pol.ResumeToken); e == nil || e.Code != spec.CodeInvalidParams || e.Reason != spec.ReasonExpired {
			t.Fatalf("getStatus after expiry: %v", e)
		}
		b.Resume(`1`, pol.ResumeToken)
		if m, _ := b.Response("1"); m.Error == nil || m.Error.Code != spec.CodeInvalidParams || m.Error.Reason != spec.ReasonExpired {
			t.Fatalf("resume after expiry: %s", m.Raw)
		}
	})
}

// A tool with the After policy gets its resume policy only once it has run that
// long; a call that ends sooner is answered plainly.
func TestPolicyAfterThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Tools: map[string]mcp.Policy{"countdown": {Mode: mcp.After, After: 4500 * time.Millisecond}}})
		if err != nil {
			t.Fatal(err)
		}
		dial := serveCore(t, core)
		c := e2etest.NewClient(t, dial(t))
		c.Initialize(`{"resumableRequests":{}}`)

		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":2,"steps":2}}}`)
		if resp, before := c.Response("1"); len(before) != 0 || resp.Seq() != 0 {
			t.Fatalf("a short call got %d messages before a result %s", len(before), resp.Raw)
		}
		c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":8,"steps":8},"_meta":{"progressToken":"p"}}}`)
		resp, before := c.Response("2")
		var sawPolicy bool
		for i, m := range before {
			switch {
			case m.Method == spec.MethodResumePolicy:
				sawPolicy = true
				if i != 4 { // progress 1..4 went out plainly; the policy comes at 4.5s
					t.Errorf("policy at position %d, want 4", i)
				}
			case sawPolicy && m.Seq() == 0:
				t.Errorf("message after the policy without a sequence number: %s", m.Raw)
			}
		}
		if !sawPolicy || resp.Seq() == 0 {
			t.Fatalf("long call: policy %v, response %s", sawPolicy, resp.Raw)
		}
	})
}

// With the "never" policy, and for methods other than tools/call, the core answers
// directly even for a resumable client.
func TestPolicyNever(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), &mcp.Options{DefaultPolicy: mcp.Policy{Mode: mcp.Never}})
	if err != nil {
		t.Fatal(err)
	}
	dial := serveCore(t, core)
	c := e2etest.NewClient(t, dial(t))
	c.Initialize(`{"resumableRequests":{}}`)
	for id, msg := range map[string]string{
		"1": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		"2": `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
	} {
		c.Send("%s", msg)
		if resp, before := c.Response(id); len(before) != 0 || resp.Seq() != 0 {
			t.Fatalf("id %s: %d messages (%v) before %s", id, len(before), before, resp.Raw)
		}
	}
}

// Past the cap on live resumable requests, a call runs without a policy.
func TestMaxLive(t *testing.T) {
	causes := make(chan error, 2)
	core, err := mcp.New(blockServer(causes), &mcp.Options{Engine: &resume.Options{MaxLive: 1}})
	if err != nil {
		t.Fatal(err)
	}
	dial := serveCore(t, core)
	c := e2etest.NewClient(t, dial(t))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block"}}`)
	e2etest.PolicyOf(t, c.Next())
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"plain"}}}`)
	if resp, before := c.Response("2"); len(before) != 0 || e2etest.Text(resp) != "plain" || resp.Seq() != 0 {
		t.Fatalf("over the cap: %d messages before %s", len(before), resp.Raw)
	}
}

// While the process is short of memory, a call runs without a policy, as
// past the cap on live resumable requests.
func TestMemoryShort(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), &mcp.Options{Engine: &resume.Options{MemoryShort: func() bool { return true }}, QuickCall: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := e2etest.NewClient(t, serveCore(t, core)(t))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"plain"}}}`)
	if resp, before := c.Response("1"); len(before) != 0 || e2etest.Text(resp) != "plain" || resp.Seq() != 0 {
		t.Fatalf("short of memory: %d messages before %s", len(before), resp.Raw)
	}
}

// The engine's maxWait and minWait reach the client twice, in whole seconds: in the
// server's advertisement at initialize and in each resume policy.
func TestWaitsAdvertised(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), &mcp.Options{Engine: &resume.Options{MaxWait: 90 * time.Second, MinWait: 3 * time.Second}, QuickCall: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := e2etest.NewClient(t, serveCore(t, core)(t))
	init := c.Initialize(`{"resumableRequests":{}}`)
	var res struct {
		Capabilities struct {
			Experimental struct {
				ResumableRequests struct {
					MaxWait, MinWait int64
				} `json:"resumableRequests"`
			} `json:"experimental"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(init.Result, &res); err != nil {
		t.Fatal(err)
	}
	if adv := res.Capabilities.Experimental.ResumableRequests; adv.MaxWait != 90 || adv.MinWait != 3 {
		t.Errorf("advertised %+v in %s, want maxWait 90 and minWait 3", adv, init.Result)
	}
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`)
	pol := e2etest.PolicyOf(t, c.Next())
	if pol.MaxWait == nil || *pol.MaxWait != 90 || pol.MinWait == nil || *pol.MinWait != 3 {
		t.Errorf("policy maxWait %v minWait %v, want 90 and 3", pol.MaxWait, pol.MinWait)
	}
	c.Response("1")
}

// A server at one of its bounds makes every new call plain: the log says so
// for the first, then once every 10 s at most, with how many it did not log.
func TestNotStartedLogSpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logbuf.Buffer
		log := zerolog.New(&logs)
		core, err := mcp.New(demo.Server("test"), &mcp.Options{Logger: &log, QuickCall: -1,
			Engine: &resume.Options{MemoryShort: func() bool { return true }}})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{"resumableRequests":{}}`)
		call := func(id int) {
			c.Send(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"plain"}}}`, id)
			c.Response(strconv.Itoa(id))
		}
		for i := range 20 {
			call(i + 1)
		}
		time.Sleep(10 * time.Second)
		call(21)
		lines := strings.Count(logs.String(), "request runs without a resume policy")
		if lines != 2 || !strings.Contains(logs.String(), `"unlogged":19`) {
			t.Errorf("%d lines for 21 plain calls, want 2, the second naming 19 unlogged:\n%s", lines, logs.String())
		}
	})
}
