package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/cluster"
)

func TestCallRoundTrip(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	type got struct {
		from     string
		c        cluster.PeerCall
		deadline time.Duration
	}
	calls := make(chan got, 1)
	reply := cluster.PeerReply{
		Status: resume.Status{State: resume.StateCompleted, HasPending: true, HasInput: true, Dropped: 1 << 40, QueuedBytes: 123456},
		Err:    "ended",
	}
	b.Handle(func(ctx context.Context, from string, c cluster.PeerCall) cluster.PeerReply {
		d, _ := ctx.Deadline()
		calls <- got{from, c, time.Until(d)}
		return reply
	})
	c := cluster.PeerCall{Op: cluster.PeerAttach, Ack: 1<<63 + 5, Inbox: "mr.ctl.alpha.in.0123", Data: []byte(`{"x":1}`)}
	for i := range c.Hash {
		c.Hash[i] = byte(i + 1)
	}
	r, err := a.Call(ctxT(t), "beta", c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, reply) {
		t.Errorf("reply %+v, want %+v", r, reply)
	}
	if !errors.Is(r.Error(), resume.ErrEnded) {
		t.Errorf("reply error %v, want ErrEnded", r.Error())
	}
	g := receive(t, calls, "the call")
	if g.from != "alpha" {
		t.Errorf("from %q, want alpha", g.from)
	}
	if !reflect.DeepEqual(g.c, c) {
		t.Errorf("call %+v, want %+v", g.c, c)
	}
	if g.deadline <= 0 || g.deadline > 5*time.Second {
		t.Errorf("the handler's context ends in %s, want within the call timeout", g.deadline)
	}

	// The zero values: a success, an empty status, no data.
	reply = cluster.PeerReply{}
	r, err = b.Call(ctxT(t), "beta", cluster.PeerCall{Op: cluster.PeerCancel})
	if err != nil || r != (cluster.PeerReply{}) || r.Error() != nil {
		t.Errorf("Call to itself: %+v, %v", r, err)
	}
	if g := receive(t, calls, "the call to itself"); g.from != "beta" || !reflect.DeepEqual(g.c, cluster.PeerCall{Op: cluster.PeerCancel}) {
		t.Errorf("call to itself: %+v", g)
	}
}

// TestCallsConcurrent: a call whose handler blocks does not hold back the next.
func TestCallsConcurrent(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	started, release := make(chan struct{}), make(chan struct{})
	b.Handle(func(ctx context.Context, from string, c cluster.PeerCall) cluster.PeerReply {
		switch c.Op {
		case cluster.PeerAttach:
			close(started)
			select {
			case <-release:
				return cluster.PeerReply{Status: resume.Status{State: resume.StateProcessing}}
			case <-ctx.Done():
				return cluster.PeerReply{Err: "failed"}
			}
		default:
			close(release)
			return cluster.PeerReply{}
		}
	})
	attached := make(chan error, 1)
	ctx := ctxT(t)
	go func() {
		r, err := a.Call(ctx, "beta", cluster.PeerCall{Op: cluster.PeerAttach})
		if err == nil {
			err = r.Error()
		}
		attached <- err
	}()
	receive(t, started, "the attach")
	if _, err := a.Call(ctxT(t), "beta", cluster.PeerCall{Op: cluster.PeerTouch}); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, attached, "the attach's reply"); err != nil {
		t.Fatal(err)
	}
}

func TestCallBeforeHandle(t *testing.T) {
	t.Parallel()
	a, _ := pair(t)
	r, err := a.Call(ctxT(t), "beta", cluster.PeerCall{Op: cluster.PeerTouch})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(r.Error(), resume.ErrClosed) {
		t.Errorf("reply %+v, want closed", r)
	}
}

func TestCallUnknownInstance(t *testing.T) {
	t.Parallel()
	a, _ := pair(t)
	start := time.Now()
	_, err := a.Call(ctxT(t), "gamma", cluster.PeerCall{Op: cluster.PeerTouch})
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("Call to an unknown instance: %v, want no responders", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Call to an unknown instance took %s", d)
	}
	if _, err := a.Call(ctxT(t), "a.>", cluster.PeerCall{Op: cluster.PeerTouch}); err == nil {
		t.Error("Call to a wildcard succeeded")
	}
}

func TestCallTimeout(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	o := options(t, "alpha")
	o.CallTimeout = 200 * time.Millisecond
	a, _ := join(t, srv, o)
	b, _ := join(t, srv, options(t, "beta"))
	release := make(chan struct{})
	budget := make(chan time.Duration, 1)
	b.Handle(func(ctx context.Context, from string, c cluster.PeerCall) cluster.PeerReply {
		d, _ := ctx.Deadline()
		budget <- time.Until(d)
		<-release
		return cluster.PeerReply{}
	})
	start := time.Now()
	_, err := a.Call(context.Background(), "beta", cluster.PeerCall{Op: cluster.PeerTouch})
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call to a stuck handler: %v, want a deadline", err)
	}
	if d := time.Since(start); d < o.CallTimeout || d > 2*time.Second {
		t.Errorf("Call to a stuck handler took %s, want about %s", d, o.CallTimeout)
	}
	// The handler's context ends when the caller stops waiting, not at the
	// handler's own CallTimeout (5s).
	if d := receive(t, budget, "the call"); d <= 0 || d > o.CallTimeout {
		t.Errorf("the handler's context ends in %s, want within the caller's %s", d, o.CallTimeout)
	}
}

func TestCallAfterClose(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	b.Handle(func(ctx context.Context, from string, c cluster.PeerCall) cluster.PeerReply {
		return cluster.PeerReply{}
	})
	if _, err := a.Call(ctxT(t), "beta", cluster.PeerCall{Op: cluster.PeerTouch}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := a.Call(ctxT(t), "beta", cluster.PeerCall{Op: cluster.PeerTouch}); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("Call to a closed node: %v, want no responders", err)
	}
	if _, err := b.Call(ctxT(t), "alpha", cluster.PeerCall{Op: cluster.PeerTouch}); !errors.Is(err, cluster.ErrClosed) {
		t.Errorf("Call from a closed node: %v, want ErrClosed", err)
	}
}

// TestCloseEndsHandlers: Close ends the contexts of the calls in progress and
// waits for their handlers.
func TestCloseEndsHandlers(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	started := make(chan struct{})
	var ended error
	b.Handle(func(ctx context.Context, from string, c cluster.PeerCall) cluster.PeerReply {
		close(started)
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond) // Close must wait for this
		ended = ctx.Err()
		return cluster.PeerReply{}
	})
	ctx := ctxT(t)
	called := make(chan error, 1)
	go func() {
		_, err := a.Call(ctx, "beta", cluster.PeerCall{Op: cluster.PeerAttach})
		called <- err
	}()
	receive(t, started, "the call")
	b.Close()
	if !errors.Is(ended, context.Canceled) { // read after Close: no race when it waited
		t.Errorf("the handler's context ended with %v, want cancelled", ended)
	}
	receive(t, called, "the caller's return")
}

// TestMalformed: a call or a delivery that does not decode (not from a node) is
// answered with an error, and the handler or deliver is not called.
func TestMalformed(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	a, _ := join(t, srv, options(t, "alpha"))
	var called atomic.Bool
	a.Handle(func(ctx context.Context, from string, c cluster.PeerCall) cluster.PeerReply {
		called.Store(true)
		return cluster.PeerReply{}
	})
	inbox, closeInbox := a.Listen(func(resume.Message) error { called.Store(true); return nil })
	defer closeInbox()
	nc := connect(t, srv)
	m, err := nc.Request("mr.ctl.alpha", []byte{1, 2, 3}, patience)
	if err != nil {
		t.Fatal(err)
	}
	// A reply: version 1, no state, no flags, 0 dropped, 0 bytes, "failed".
	if want := append([]byte{1, 0, 0, 0, 0}, "failed"...); !bytes.Equal(m.Data, want) {
		t.Errorf("reply to a malformed call %q, want %q", m.Data, want)
	}
	if m, err = nc.Request(inbox, []byte{7}, patience); err != nil {
		t.Fatal(err)
	}
	if len(m.Data) == 0 {
		t.Error("a malformed delivery is answered with success")
	}
	if called.Load() {
		t.Error("the handler or deliver was called")
	}
}
