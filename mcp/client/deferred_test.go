package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// within is the deferring servers' Options.AnswerWithin in these tests.
const within = 2 * time.Second

// countedDemo is the demo tools with countdown's runs counted.
func countedDemo(runs *atomic.Int32) *server.MCPServer {
	s := demo.Server("test")
	cd := s.GetTool("countdown")
	s.AddTool(cd.Tool, func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		runs.Add(1)
		return cd.Handler(ctx, req)
	})
	return s
}

// wantSteps checks that the caller saw the progress values 1..n, each once,
// in order.
func wantSteps(t *testing.T, progress []int, n int) {
	t.Helper()
	ok := len(progress) == n
	for i := 0; ok && i < n; i++ {
		ok = progress[i] == i+1
	}
	if !ok {
		t.Errorf("progress as the caller saw it %v, want 1..%d, each once, in order", progress, n)
	}
}

// A tools/call that a server answers with a deferred answer returns the
// tool's own result all the same: the client calls the await tool the answer
// names, again while it answers deferred, in both eras, on in-memory
// connections, Streamable HTTP and WebSocket, declaring the ack extension (as
// this client does by default) or not. The caller's Progress gets every value
// once, from the call and each await in turn; OnDeferred is told each
// deferred answer followed; the tool runs once.
func TestFollowsDeferredAnswer(t *testing.T) {
	for _, era := range []string{"2025", "2026"} {
		for _, tr := range []string{"pipe", "http", "ws"} {
			for _, acks := range []string{"acks", "noacks"} {
				t.Run(era+"/"+tr+"/"+acks, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { followsDeferred(t, era, tr, acks == "acks") })
				})
			}
		}
	}
}

func followsDeferred(t *testing.T, era, tr string, acks bool) {
	var runs atomic.Int32
	opts := &mcp.Options{AnswerWithin: within, Tools: demo.Policies()}
	var dial client.Dialer
	switch tr {
	case "pipe":
		dial = newPipeServerOf(t, countedDemo(&runs), opts).dial
	default:
		n := newMemNetOf(t, countedDemo(&runs), opts)
		dial = map[string]client.Dialer{"http": n.httpDial, "ws": n.wsDial}[tr]
	}
	copts := fastOpts()
	copts.NoAckExtension = !acks
	if era == "2026" {
		copts.ProtocolVersion = spec.Version2026
	}
	c := connect(t, dial, copts)
	const steps = 10
	var progress []int
	var deferred []client.Deferred
	start := time.Now()
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 5, "steps": steps}, &client.CallOptions{
		Progress:   func(p client.Progress) { progress = append(progress, int(p.Progress)) },
		OnDeferred: func(d client.Deferred) { deferred = append(deferred, d) },
	})
	if err != nil {
		t.Fatalf("call: %v (progress %v)", err, progress)
	}
	if got := text(t, res); got != "countdown done: 10 of 10 steps" {
		t.Fatalf("result %q, want the countdown's own", got)
	}
	if _, ok := client.DeferredOf(res); ok {
		t.Fatalf("the result is a deferred answer: %+v", res)
	}
	wantSteps(t, progress, steps)
	if len(deferred) < 2 || deferred[0].Tool != mcp.DefaultAwaitTool || !strings.Contains(string(deferred[0].Arguments), `"handle":"dh1.`) {
		t.Errorf("deferred answers followed %+v, want at least two (a 5 s call, answered within 2 s), naming %s with a handle", deferred, mcp.DefaultAwaitTool)
	}
	if took := time.Since(start); took > 5*time.Second+minAwaitSlack {
		t.Errorf("the result came %v after the call, want right after the tool's 5 s", took)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}

// minAwaitSlack is how late a followed call's result may come after its tool
// ended: an await is sent no sooner than 200 ms after the one before.
const minAwaitSlack = 300 * time.Millisecond

// KeepDeferred returns a deferred answer as it is: DeferredOf reads what it
// names, and calling that tool with those arguments gets the result.
func TestKeepDeferred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newPipeServer(t, &mcp.Options{AnswerWithin: within})
		c := connect(t, s.dial, fastOpts())
		res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 3, "steps": 3}, &client.CallOptions{KeepDeferred: true})
		if err != nil {
			t.Fatal(err)
		}
		d, ok := client.DeferredOf(res)
		if !ok || d.Tool != mcp.DefaultAwaitTool || res.IsError {
			t.Fatalf("%+v, want a deferred answer", res)
		}
		var args map[string]any
		if err := json.Unmarshal(d.Arguments, &args); err != nil {
			t.Fatal(err)
		}
		res, err = c.CallTool(t.Context(), d.Tool, args, &client.CallOptions{KeepDeferred: true})
		if err != nil || text(t, res) != "countdown done: 3 of 3 steps" {
			t.Fatalf("await: %+v %v, want the result", res, err)
		}
	})
}

// A question the tool asks after its call was deferred reaches the caller's
// handler through the await (a server's request in the 2025 era, the await's
// input_required answer in the 2026 era), and its answer the tool.
func TestFollowsDeferredQuestion(t *testing.T) {
	for _, era := range []string{"2025", "2026"} {
		t.Run(era, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newPipeServer(t, &mcp.Options{AnswerWithin: within})
				opts := fastOpts()
				if era == "2026" {
					opts.ProtocolVersion = spec.Version2026
				}
				opts.Elicitation = func(_ context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
					return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{
						Action: mcpgo.ElicitationResponseActionAccept, Content: map[string]any{"answer": "Ada"}}}, nil
				}
				c := connect(t, s.dial, opts)
				followed := 0
				res, err := c.CallTool(t.Context(), "ask", map[string]any{"question": "Your name?", "delay": 3}, &client.CallOptions{
					OnDeferred: func(client.Deferred) { followed++ },
				})
				if err != nil || text(t, res) != "answer: Ada" || followed == 0 {
					t.Fatalf("%+v %v after %d deferred answers, want the answer through an await", res, err, followed)
				}
			})
		})
	}
}

// A Call whose ctx ends while it follows a deferred answer stops the call on
// the server (the await tool with "cancel": true): an await of its handle
// says it was cancelled.
func TestFollowingCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int32
		s := newPipeServerOf(t, countedDemo(&runs), &mcp.Options{AnswerWithin: within})
		c := connect(t, s.dial, fastOpts())
		ctx, cancel := context.WithCancel(t.Context())
		var handle client.Deferred
		_, err := c.CallTool(ctx, "countdown", map[string]any{"seconds": 60, "steps": 60}, &client.CallOptions{
			OnDeferred: func(d client.Deferred) {
				handle = d
				time.AfterFunc(3*time.Second, cancel) // during the first await
			},
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("call: %v, want context.Canceled", err)
		}
		synctest.Wait()
		var args map[string]any
		_ = json.Unmarshal(handle.Arguments, &args)
		res, err := c.CallTool(t.Context(), handle.Tool, args, &client.CallOptions{KeepDeferred: true})
		if err != nil || !res.IsError || !strings.Contains(fmt.Sprint(res.Meta), string(spec.ReasonCancelled)) {
			t.Fatalf("await after the cancel: %+v %v, want a tool error with reason %s", res, err, spec.ReasonCancelled)
		}
	})
}

// hostile is a server that answers every tools/call with the result made
// by answer (its id's request), counting them.
func hostile(t *testing.T, answer func(n int) string) (client.Dialer, *atomic.Int32) {
	var calls atomic.Int32
	return func(context.Context) (transport.Conn, error) {
		cli, srv := transport.Pipe()
		go func() {
			defer srv.Close()
			for {
				b, err := srv.Read(context.Background())
				if err != nil {
					return
				}
				m, derr := spec.Decode(b)
				if derr != nil || m.Kind != spec.KindRequest {
					continue
				}
				var res string
				switch m.Method {
				case "initialize":
					res = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}`
				case "tools/call":
					res = answer(int(calls.Add(1)))
				default:
					res = `{}`
				}
				_ = srv.Write(context.Background(), spec.EncodeResponse(m.ID, json.RawMessage(res)))
			}
		}()
		t.Cleanup(func() { _ = cli.Close() })
		return cli, nil
	}, &calls
}

// A deferred answer that names no tool to call, or arguments that are no
// object, is a protocol error, not a result; a server whose await answers
// deferred at once is asked no oftener than every 200 ms.
func TestDeferredAnswerHostile(t *testing.T) {
	for _, meta := range []string{`{"arguments":{"handle":"h"}}`, `{"tool":"aw","arguments":"h"}`, `{"tool":"aw"}`, `"aw"`} {
		synctest.Test(t, func(t *testing.T) {
			dial, _ := hostile(t, func(int) string {
				return `{"content":[{"type":"text","text":"still running"}],"_meta":{"` + spec.MetaDeferred + `":` + meta + `}}`
			})
			c := connect(t, dial, fastOpts())
			_, err := c.CallTool(t.Context(), "x", nil, nil)
			var pe *client.ProtocolError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), "deferred answer") {
				t.Errorf("deferred answer %s: %v, want a protocol error about it", meta, err)
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		dial, calls := hostile(t, func(int) string {
			return `{"content":[{"type":"text","text":"still running"}],"_meta":{"` + spec.MetaDeferred + `":{"tool":"aw","arguments":{"handle":"h"}}}}`
		})
		c := connect(t, dial, fastOpts())
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := c.CallTool(ctx, "x", nil, nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%v, want the caller's deadline", err)
		}
		// The call, 51 awaits in 10 s (at 0, 0.2, ... 10 s), and the await
		// that cancels.
		if n := calls.Load(); n > 53 {
			t.Fatalf("%d tools/call in 10 s, want no more than one await every 200 ms", n)
		}
	})
}

// A deferred call followed through a network cut every 3 s (every
// connection closed, the awaits' too): the client resumes the call, makes
// each lost await again, and returns the call's own result; the caller sees
// every progress value once, with or without the ack extension, over
// Streamable HTTP and WebSocket.
func TestFollowsDeferredThroughCuts(t *testing.T) {
	for _, tr := range []string{"http", "ws"} {
		for _, acks := range []string{"acks", "noacks"} {
			t.Run(tr+"/"+acks, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { followsThroughCuts(t, tr, acks == "acks") })
			})
		}
	}
}

func followsThroughCuts(t *testing.T, tr string, acks bool) {
	var runs atomic.Int32
	n := newMemNetOf(t, countedDemo(&runs), &mcp.Options{AnswerWithin: within, Tools: demo.Policies()})
	dial := map[string]client.Dialer{"http": n.httpDial, "ws": n.wsDial}[tr]
	opts := fastOpts()
	opts.NoAckExtension = !acks
	c := connect(t, dial, opts)
	stop := make(chan struct{})
	cutter := make(chan struct{})
	go func() {
		defer close(cutter)
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Second):
				n.cut()
			}
		}
	}()
	const steps = 30
	var progress []int
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": steps, "steps": steps}, &client.CallOptions{
		Progress: func(p client.Progress) { progress = append(progress, int(p.Progress)) },
	})
	close(stop)
	<-cutter
	if err != nil {
		t.Fatalf("call: %v (progress %v)", err, progress)
	}
	if got := text(t, res); got != "countdown done: 30 of 30 steps" {
		t.Fatalf("result %q, want the countdown's own", got)
	}
	wantSteps(t, progress, steps)
	if r := runs.Load(); r != 1 {
		t.Errorf("the tool ran %d times, want once", r)
	}
}
