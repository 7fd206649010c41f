package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// serveHTTP serves core over Streamable HTTP on loopback until the test ends,
// and closes core then.
func serveHTTP(t *testing.T, core *mcp.Server) *httptest.Server {
	t.Helper()
	h := httptransport.NewHandler(core, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		hs.Close()
		core.Close()
	})
	return hs
}

// upstreamOurs serves the demo tools with resumable requests (SEP-975) over
// Streamable HTTP (/mcp) on loopback, with keepalives every 200 ms on its
// streams (so a client's default Silence window is 500 ms), and WebSocket
// (/ws), and returns its address.
func upstreamOurs(t *testing.T) (addr string, core *mcp.Server) {
	t.Helper()
	return upstreamOursWith(t, nil)
}

// upstreamOursWith is upstreamOurs with the core's options.
func upstreamOursWith(t *testing.T, opts *mcp.Options) (addr string, core *mcp.Server) {
	t.Helper()
	return upstreamOursKeyed(t, opts, nil)
}

// upstreamOursKeyed is upstreamOursWith whose endpoints want one of keys (nil:
// none).
func upstreamOursKeyed(t *testing.T, opts *mcp.Options, keys *transport.KeySet) (addr string, core *mcp.Server) {
	t.Helper()
	core, err := mcp.New(demo.Server("up"), opts)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, &httptransport.Options{KeepAlive: 200 * time.Millisecond, Keys: keys})
	wh := ws.NewHandler(core, &ws.AcceptOptions{Keys: keys})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/ws", wh)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		h.Close()
		wh.Close()
		hs.Close()
		core.Close()
	})
	return hs.Listener.Addr().String(), core
}

// A call through the gateway whose upstream connection goes silent (a stall:
// no FIN, no RST, nothing) after its first progress notification: the gateway
// takes the silence for a loss after its default Silence window (2.5 times the
// keepalive the upstream announces), takes the call up again, and the client
// gets every progress value once and the result, exactly once.
func TestUpstreamStallResumed(t *testing.T) {
	// Also with an upstream that does tasks itself, countdown among the tools
	// that may be its tasks: a call of it stays a resumable call (acks), not
	// a task whose progress a dead connection took.
	for name, opts := range map[string]*mcp.Options{"plain": nil, "tasks": {Tools: demo.Policies()}} {
		t.Run(name, func(t *testing.T) {
			addr, up := upstreamOursWith(t, opts)
			p := faultproxy.NewStaller(t, addr)
			callThroughStall(t, p, up, gateway.Options{URL: "http://" + p.Addr() + "/mcp", StreamIdle: 500 * time.Millisecond}, 3, 6)
		})
	}
}

// callThroughStall calls countdown (seconds, steps) through a gateway with
// opts, stalls every upstream connection of p at its first progress, and
// checks that the call completes with every progress value once, and that its
// upstream handler ends.
func callThroughStall(t *testing.T, p *faultproxy.Proxy, up *mcp.Server, opts gateway.Options, seconds, steps int) {
	t.Helper()
	r := newRig(t, opts)
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%d,"steps":%d},"_meta":{"progressToken":"ps"}}}`, seconds, steps)
	c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/progress" })
	if n := p.Stall(); n == 0 {
		t.Fatal("nothing to stall")
	}
	resp, before := c.Response(`"s"`)
	if want := fmt.Sprintf("countdown done: %d of %d steps", steps, steps); e2etest.Text(resp) != want {
		t.Fatalf("the call through a stalled upstream: %s", resp.Raw)
	}
	wantProgressOnce(t, "through the stall", before, steps)
	// Its handler returns just after its result went out.
	poll.Until(t, 10*time.Second, "the upstream's call to end", func() bool { return up.Calls() == 0 })
}

// wantProgressOnce checks that the progress notifications before a call's
// response, after the first one the test waited for, are 2..n in order.
func wantProgressOnce(t *testing.T, what string, before []e2etest.Msg, n int) {
	t.Helper()
	seen := []int{1}
	for _, m := range before {
		if m.Method == "notifications/progress" {
			seen = append(seen, e2etest.Progress(m))
		}
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i + 1
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("progress %s: %v, want 1 to %d once each", what, seen, n)
	}
}

// The upstream's connection is cut (the network gone for a moment) during a
// call: the call is resumed on the next connection and completes exactly once,
// over Streamable HTTP and over WebSocket.
func TestUpstreamCutResumed(t *testing.T) {
	for _, path := range []string{"http://%s/mcp", "ws://%s/ws"} {
		t.Run(path[:strings.Index(path, ":")], func(t *testing.T) {
			addr, _ := upstreamOurs(t)
			p := faultproxy.New(t, addr, faultproxy.NoCut, faultproxy.NoCut)
			r := newRig(t, gateway.Options{URL: fmt.Sprintf(path, p.Addr())})
			c := e2etest.NewClient(t, r.dialWS(t))
			c.Initialize(`{}`)
			c.Send(`{"jsonrpc":"2.0","id":"k","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":2,"steps":4},"_meta":{"progressToken":"pk"}}}`)
			c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/progress" })
			p.Down()
			time.Sleep(300 * time.Millisecond)
			p.Up()
			resp, before := c.Response(`"k"`)
			if e2etest.Text(resp) != "countdown done: 4 of 4 steps" {
				t.Fatalf("the call through a cut: %s", resp.Raw)
			}
			wantProgressOnce(t, "through the cut", before, 4)
		})
	}
}

// A WebSocket upstream that goes silent mid-call (a stall): its pings go
// unanswered, the connection is taken for dead, and the call is resumed on a
// new one, exactly once.
func TestUpstreamStallWebSocket(t *testing.T) {
	addr, up := upstreamOurs(t)
	p := faultproxy.NewStaller(t, addr)
	callThroughStall(t, p, up, gateway.Options{URL: "ws://" + p.Addr() + "/ws", WSPing: 200 * time.Millisecond}, 2, 4)
}

// The response to the gateway's tools/call is lost before anything of it
// arrives (its stream ends at once: no policy, no event id). The upstream takes
// call keys, so the gateway sent the call with one and sends it again with the
// same key: the upstream joins it to the call it already runs, which runs once,
// and the client gets its result.
func TestUpstreamLostBeforePolicy(t *testing.T) {
	var runs atomic.Int32
	upSrv := server.NewMCPServer("up", "1", server.WithToolCapabilities(false))
	upSrv.AddTool(mcpgo.NewTool("once"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		runs.Add(1)
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return mcpgo.NewToolResultText("ran"), nil
	})
	up, err := mcp.New(upSrv, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, up)
	cut := &cutFirstCall{base: http.DefaultTransport}
	r := newRig(t, gateway.Options{URL: hs.URL + "/mcp", Client: &http.Client{Transport: cut}})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"o","method":"tools/call","params":{"name":"once","arguments":{}}}`)
	if m, _ := c.Response(`"o"`); e2etest.Text(m) != "ran" {
		t.Fatalf("the call whose first answer was lost: %s", m.Raw)
	}
	if cut.cuts.Load() != 1 {
		t.Fatalf("%d answers cut, want 1", cut.cuts.Load())
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the upstream ran the tool %d times, want once", n)
	}
}

// cutFirstCall ends the body of the first tools/call POST's answer before
// anything of it is read, as a connection dropped right after the request.
type cutFirstCall struct {
	base http.RoundTripper
	cuts atomic.Int32
}

func (c *cutFirstCall) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := c.base.RoundTrip(r)
	if err != nil || !bytes.Contains(body, []byte(`"tools/call"`)) || !c.cuts.CompareAndSwap(0, 1) {
		return resp, err
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(iotest.ErrReader(io.ErrUnexpectedEOF))
	return resp, nil
}

// A silent upstream connection takes the idle ones kept for reuse with it (a
// laptop's sleep silences every connection at once): the call's resume goes out
// on a new connection, never on one opened before the silence.
func TestUpstreamStallSkipsIdleConnections(t *testing.T) {
	addr, _ := upstreamOurs(t)
	p := faultproxy.NewStaller(t, addr)
	var era, stale atomic.Int64 // era: Stalls so far; stale: writes on a connection of an earlier era
	var d net.Dialer
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &eraConn{Conn: c, era: era.Load(), now: &era, stale: &stale}, nil
	}}}
	r := newRig(t, gateway.Options{URL: "http://" + p.Addr() + "/mcp", Client: client, StreamIdle: 500 * time.Millisecond})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	// Two calls at once, so that two connections are open, one of them idle
	// once they end; then the call that will be stalled takes the other.
	c.Send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.3,"steps":1}}}`)
	c.Send(`{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.3,"steps":1}}}`)
	answered := 0
	c.Until(func(m e2etest.Msg) bool {
		if m.IsResponse(`"a"`) || m.IsResponse(`"b"`) {
			answered++
		}
		return answered == 2
	})
	c.Send(`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":2,"steps":4},"_meta":{"progressToken":"ps"}}}`)
	c.Until(func(m e2etest.Msg) bool { return m.Method == "notifications/progress" })
	era.Add(1)
	if n := p.Stall(); n < 2 {
		t.Fatalf("%d connections stalled, want the call's and an idle one at least", n)
	}
	resp, before := c.Response(`"s"`)
	if e2etest.Text(resp) != "countdown done: 4 of 4 steps" {
		t.Fatalf("the call through a stalled upstream: %s", resp.Raw)
	}
	wantProgressOnce(t, "through the stall", before, 4)
	if n := stale.Load(); n != 0 {
		t.Errorf("%d writes on connections opened before the silence", n)
	}
}

// eraConn is a connection that counts writes made after the era it was
// opened in ended.
type eraConn struct {
	net.Conn
	era        int64
	now, stale *atomic.Int64
}

func (c *eraConn) Write(b []byte) (int, error) {
	if c.now.Load() != c.era {
		c.stale.Add(1)
	}
	return c.Conn.Write(b)
}

// An upstream that does tasks itself (2025-11-25), one of its tools only as a
// task: the gateway's call of it is a task of the upstream's, whose result it
// waits for with tasks/result; the network to the upstream is cut meanwhile,
// and the gateway asks for the result again on the next connection. The task
// ran once, and the client (here with a task of the gateway's) gets its
// result.
func TestUpstreamTaskAcrossCut(t *testing.T) {
	up, err := mcp.New(demo.Server("up"), &mcp.Options{Tools: map[string]mcp.Policy{"countdown": {Mode: mcp.Always, Task: mcp.TaskRequired}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := serveHTTP(t, up)
	p := faultproxy.New(t, hs.Listener.Addr().String(), faultproxy.NoCut, faultproxy.NoCut)
	r := newRig(t, gateway.Options{URL: "http://" + p.Addr() + "/mcp"})
	if s, declared := r.g.TaskSupport("countdown"); s != mcpgo.TaskSupportRequired || !declared {
		t.Fatalf("the upstream's countdown: %q %v, want required", s, declared)
	}
	if s, _ := r.g.TaskSupport("echo"); s != mcpgo.TaskSupportForbidden {
		t.Fatalf("the upstream's echo: %q, want forbidden", s)
	}
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":2,"steps":4},"task":{}}}`)
	created, _ := c.Response(`"c"`)
	var ct struct {
		Task struct{ TaskID string } `json:"task"`
	}
	if err := json.Unmarshal(created.Result, &ct); err != nil || ct.Task.TaskID == "" {
		t.Fatalf("the gateway's task: %s", created.Raw)
	}
	poll.Until(t, 10*time.Second, "the upstream's task running", func() bool { return up.Calls() == 1 })
	p.Down()
	time.Sleep(300 * time.Millisecond)
	p.Up()
	c.Send(`{"jsonrpc":"2.0","id":"r","method":"tasks/result","params":{"taskId":%q}}`, ct.Task.TaskID)
	resp, _ := c.Response(`"r"`)
	if e2etest.Text(resp) != "countdown done: 4 of 4 steps" {
		t.Fatalf("the task's result through a cut: %s", resp.Raw)
	}
	if st := up.Engine().Stats(); st.TasksCompleted+st.TasksProcessing+st.TasksFailed != 1 {
		t.Errorf("the upstream holds tasks %+v, want the one task, completed", st)
	}
}

// A task of the gateway's: the upstream's progress for its call becomes the
// task's events, streamed with tasks/stream like any task's.
func TestGatewayTaskStream(t *testing.T) {
	addr, _ := upstreamOurs(t)
	r := newRig(t, gateway.Options{URL: "http://" + addr + "/mcp"})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.6,"steps":3},"_meta":{"progressToken":"p"},"task":{}}}`)
	created, _ := c.Response(`"c"`)
	var ct struct {
		Task struct{ TaskID string } `json:"task"`
	}
	if err := json.Unmarshal(created.Result, &ct); err != nil || ct.Task.TaskID == "" {
		t.Fatalf("the gateway's task: %s", created.Raw)
	}
	c.Send(`{"jsonrpc":"2.0","id":"s","method":"tasks/stream","params":{"taskId":%q}}`, ct.Task.TaskID)
	resp, before := c.Response(`"s"`)
	var got []string
	for _, m := range before {
		var ev struct {
			Seq     uint64
			Type    string
			Payload struct{ Progress float64 }
		}
		if m.Method == spec.MethodTaskEvent && json.Unmarshal(m.Params, &ev) == nil {
			got = append(got, fmt.Sprintf("%d:%s:%g", ev.Seq, strings.TrimPrefix(ev.Type, "io.mcp-resume."), ev.Payload.Progress))
		}
	}
	if resp.Error != nil || fmt.Sprint(got) != "[0:progress:1 1:progress:2 2:progress:3 3:status:0]" {
		t.Fatalf("events %v; response %s", got, resp.Raw)
	}
}

// Ten calls at once while every upstream connection is cut 300-1500 ms after
// it opened (interop/connect.mjs's first scene, in Go): each call's result,
// and its progress 1..10 once each, in order.
func TestUpstreamCutsExact(t *testing.T) {
	addr, _ := upstreamOurs(t)
	p := faultproxy.NewTimed(t, addr, 300*time.Millisecond, 1500*time.Millisecond)
	r := newRig(t, gateway.Options{URL: "http://" + p.Addr() + "/mcp"})
	c := e2etest.NewClient(t, r.dialWS(t))
	c.Initialize(`{}`)
	c.Countdowns(10, 3, 10)
	t.Logf("%d cuts", p.Cuts())
}

// A call whose upstream connection is cut after the upstream took it but
// before any answer came (the gateway's write fails: it cannot know whether it
// arrived) is sent again with its key, and the upstream joins it to the one it
// runs: the tool runs once, for a resumable call and for a task of the
// upstream's alike.
func TestKeyedCallCutUnanswered(t *testing.T) {
	for _, task := range []bool{false, true} {
		t.Run(fmt.Sprint("task=", task), func(t *testing.T) {
			var p *faultproxy.Proxy
			var runs atomic.Int32
			srv := demo.Server("up")
			// Registered before mcp.New's own, so it runs first: the call has
			// arrived, nothing of it is answered yet.
			srv.Use(func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
				return func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
					if runs.Add(1) == 1 {
						p.Down()
						p.Up()
					}
					return next(ctx, req)
				}
			})
			pol := mcp.Policy{Mode: mcp.Always}
			if task {
				pol.Task = mcp.TaskRequired
			}
			up, err := mcp.New(srv, &mcp.Options{Tools: map[string]mcp.Policy{"countdown": pol}})
			if err != nil {
				t.Fatal(err)
			}
			hs := serveHTTP(t, up)
			p = faultproxy.New(t, hs.Listener.Addr().String(), faultproxy.NoCut, faultproxy.NoCut)
			r := newRig(t, gateway.Options{URL: "http://" + p.Addr() + "/mcp"})
			c := e2etest.NewClient(t, r.dialWS(t))
			c.Initialize(`{}`)
			asTask := ""
			if task {
				asTask = `,"task":{}`
			}
			c.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.4,"steps":2}%s}}`, asTask)
			resp, _ := c.Response(`"c"`)
			if task {
				var ct struct {
					Task struct{ TaskID string } `json:"task"`
				}
				if err := json.Unmarshal(resp.Result, &ct); err != nil || ct.Task.TaskID == "" {
					t.Fatalf("the gateway's task: %s", resp.Raw)
				}
				c.Send(`{"jsonrpc":"2.0","id":"r","method":"tasks/result","params":{"taskId":%q}}`, ct.Task.TaskID)
				resp, _ = c.Response(`"r"`)
			}
			if e2etest.Text(resp) != "countdown done: 2 of 2 steps" {
				t.Fatalf("the call through a cut before its answer: %s", resp.Raw)
			}
			if p.Cuts() == 0 {
				t.Fatal("nothing was cut")
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("the upstream ran the tool %d times, want once", n)
			}
		})
	}
}
