package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/everything"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// The operator's limits on an upstream's tool, through the gateway in front
// of server-everything (a stdio child whose stdin the test keeps, as its own
// record of what it was sent): its long-running tool at most 2 at once, a
// third waiting for a place and running when one ends, a fourth refused at
// once (-32023 concurrency_limit); and a timeout, which ends a call past it
// with the error timeout and cancels the upstream's call (the upstream is
// sent notifications/cancelled for its request).
func TestEverythingLimits(t *testing.T) {
	received := filepath.Join(t.TempDir(), "upstream-stdin")
	up := gateway.Options{Command: []string{"sh", "-c", `tee "$0" | exec node "$1" stdio`, received, everything.Path(t)}}
	r := newRigWith(t, up, &mcp.Options{Tools: map[string]mcp.Policy{longRunning: {
		Mode: mcp.Always, Timeout: 4 * time.Second,
		Concurrency: mcp.Concurrency{Max: 2, Queue: 1, Wait: 10 * time.Second},
	}}})
	call := func(id string, seconds float64) *e2etest.Client {
		conn := httptransport.Dial(r.srv.URL+"/mcp", &httptransport.ClientOptions{Client: &http.Client{Transport: &http.Transport{}}})
		t.Cleanup(func() { _ = conn.Close() })
		c := e2etest.NewClient(t, conn)
		c.Initialize(`{"resumableRequests":{}}`)
		c.Send(`{"jsonrpc":"2.0","id":%q,"method":"tools/call","params":{"name":%q,"arguments":{"duration":%v,"steps":2}}}`, id, longRunning, seconds)
		return c
	}
	start := time.Now()
	a, b := call("a", 3), call("b", 3)
	poll.Until(t, 10*time.Second, "two calls running", func() bool { return r.core.Calls() == 2 })
	// The third's POST is answered once it has a place (its priming event
	// waits for its tool): sent on a goroutine of its own.
	third := make(chan *e2etest.Client, 1)
	go func() { third <- call("c", 0.5) }()
	poll.Until(t, 10*time.Second, "a third waiting", func() bool { return r.core.Queued() == 1 })
	d := call("d", 0.5)
	if resp, _ := d.Response(`"d"`); resp.Error == nil || resp.Error.Code != spec.CodeRateLimited || resp.Error.Reason != spec.ReasonConcurrencyLimit {
		t.Fatalf("a fourth call: %s, want -32023 concurrency_limit", resp.Raw)
	}
	for id, cl := range map[string]*e2etest.Client{"a": a, "b": b, "c": <-third} {
		if resp, _ := cl.Response(fmt.Sprintf("%q", id)); !strings.Contains(e2etest.Text(resp), "Steps: 2") {
			t.Fatalf("call %s: %s, want its result", id, resp.Raw)
		}
	}
	if d := time.Since(start); d < 3500*time.Millisecond {
		t.Fatalf("the three calls done after %v: the third did not wait for a place (3 s + 0.5 s)", d)
	}

	e := call("e", 20)
	resp, _ := e.Response(`"e"`)
	if resp.Error == nil || resp.Error.Reason != spec.ReasonTimeout {
		t.Fatalf("a call past the tool's timeout: %s, want the timeout error", resp.Raw)
	}
	// The upstream's request for e: the one whose duration was 20.
	poll.Until(t, 10*time.Second, "the upstream told its call is cancelled", func() bool {
		b, _ := os.ReadFile(received)
		var upID string
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, `"duration":20`) {
				_, rest, _ := strings.Cut(line, `"id":`)
				upID, _, _ = strings.Cut(rest, ",")
			}
		}
		return upID != "" && strings.Contains(string(b), `"method":"notifications/cancelled","params":{"requestId":`+upID)
	})
}
