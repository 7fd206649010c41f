package http_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// A tool that closes its call's stream at once (mcp.CloseStream, SEP-1699
// polling), long before the call would become resumable by itself
// (QuickCall): the stream ends with its priming event, the call becomes
// resumable first and runs on, and the client gets the result by coming back
// with Last-Event-ID: with resumable requests declared and without.
func TestCloseStreamAtOnce(t *testing.T) {
	release := make(chan struct{}, 1)
	srv := demo.Server("test")
	srv.AddTool(mcpgo.NewTool("closer"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		if !mcp.CloseStream(ctx) {
			return mcpgo.NewToolResultError("no stream to close"), nil
		}
		select { // the stream is gone before the result exists
		case <-release:
			return mcpgo.NewToolResultText("after the close"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	s := newServerOf(t, srv, &mcp.Options{QuickCall: time.Hour}, nil, nil)
	for _, caps := range []string{`{}`, `{"resumableRequests":{}}`} {
		c := s.raw(t)
		c.initialize(caps)
		resp := c.do(context.Background(), http.MethodPost, `{"jsonrpc":"2.0","id":"1","method":"tools/call","params":{"name":"closer"}}`)
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("%s: answered %s, want an event stream", caps, ct)
		}
		var last string
		for e := range events(resp.Body) {
			if e.id != "" {
				last = e.id
			}
			if e.msg()["result"] != nil {
				t.Fatalf("%s: the result came on the closed stream: %s", caps, e.data)
			}
		}
		if last == "" {
			t.Fatalf("%s: the stream ended with no event id to come back with", caps)
		}
		release <- struct{}{}
		back := c.do(context.Background(), http.MethodGet, "", httptransport.HeaderLastEventID+": "+last)
		var result string
		for e := range events(back.Body) {
			if e.msg()["result"] != nil {
				result = e.data
			}
		}
		if !strings.Contains(result, "after the close") {
			t.Errorf("%s: back with Last-Event-ID %s: result %q, want the tool's", caps, last, result)
		}
	}
}
