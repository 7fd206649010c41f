package client_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
)

// StreamTask through a proxy that cuts every connection 150-400 ms after it
// opened: the task's events come each once and in order (seq 0, 1, 2, ...),
// the stream asked for again from the last one after each cut, up to the
// task's end.
func TestStreamTaskThroughCuts(t *testing.T) {
	s := newNetServer(t, &mcp.Options{Tools: demo.Policies()})
	p := faultproxy.NewTimed(t, s.addr(), 150*time.Millisecond, 400*time.Millisecond)
	c := connectThroughCuts(t, httpDialer(t, "http://"+p.Addr()+"/mcp"), &client.Options{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	if c == nil {
		return
	}
	defer c.Close()
	var tk *client.Task
	for attempt := 0; tk == nil; attempt++ { // a cut may take the creation's answer
		var err error
		if tk, err = c.CallToolTask(t.Context(), "countdown", map[string]any{"seconds": 2, "steps": 10}, 0); err != nil && attempt > 20 {
			t.Fatalf("creating the task: %v", err)
		}
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	if err := c.StreamTask(t.Context(), tk.TaskID, nil, func(ev client.TaskEvent) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%d:%s", ev.Seq, ev.Type))
		mu.Unlock()
	}); err != nil {
		t.Fatalf("StreamTask: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 11 || seen[10] != "10:"+spec.EventTypeStatus {
		t.Fatalf("events %v, want 10 progress and the status", seen)
	}
	for i := range 10 {
		if seen[i] != fmt.Sprintf("%d:%s", i, spec.EventTypeProgress) {
			t.Fatalf("events %v: want progress 0-9 in order, once each", seen)
		}
	}
	if p.Cuts() < 3 {
		t.Errorf("only %d cuts", p.Cuts())
	}
}
