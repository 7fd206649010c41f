package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume/cluster"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
)

// instance is one member of an in-process cluster: its own NATS connection, store,
// node and core, like a process of its own.
type instance struct {
	nc   *nats.Conn
	core *mcp.Server
	dial func(testing.TB) transport.Conn
}

// startCluster starts a NATS server (JetStream, in memory) and n instances on it,
// with a short lease, and tools' policies (nil: the default).
func startCluster(t *testing.T, n int, lease time.Duration, tools map[string]mcp.Policy) []*instance {
	t.Helper()
	return startClusterOf(t, n, lease, mcp.Options{Tools: tools}, func() *server.MCPServer { return demo.Server("test") })
}

// startClusterOf is startCluster with each instance's server made by newServer,
// and its options base (with the instance's Store and Cluster).
func startClusterOf(t *testing.T, n int, lease time.Duration, base mcp.Options, newServer func() *server.MCPServer) []*instance {
	t.Helper()
	srv, err := embedded.Start(&embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	var out []*instance
	for i := range n {
		nc, err := srv.Connect()
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := jsstore.New(ctx, js, &jsstore.Options{Memory: true})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		node, err := cluster.Join(ctx, nc, &cluster.Options{Name: fmt.Sprint("i", i), Lease: lease, Memory: true})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		opts := base
		opts.Store, opts.Cluster = st, node
		core, err := mcp.New(newServer(), &opts)
		if err != nil {
			t.Fatal(err)
		}
		// Cleanups run last first: the core, then the store (which waits for
		// the writes it has in flight: an instance whose connection the test
		// closed, for its publishes' timeout), then the node, then the
		// connection.
		t.Cleanup(nc.Close)
		t.Cleanup(node.Close)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = st.Close(ctx)
		})
		out = append(out, &instance{nc: nc, core: core, dial: serveCore(t, core)})
	}
	return out
}

// The end-to-end suite across a cluster of two instances: each new connection
// goes to the other instance than the one before, so every resume, getStatus,
// cancel and answer is served by an instance that does not own the request.
func TestEndToEndCluster(t *testing.T) {
	ins := startCluster(t, 2, 5*time.Second, demo.Policies())
	var next atomic.Int64
	dial := func(t testing.TB) transport.Conn { return ins[next.Add(1)%2].dial(t) }
	e2etest.Run(t, e2etest.Harness{Dial: dial, Reconnect: true})
}

// A keyed call sent again through another instance than its owner's attaches
// as it would on the owner: its policy again, then every message from the
// first, the one the lost connection was written included (the owner's replay
// window), and the tool runs once.
func TestClusterCallKeySentAgain(t *testing.T) {
	var runs atomic.Int32
	ins := startClusterOf(t, 2, 5*time.Second, mcp.Options{}, func() *server.MCPServer { return countingServer(&runs) })
	a := e2etest.NewClient(t, ins[0].dial(t))
	a.Initialize(`{"resumableRequests":{}}`)
	a.Send(keyedCall, callKey)
	e2etest.PolicyOf(t, a.Next())
	if m := a.Next(); m.Method != spec.MethodProgress || m.Seq() != 1 {
		t.Fatalf("first connection: %s, want progress 1", m.Raw)
	}
	a.Close() // lost with progress 1 in its buffers, say

	b := e2etest.NewClient(t, ins[1].dial(t))
	b.Initialize(`{"resumableRequests":{}}`)
	sendKeyedAgain(t, b, &runs)
}

// An owner that dies: its running requests end failed with owner_lost, served by
// the survivor, within about the lease; a restartable one runs again there and
// completes; a client attached through the survivor gets the owner_lost error
// without resuming.
func TestClusterOwnerLost(t *testing.T) {
	const lease = time.Second
	ins := startCluster(t, 2, lease, map[string]mcp.Policy{"countdown": {Restartable: true}})
	a, b := ins[0], ins[1]

	ca := e2etest.NewClient(t, a.dial(t))
	ca.Initialize(`{"resumableRequests":{},"elicitation":{}}`)
	// ask waits for an answer that never comes: running until A dies.
	ca.Send(`{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"ask","arguments":{"question":"?"}}}`)
	q := e2etest.PolicyOf(t, ca.Next())
	ca.Next() // the elicitation
	ca.Send(`{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"ask","arguments":{"question":"?"}}}`)
	w := e2etest.PolicyOf(t, ca.Next())
	ca.Next()
	ca.Send(`{"jsonrpc":"2.0","id":"r","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.5,"steps":2}}}`)
	r := e2etest.PolicyOf(t, ca.Next())
	ca.Close()

	// Through B while A lives: processing, with the question pending.
	cb := e2etest.NewClient(t, b.dial(t))
	cb.Initialize(`{"resumableRequests":{},"elicitation":{}}`)
	if st, err := cb.GetStatus(`"s0"`, `"q"`, q.ResumeToken); err != nil || st.Status != "processing" || !st.HasInputRequest {
		t.Fatalf("getStatus through B: %+v, %v; want processing with an input request", st, err)
	}
	// w stays attached through B when A dies.
	cb.Resume(`"w"`, w.ResumeToken)
	if m := cb.Next(); m.Method != "elicitation/create" {
		t.Fatalf("resume of w through B: %s, want the elicitation", m.Raw)
	}

	// A dies: its connection to NATS goes without a goodbye, so its lease lapses.
	died := time.Now()
	a.nc.Close()
	resp, _ := cb.Response(`"w"`)
	if resp.Error == nil || resp.Error.Reason != spec.ReasonOwnerLost {
		t.Fatalf("w, attached through B when A died: %s, want an owner_lost error", resp.Raw)
	}
	took := time.Since(died)
	if took > 3*lease {
		t.Errorf("owner_lost came %v after A died; the lease is %v", took, lease)
	}
	st, err := cb.GetStatus(`"s1"`, `"q"`, q.ResumeToken)
	if err != nil || st.Status != "failed" {
		t.Fatalf("getStatus of q after A died: %+v, %v; want failed", st, err)
	}
	cb.Resume(`"q"`, q.ResumeToken)
	resp, _ = cb.Response(`"q"`)
	if resp.Error == nil || resp.Error.Code != spec.CodeInvalidParams || resp.Error.Reason != spec.ReasonOwnerLost {
		t.Fatalf("resume of q after A died: %s, want -32602 owner_lost", resp.Raw)
	}
	// The restartable countdown ran again on B.
	cb.Resume(`"r"`, r.ResumeToken)
	resp, _ = cb.Response(`"r"`)
	if e2etest.Text(resp) != "countdown done: 2 of 2 steps" {
		t.Fatalf("resume of the restartable r after A died: %s, want its result", resp.Raw)
	}
}

// A client without the ack extension, attached through B to a restartable
// request of A when A dies: B runs the request again and the client's stream
// carries on with the new run. After a drop, a resume from another connection
// gets only what the first did not: the failover kept the request's mode (nothing
// written is kept for a client that never acknowledges), and the new run's
// numbers come after the old run's.
func TestClusterFailoverKeepsMode(t *testing.T) {
	const lease = time.Second
	ins := startCluster(t, 2, lease, map[string]mcp.Policy{"countdown": {Restartable: true}})
	a, b := ins[0], ins[1]

	ca := e2etest.NewClient(t, a.dial(t))
	ca.Initialize(`{"resumableRequests":{}}`)
	ca.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":3,"steps":30},"_meta":{"progressToken":"p"}}}`)
	pol := e2etest.PolicyOf(t, ca.Next())
	ca.Close()

	c1 := e2etest.NewClient(t, b.dial(t))
	c1.Initialize(`{"resumableRequests":{}}`)
	c1.Resume(`"c"`, pol.ResumeToken)
	var last uint64
	take := func(m e2etest.Msg, who string) {
		t.Helper()
		seq := m.Seq()
		if seq == 0 {
			t.Fatalf("%s: a message without a sequence number: %s", who, m.Raw)
		}
		if seq <= last { // also a number seen before
			t.Fatalf("%s: seq %d after %d: %s", who, seq, last, m.Raw)
		}
		last = seq
	}
	take(c1.Next(), "through B, A alive") // A's run, proxied

	a.nc.Close() // A dies without a goodbye; B takes the request over and runs it again
	for newRun := 0; newRun < 3; {
		m := c1.Next()
		if m.IsResponse(`"c"`) {
			t.Fatalf("the response came before three progress notifications of the new run: %s", m.Raw)
		}
		take(m, "through B, across the failover")
		if m.Seq() > 1<<32 {
			newRun++
		}
	}
	c1.Close()

	c2 := e2etest.NewClient(t, b.dial(t))
	c2.Initialize(`{"resumableRequests":{}}`)
	c2.Resume(`"c"`, pol.ResumeToken)
	resp, before := c2.Response(`"c"`)
	for _, m := range before {
		take(m, "resumed on B")
	}
	take(resp, "resumed on B")
	if got := e2etest.Text(resp); got != "countdown done: 30 of 30 steps" {
		t.Fatalf("the result of the new run: %s", resp.Raw)
	}
}

// Deferred answers across a cluster of two instances: each connection goes to
// the other instance than the one before, so every await is served by an
// instance that does not own the deferred call (e2etest.RunDeferral), and a
// question asked there is answered through it.
func TestDeferralCluster(t *testing.T) {
	ins := startClusterOf(t, 2, 5*time.Second, mcp.Options{AnswerWithin: e2etest.DeferralWithin}, func() *server.MCPServer { return demo.Server("test") })
	var next atomic.Int64
	dial := func(t testing.TB) transport.Conn { return ins[next.Add(1)%2].dial(t) }
	e2etest.RunDeferral(t, e2etest.Harness{Dial: dial, Reconnect: true})
}

// An await made on another instance than the deferred call's, after the call
// ended with progress nobody had awaited, gets that progress and then the
// result: it goes by the owner's status of the call (what is still queued),
// not by the shared store's record, which says only that the call ended.
func TestAwaitAfterTheEndElsewhere(t *testing.T) {
	release := make(chan struct{})
	newServer := func() *server.MCPServer {
		srv := server.NewMCPServer("test", "test", server.WithToolCapabilities(false))
		srv.AddTool(mcpgo.NewTool("report"), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
			progress := func(n int) {
				_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{"progressToken": req.Params.Meta.ProgressToken, "progress": n})
			}
			progress(1)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			progress(2)
			progress(3)
			return mcpgo.NewToolResultText("reported"), nil
		})
		return srv
	}
	ins := startClusterOf(t, 2, 5*time.Second, mcp.Options{AnswerWithin: e2etest.DeferralWithin}, newServer)
	c := e2etest.NewClient(t, ins[0].dial(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"report","_meta":{"progressToken":"p"}}}`)
	resp, before := c.Response(`1`)
	d, ok := deferredOf(t, resp)
	if !ok || len(before) != 1 || e2etest.Progress(before[0]) != 1 {
		t.Fatalf("answered %s after %d messages, want a deferred answer after the first progress", resp.Raw, len(before))
	}
	close(release)
	poll.Until(t, 10*time.Second, "the call's end", func() bool { return ins[0].core.Engine().Stats().Completed == 1 })

	c = e2etest.NewClient(t, ins[1].dial(t))
	c.Initialize(`{}`)
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":%q,"arguments":{"handle":%q},"_meta":{"progressToken":"q"}}}`, d.Tool, d.Arguments.Handle)
	resp, before = c.Response(`2`)
	var progress []int
	for _, m := range before {
		if m.Method == spec.MethodProgress {
			progress = append(progress, e2etest.Progress(m))
		}
	}
	if e2etest.Text(resp) != "reported" || fmt.Sprint(progress) != "[2 3]" {
		t.Fatalf("the await answered %s after progress %v; want the result after [2 3]", resp.Raw, progress)
	}
}

// New refuses a Cluster without a Store the instances share (here none: the
// engine's memory), with resume.New's error instead of a panic, and leaves
// nothing running.
func TestNewRefusesClusterWithoutSharedStore(t *testing.T) {
	srv, err := embedded.Start(&embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	node, err := cluster.Join(t.Context(), nc, &cluster.Options{Name: "alone", Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	core, err := mcp.New(demo.Server("test"), &mcp.Options{Cluster: node})
	if err == nil || core != nil {
		t.Fatalf("New = %v, %v; want an error and no server", core, err)
	}
	if !strings.Contains(err.Error(), "Lister and a Claimer") {
		t.Fatalf("error %q does not say what the store lacks", err)
	}
}

// Two awaits of one deferred call at once, on two instances: the one on the
// instance that does not own the call, taken over by the other, answers
// superseded within a poll instead of waiting out its window; every progress
// value reaches the client once across the call and all its awaits.
func TestTwoAwaitsAcrossInstances(t *testing.T) {
	ins := startClusterOf(t, 2, 5*time.Second, mcp.Options{AnswerWithin: 2 * time.Second}, func() *server.MCPServer { return demo.Server("test") })
	c0 := e2etest.NewClient(t, ins[0].dial(t))
	c0.Initialize(`{}`)
	c0.Send(`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":8,"steps":8},"_meta":{"progressToken":"p"}}}`)
	resp, before := c0.Response(`"c"`)
	d, ok := deferredOf(t, resp)
	if !ok {
		t.Fatalf("%s, want a deferred answer", resp.Raw)
	}
	progress := progressOf(before, "p")
	c1 := e2etest.NewClient(t, ins[1].dial(t))
	c1.Initialize(`{}`)
	args := fmt.Sprintf(`{"handle":%q}`, d.Arguments.Handle)
	c1.Send(`{"jsonrpc":"2.0","id":"a1","method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":"q"}}}`, d.Tool, args)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	c0.Send(`{"jsonrpc":"2.0","id":"a2","method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":"q"}}}`, d.Tool, args)
	resp, before = c1.Response(`"a1"`)
	progress = append(progress, progressOf(before, "q")...)
	if waited := time.Since(start); waited > 1500*time.Millisecond {
		t.Errorf("the first await answered %v after the second came", waited)
	}
	if !strings.Contains(string(resp.Raw), `"`+string(spec.ReasonSuperseded)+`"`) {
		t.Fatalf("the first await: %s, want superseded", resp.Raw)
	}
	id := `"a2"`
	for i := 3; ; i++ {
		resp, before = c0.Response(id)
		progress = append(progress, progressOf(before, "q")...)
		if _, again := deferredOf(t, resp); !again || i > 20 {
			break
		}
		id = fmt.Sprintf(`"a%d"`, i)
		c0.Send(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"progressToken":"q"}}}`, id, d.Tool, args)
	}
	if e2etest.Text(resp) != "countdown done: 8 of 8 steps" {
		t.Fatalf("the last await: %s, want the result", resp.Raw)
	}
	if !oneToN(progress, 8) {
		t.Errorf("progress across the call and its awaits %v, want 1..8 each once", progress)
	}
}
