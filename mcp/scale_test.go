package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	"github.com/mcp-resume/mcp-resume/testkit/reservoir"
	"github.com/mcp-resume/mcp-resume/transport"
)

// scaleConn is a connection whose client only counts: Read takes messages from
// in, Write counts each resume policy (keeping a sample of their tokens) and
// signals each response.
type scaleConn struct {
	in     chan []byte
	closed chan struct{}
	once   sync.Once
	sample *reservoir.Sample[string]

	mu       sync.Mutex
	policies int
	resp     chan []byte
}

func newScaleConn(sample *reservoir.Sample[string]) *scaleConn {
	return &scaleConn{in: make(chan []byte, 64), closed: make(chan struct{}), resp: make(chan []byte, 1024), sample: sample}
}

func (c *scaleConn) Read(ctx context.Context) ([]byte, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.closed:
		return nil, transport.ErrClosed
	}
}

func (c *scaleConn) Write(_ context.Context, msg []byte) error {
	switch {
	case bytes.Contains(msg, []byte(`"notifications/requests/resumePolicy"`)):
		var n struct {
			Params struct {
				RequestID   json.RawMessage `json:"requestId"`
				ResumeToken string          `json:"resumeToken"`
			} `json:"params"`
		}
		if err := json.Unmarshal(msg, &n); err == nil {
			if c.sample != nil {
				c.sample.Add(fmt.Sprintf(`"requestId":%s,"resumeToken":%q`, n.Params.RequestID, n.Params.ResumeToken))
			}
			c.mu.Lock()
			c.policies++
			c.mu.Unlock()
		}
	case bytes.HasPrefix(msg, []byte(`{"jsonrpc":"2.0","id":`)):
		select {
		case c.resp <- msg:
		case <-c.closed:
		}
	}
	return nil
}

func (c *scaleConn) Close() error { c.once.Do(func() { close(c.closed) }); return nil }

// TestDetachedScale measures what a detached running request costs the server:
// MR_SCALE (default 2,000) countdowns of 600 s with a progress token each,
// started by clients of scaleBatch calls each that go once their calls'
// resume policies came, every countdown queueing a progress notification
// every MR_SCALE_STEP (default 2 s) while no client is attached, measured
// once each has been away longer than the progress history; then
// getStatus of random ones from a new connection. It reports heap and
// goroutines per request and getStatus latencies, and fails when a detached
// request costs more than its budget (a goroutine or a channel per request
// beyond the tool's own shows up here).
func TestDetachedScale(t *testing.T) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("MR_SCALE")); err == nil && v > 0 {
		n = v
	}
	step := 2 * time.Second
	if v, err := time.ParseDuration(os.Getenv("MR_SCALE_STEP")); err == nil && v > 0 {
		step = v
	}
	const seconds = 600.0 // the countdowns outlive the test, which cancels them by closing the server
	steps := max(int(seconds/step.Seconds()), 1)
	core, err := mcp.New(demo.Server("scale"), &mcp.Options{
		Engine:                    &resume.Options{MaxLive: n + 10, MaxWait: time.Hour},
		MaxConcurrentPerPrincipal: -1,
		DetachTools:               os.Getenv("MR_SCALE_DISPATCH") == "", // MR_SCALE_DISPATCH=1: the tools under mcp-go's dispatch
	})
	if err != nil {
		t.Fatal(err)
	}
	defer core.Close()

	if os.Getenv("MR_SCALE_HEAPPROFILE") != "" {
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1 // every allocation, not a sample
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goBefore := runtime.NumGoroutine()

	// The clients: scaleBatch calls each, gone once their policies came.
	tokens := &reservoir.Sample[string]{Size: 1000} // getStatus params: what the test's client keeps is not what it measures
	start := time.Now()
	for first := 1; first <= n; first += scaleBatch {
		k := min(scaleBatch, n-first+1)
		conn := newScaleConn(tokens)
		served := make(chan struct{})
		go func() {
			defer close(served)
			_ = core.Serve(context.Background(), conn)
		}()
		conn.in <- []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"scale","version":"1"}}}`)
		<-conn.resp
		conn.in <- []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for i := first; i < first+k; i++ {
			conn.in <- fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%g,"steps":%d},"_meta":{"progressToken":%d}}}`, i, seconds, steps, i)
		}
		poll.Until(t, 5*time.Minute, "the resume policies of a client's calls", func() bool {
			conn.mu.Lock()
			defer conn.mu.Unlock()
			return conn.policies == k
		})
		_ = conn.Close() // its requests detach
		<-served
	}
	started := time.Since(start)

	// Every request queues progress while detached: wait for the steady state,
	// each away longer than the progress history (the engine's default, 10 s)
	// and a step, so that it holds its newest progress alone (over 100 bytes).
	left := time.Now()
	poll.Until(t, 10*step+time.Minute, "progress queued while detached", func() bool {
		return time.Since(left) > 10*time.Second+step && core.Engine().Stats().QueuedBytes >= n*100
	})
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	goroutines := runtime.NumGoroutine() - goBefore
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	stacks := int64(after.StackInuse) - int64(before.StackInuse)
	perReq := float64(heap+stacks) / float64(n)
	if os.Getenv("MR_SCALE_STACKS") != "" {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "demo.countdown") {
				t.Log(g)
				break
			}
		}
	}
	if f := os.Getenv("MR_SCALE_HEAPPROFILE"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(w); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
	}

	// getStatus of random requests from a new connection, one at a time.
	status := newScaleConn(nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = core.Serve(context.Background(), status)
	}()
	defer func() { _ = status.Close(); <-served }()
	status.in <- []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"status","version":"1"}}}`)
	<-status.resp
	status.in <- []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	lat := make([]time.Duration, 0, 1000)
	for i := range cap(lat) {
		tok := tokens.Random()
		t0 := time.Now()
		status.in <- fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"requests/getStatus","params":{%s}}`, i+1, tok)
		resp := <-status.resp
		lat = append(lat, time.Since(t0))
		if !strings.Contains(string(resp), `"processing"`) {
			t.Fatalf("getStatus: %s", resp)
		}
	}
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("%d detached countdowns (progress every %v), started in %v: %.1f KB heap+stack per request (heap %d MiB, stacks %d MiB), %d goroutines (%.2f per request), RSS %s; getStatus p50 %v p99 %v",
		n, step, started.Round(time.Millisecond), perReq/1024, heap>>20, stacks>>20, goroutines, float64(goroutines)/float64(n), rss(), p50, p99)
	// The tool's goroutine is all a detached request keeps of its dispatch
	// (DetachTools): its stack is 4 KB (8 KB under the race detector); one
	// that parks under mcp-go's dispatch (HandleMessage's frame alone is 4.4
	// KB, so 16 KB), or a goroutine or a channel per request more, would pass
	// the budget.
	budget := 16.0 * 1024
	if os.Getenv("MR_SCALE_DISPATCH") != "" {
		budget = 30 * 1024
	}
	if race {
		budget *= 2
	}
	if perReq > budget {
		t.Errorf("a detached countdown costs %.1f KB, over the %.0f KB budget", perReq/1024, budget/1024)
	}
	if goroutines > n+n/10 {
		t.Errorf("%d goroutines for %d detached requests: more than the tools' own", goroutines, n)
	}
}

// scaleBatch is how many calls one client of TestDetachedScale starts before
// it goes.
const scaleBatch = 500

// rss returns the process's resident set size as /proc reports it, or "?".
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
