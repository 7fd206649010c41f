package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// Go, the Call that no goroutine waits for: its answer reaches done, after
// every progress value, across a cut of its connection (resumed, as Call's
// would be); a call whose ctx ends is abandoned (done gets the ctx's error,
// and the server's call is cancelled); and what follows a first answer (here
// a deferred answer, followed to the call's own result) runs as Call runs it.
func TestGo(t *testing.T) {
	s := newPipeServer(t, nil)
	c := connect(t, s.dial, fastOpts())
	type answer struct {
		raw json.RawMessage
		err error
	}
	call := func(ctx context.Context, args string, opts *client.CallOptions) chan answer {
		done := make(chan answer, 1)
		c.Go(ctx, spec.MethodToolsCall, json.RawMessage(`{"name":"countdown","arguments":`+args+`}`), opts, func(raw json.RawMessage, err error) {
			done <- answer{raw, err}
		})
		return done
	}

	var mu sync.Mutex
	var progress []float64
	cut := sync.OnceFunc(s.cutAll)
	a := <-call(t.Context(), `{"seconds":0.3,"steps":4}`, &client.CallOptions{Progress: func(p client.Progress) {
		mu.Lock()
		progress = append(progress, p.Progress)
		mu.Unlock()
		if p.Progress == 2 {
			go cut()
		}
	}})
	if a.err != nil || !json.Valid(a.raw) {
		t.Fatalf("Go across a cut: %s, %v", a.raw, a.err)
	}
	mu.Lock()
	if !slices.Equal(progress, []float64{1, 2, 3, 4}) {
		t.Errorf("progress %v, want 1 to 4 once each, before the answer", progress)
	}
	mu.Unlock()

	ctx, cancel := context.WithCancel(t.Context())
	done := call(ctx, `{"seconds":60,"steps":2}`, nil)
	poll.Until(t, 10*time.Second, "the call running on the server", func() bool { return s.core.Calls() == 1 })
	cancel()
	if a := <-done; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("Go whose ctx ended: %s, %v; want context.Canceled", a.raw, a.err)
	}
	poll.Until(t, 10*time.Second, "the server's call cancelled", func() bool { return s.core.Calls() == 0 })
}

// Go's answer that defers (the server answers later, naming a tool to call
// for the result) is followed on done's goroutine to the call's own result.
func TestGoFollowsDeferred(t *testing.T) {
	s := newPipeServer(t, &mcp.Options{AnswerWithin: within})
	c := connect(t, s.dial, fastOpts())
	done := make(chan error, 1)
	var text string
	var deferred int // read after done
	opts := &client.CallOptions{OnDeferred: func(client.Deferred) { deferred++ }}
	c.Go(t.Context(), spec.MethodToolsCall, map[string]any{"name": "countdown", "arguments": map[string]any{"seconds": within.Seconds() + 0.5, "steps": 2}}, opts, func(raw json.RawMessage, err error) {
		var res struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		if err == nil && len(res.Content) == 1 {
			text = res.Content[0].Text
		}
		done <- err
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if deferred != 1 {
		t.Errorf("%d deferred answers followed, want 1", deferred)
	}
	if want := fmt.Sprintf("countdown done: %d of %d steps", 2, 2); text != want {
		t.Fatalf("Go of a deferred call: %q, want %q", text, want)
	}
}
