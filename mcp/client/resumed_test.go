package client_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp/client"
)

// A cut two steps into a call: the client says it reconnects (attempt 1, no
// failure before it), sends the resume (Resumed), and says the server took it
// up (ResumeAccepted) when the call's next message arrives, before that
// message is delivered.
func TestResumeAcceptedAfterReconnecting(t *testing.T) {
	s := newPipeServer(t, nil)
	var mu sync.Mutex
	var events []string
	event := func(e string) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	opts := fastOpts()
	opts.OnReconnecting = func(attempt int, err error) { event(fmt.Sprintf("reconnecting %d %v", attempt, err)) }
	c := connect(t, s.dial, opts)
	_, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.3, "steps": 4}, &client.CallOptions{
		Progress: func(p client.Progress) {
			event(fmt.Sprint("progress ", p.Progress))
			if p.Progress == 2 {
				go s.cutAll()
			}
		},
		Resumed:        func() { event("resume sent") },
		ResumeAccepted: func() { event("resume accepted") },
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"progress 1", "progress 2", "reconnecting 1 <nil>", "resume sent", "resume accepted", "progress 3", "progress 4"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
}
