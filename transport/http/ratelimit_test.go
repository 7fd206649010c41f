package http_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// A call its tool's limits refuse is answered in draft SEP-3304's shape over
// Streamable HTTP, in both eras: HTTP 429 with Retry-After (whole seconds,
// rounded up) and the JSON-RPC error -32023 with error.data.retryAfterMs. A
// call allowed gets 200.
func TestRefusalIs429(t *testing.T) {
	s := newServer(t, &mcp.Options{Tools: map[string]mcp.Policy{
		"echo":      {Mode: mcp.Never, Rate: mcp.Rate{Calls: 1, Per: 90 * time.Second}},
		"countdown": {Mode: mcp.Never, Concurrency: mcp.Concurrency{Max: 1}},
	}}, nil)
	legacy := s.raw(t)
	legacy.initialize(`{}`)
	const modern = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},`
	modernHdr := func(tool string) []string {
		return []string{"MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/call", "Mcp-Name: " + tool}
	}
	stateless := s.raw(t)

	check := func(name string, resp *http.Response, body string, reason spec.Reason, retry string) {
		t.Helper()
		var m struct {
			Error *spec.Error `json:"error"`
		}
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != retry ||
			json.Unmarshal([]byte(body), &m) != nil || m.Error == nil || m.Error.Code != spec.CodeRateLimited || m.Error.Reason != reason {
			t.Fatalf("%s: %s (Retry-After %q) %s, want 429, Retry-After %s, -32023 %s", name, resp.Status, resp.Header.Get("Retry-After"), body, retry, reason)
		}
	}
	// Rate: one call per 90 s for the principal (the server has no
	// authentication: every client is one principal).
	if resp, body := legacy.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("the first echo: %s %s", resp.Status, body)
	}
	resp, body := legacy.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}`)
	check("2025, past the rate", resp, body, spec.ReasonRateLimited, "90")
	resp, body = stateless.post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":`+modern+`"name":"echo","arguments":{"text":"c"}}}`, modernHdr("echo")...)
	check("2026, past the rate", resp, body, spec.ReasonRateLimited, "90")

	// Concurrency: one countdown at once, no queue.
	done := make(chan struct{})
	go func() {
		defer close(done)
		legacy.post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":2,"steps":1}}}`)
	}()
	poll.Until(t, 10*time.Second, "the first countdown running", func() bool { return s.core.Calls() == 1 })
	resp, body = stateless.post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":`+modern+`"name":"countdown","arguments":{"seconds":1,"steps":1}}}`, modernHdr("countdown")...)
	check("2026, past the concurrency", resp, body, spec.ReasonConcurrencyLimit, "1")
	<-done
}
