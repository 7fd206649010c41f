package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/transport"
)

// With KeepConnected the client connects again after a loss while no call
// waits, and OnReconnected is told once the new connection is there; without
// it, a call that needs one reconnects it.
func TestKeepConnected(t *testing.T) {
	for _, keep := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) { keepConnected(t, keep) })
	}
}

func keepConnected(t *testing.T, keep bool) {
	{
		s := newPipeServer(t, nil)
		var told atomic.Int32
		opts := fastOpts()
		opts.KeepConnected = keep
		opts.OnReconnected = func() { told.Add(1) }
		c := connect(t, s.dial, opts)
		s.cutAll()
		if !keep {
			// A call reconnects it.
			if res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "hi"}, nil); err != nil || text(t, res) != "hi" {
				t.Fatalf("echo: %v %v", res, err)
			}
		}
		poll.Until(t, 10*time.Second, "a new connection", func() bool { return told.Load() == 1 && c.Reconnects() == 1 })
	}
}

// With NoResumable the client declares no resumable requests: the server
// makes none of its calls resumable (no policy).
func TestNoResumable(t *testing.T) {
	s := newPipeServer(t, nil)
	opts := fastOpts()
	opts.NoResumable = true
	c := connect(t, s.dial, opts)
	policies := 0
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.02, "steps": 2}, &client.CallOptions{
		Policy: func(client.Policy) { policies++ },
	})
	if err != nil || text(t, res) != "countdown done: 2 of 2 steps" || policies != 0 {
		t.Fatalf("%v %v, %d policies", res, err, policies)
	}
}

// With PassTraceContext and no TracerProvider the client makes no span but
// sends the trace context of its caller's span: the server's span of the
// call is that span's child.
func TestPassTraceContext(t *testing.T) {
	tp, rec := recorded()
	s := newPipeServer(t, &mcp.Options{TracerProvider: tp})
	opts := fastOpts()
	opts.PassTraceContext = true
	c := connect(t, s.dial, opts)
	ctx, caller := tp.Tracer("test").Start(t.Context(), "caller")
	if _, err := c.CallTool(ctx, "echo", map[string]any{"text": "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	caller.End()
	var srv []sdktrace.ReadOnlySpan
	poll.Until(t, 10*time.Second, "the server's span", func() bool {
		srv = find(rec.Ended(), "tools/call echo", trace.SpanKindServer)
		return len(srv) == 1
	})
	if srv[0].Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("server span's parent %v, want the caller's span %v", srv[0].Parent().SpanID(), caller.SpanContext().SpanID())
	}
	if n := len(find(rec.Ended(), "tools/call echo", trace.SpanKindClient)); n != 0 {
		t.Errorf("%d client spans from an untraced client", n)
	}
}

// A call that finds no connection within ReconnectTimeout fails with an
// error matching ErrNoConnection (and ErrGaveUp): the server never had it.
func TestNoConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newPipeServer(t, nil)
		var down atomic.Bool
		c := connect(t, func(ctx context.Context) (transport.Conn, error) {
			if down.Load() {
				return nil, errors.New("the server is down")
			}
			return s.dial(ctx)
		}, fastOpts())
		down.Store(true)
		s.cutAll()
		start := time.Now()
		_, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "hi"}, nil)
		if !errors.Is(err, client.ErrNoConnection) || !errors.Is(err, client.ErrGaveUp) || time.Since(start) != 30*time.Second {
			t.Fatalf("err %v after %v, want ErrNoConnection after the default ReconnectTimeout", err, time.Since(start))
		}
	})
}
