package client_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
)

// spendChecks makes n failed token checks on s, each from a session of its
// own, so that the address bucket the sessions share is empty afterwards.
func spendChecks(t *testing.T, s *pipeServer, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		conn, _ := s.dial(ctx)
		for _, m := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"guess","version":"1"}}}`,
			`{"jsonrpc":"2.0","id":2,"method":"requests/getStatus","params":{"requestId":1,"resumeToken":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}}`,
		} {
			if err := conn.Write(ctx, []byte(m)); err != nil {
				t.Errorf("guess: %v", err)
				return
			}
			if _, err := conn.Read(ctx); err != nil {
				t.Errorf("guess: %v", err)
				return
			}
		}
		_ = conn.Close()
	}
}

// A resume the server does not take up but asks to be sent again later (here
// rate_limited: the sessions of the client's address spent their failed token
// checks; owner_unreachable in a cluster is the other) is sent again after
// its retryAfter, and the call ends with its result, every progress value once.
func TestResumeRetriedLater(t *testing.T) {
	s := newPipeServer(t, &mcp.Options{TokenFailureBurst: 1, TokenFailureRefill: time.Second})
	c := connect(t, s.dial, fastOpts())
	var (
		mu       sync.Mutex
		progress []float64
		once     sync.Once
		cut      = make(chan struct{})
	)
	res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 2, "steps": 4}, &client.CallOptions{
		Progress: func(p client.Progress) {
			mu.Lock()
			progress = append(progress, p.Progress)
			mu.Unlock()
			once.Do(func() {
				go func() {
					defer close(cut)
					spendChecks(t, s, 100) // the address's allowance: 100 times the burst
					s.cutAll()
				}()
			})
		},
	})
	<-cut
	if err != nil {
		t.Fatalf("the call: %v", err)
	}
	if got := text(t, res); !strings.HasPrefix(got, "countdown done: 4 of 4") {
		t.Fatalf("result %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) != 4 {
		t.Fatalf("progress %v, want 1..4 once each", progress)
	}
	for i, p := range progress {
		if p != float64(i+1) {
			t.Fatalf("progress %v, want 1..4 once each", progress)
		}
	}
}
