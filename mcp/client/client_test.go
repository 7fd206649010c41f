package client_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

func text(t testing.TB, res *mcpgo.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("empty result %+v", res)
	}
	tc, ok := res.Content[0].(mcpgo.TextContent)
	if !ok {
		t.Fatalf("result content %T", res.Content[0])
	}
	return tc.Text
}

func fastOpts() *client.Options {
	return &client.Options{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond}
}

func TestCallToolProgressAndPolicy(t *testing.T) {
	s := newPipeServer(t, nil)
	c := connect(t, s.dial, nil)
	if c.Resumable() == nil {
		t.Fatal("no resumableRequests advertisement")
	}
	var progress []float64
	var policy client.Policy
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.02, "steps": 4}, &client.CallOptions{
		Progress: func(p client.Progress) { progress = append(progress, p.Progress) },
		Policy:   func(p client.Policy) { policy = p },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "countdown done: 4 of 4 steps" {
		t.Fatalf("result %q", got)
	}
	if len(progress) != 4 || progress[0] != 1 || progress[3] != 4 {
		t.Fatalf("progress %v", progress)
	}
	if policy.Token == "" || !strings.HasPrefix(string(policy.RequestID), `"c-`) || policy.MaxWait != 10*time.Minute {
		t.Fatalf("policy %+v", policy)
	}
}

// A cut in the middle of a call: the client reconnects, resumes with its ack and
// gets every progress notification once and the result.
func TestResumeAfterCut(t *testing.T) {
	s := newPipeServer(t, nil)
	c := connect(t, s.dial, fastOpts())
	var mu sync.Mutex
	var progress []float64
	resumed := 0
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.3, "steps": 6}, &client.CallOptions{
		Progress: func(p client.Progress) {
			mu.Lock()
			progress = append(progress, p.Progress)
			mu.Unlock()
			if p.Progress == 2 || p.Progress == 4 {
				go s.cutAll()
			}
		},
		Resumed: func() { resumed++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "countdown done: 6 of 6 steps" {
		t.Fatalf("result %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, p := range progress {
		if p != float64(i+1) {
			t.Fatalf("progress %v, want 1..6 once each", progress)
		}
	}
	if len(progress) != 6 || resumed < 2 || c.Reconnects() < 2 {
		t.Fatalf("progress %v, %d resumes, %d reconnects", progress, resumed, c.Reconnects())
	}
}

// A tool that is not resumable fails with ErrNotResumable when its connection is
// lost, and the client still works for the next call.
func TestNotResumable(t *testing.T) {
	s := newPipeServer(t, &mcp.Options{Tools: map[string]mcp.Policy{"countdown": {Mode: mcp.Never}}})
	c := connect(t, s.dial, fastOpts())
	_, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 1, "steps": 20}, &client.CallOptions{
		Progress: func(client.Progress) { go s.cutAll() },
	})
	if !errors.Is(err, client.ErrNotResumable) || !strings.Contains(err.Error(), "tools/call") {
		t.Fatalf("err %v, want ErrNotResumable", err)
	}
	res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "again"}, nil)
	if err != nil || text(t, res) != "again" {
		t.Fatalf("after the loss: %v %v", res, err)
	}
}

// Elicitation sent again after a resume is answered from the cache: the handler
// runs once.
func TestElicitationAcrossResume(t *testing.T) {
	s := newPipeServer(t, nil)
	var calls int
	var mu sync.Mutex
	c := connect(t, s.dial, &client.Options{
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
		Elicitation: func(ctx context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n == 1 {
				s.cutAll() // the answer is written on a dead connection
			}
			return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{
				Action: mcpgo.ElicitationResponseActionAccept, Content: map[string]any{"answer": "Ada"},
			}}, nil
		},
	})
	res, err := c.CallTool(t.Context(), "ask", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "answer: Ada" {
		t.Fatalf("result %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 || c.Reconnects() < 1 {
		t.Fatalf("handler ran %d times (want 1), %d reconnects (want 1+)", calls, c.Reconnects())
	}
}

func TestSampling(t *testing.T) {
	s := newPipeServer(t, nil)
	c := connect(t, s.dial, &client.Options{
		Sampling: func(ctx context.Context, req mcpgo.CreateMessageRequest) (*mcpgo.CreateMessageResult, error) {
			return &mcpgo.CreateMessageResult{Model: "m", SamplingMessage: mcpgo.SamplingMessage{Role: mcpgo.RoleAssistant, Content: mcpgo.NewTextContent("short")}}, nil
		},
	})
	res, err := c.CallTool(t.Context(), "summarize", map[string]any{"text": "long"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "summary: short" {
		t.Fatalf("result %q", got)
	}
}

// Status by id and token, from a second client; Cancel by token ends the request.
func TestStatusAndCancel(t *testing.T) {
	s := newPipeServer(t, nil)
	a := connect(t, s.dial, fastOpts())
	pol := make(chan client.Policy, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := a.CallTool(ctx, "countdown", map[string]any{"seconds": 30, "steps": 30}, &client.CallOptions{Policy: func(p client.Policy) { pol <- p }})
		errc <- err
	}()
	p := <-pol
	b := connect(t, s.dial, nil)
	st, err := b.Status(t.Context(), p.RequestID, p.Token)
	if err != nil || st.Status != "processing" {
		t.Fatalf("status %+v %v", st, err)
	}
	if _, err := b.Status(t.Context(), p.RequestID, "wrong"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("wrong token: %v", err)
	}
	if err := b.Cancel(t.Context(), p.RequestID, p.Token, "test"); err != nil {
		t.Fatal(err)
	}
	// The cancel is a notification, with no answer: poll until it took effect.
	poll.Until(t, 10*time.Second, "status to answer cancelled after the cancel", func() bool {
		_, err := b.Status(t.Context(), p.RequestID, p.Token)
		return err != nil && strings.Contains(err.Error(), "cancelled")
	})
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("call: %v", err)
	}
}

func TestClose(t *testing.T) {
	s := newPipeServer(t, nil)
	c := connect(t, s.dial, nil)
	errc := make(chan error, 1)
	pol := make(chan client.Policy, 1)
	go func() {
		_, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 30, "steps": 3}, &client.CallOptions{Policy: func(p client.Policy) { pol <- p }})
		errc <- err
	}()
	<-pol
	_ = c.Close()
	if err := <-errc; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
	if _, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "x"}, nil); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}
