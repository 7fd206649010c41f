package e2etest

import (
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// LimitsConfig is the policy file (serve --config) of a server RunLimits
// tests: echo at most once an hour per principal, countdown ended after 1 s.
const LimitsConfig = `version: 1
tools:
  echo:
    rate: {calls: 1, per: 1h}
  countdown:
    timeout: 1s
`

// RunLimits checks a server that runs the demo tools under LimitsConfig, in
// both eras, on one connection of h: a tool's rate refuses the second call of
// the principal with -32023 rate_limited and a retryAfterMs (the 2026 era's
// call as well as the 2025 one's: one bucket), and a tool's timeout ends a
// call past it with the error timeout.
func RunLimits(t *testing.T, h Harness) {
	c := NewClient(t, h.Dial(t))
	c.Initialize(resumableCaps)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}}`)
	if resp, _ := c.Response("1"); Text(resp) != "a" {
		t.Fatalf("the first echo: %s", resp.Raw)
	}
	refused := func(what string, m Msg) {
		t.Helper()
		if e := m.Error; e == nil || e.Code != spec.CodeRateLimited || e.Reason != spec.ReasonRateLimited || e.RetryAfterMs < 3_500_000 || e.RetryAfterMs > 3_600_000 {
			t.Fatalf("%s: %s, want -32023 rate_limited with retryAfterMs about an hour", what, m.Raw)
		}
	}
	c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"b"}}}`)
	resp, _ := c.Response("2")
	refused("a second echo (2025)", resp)
	c.Modern("3", "tools/call", `"name":"echo","arguments":{"text":"c"}`, `{}`)
	resp, _ = c.Response("3")
	refused("a second echo (2026)", resp)

	timedOut := func(what string, m Msg) {
		t.Helper()
		if e := m.Error; e == nil || e.Reason != spec.ReasonTimeout {
			t.Fatalf("%s: %s, want the error timeout", what, m.Raw)
		}
	}
	c.Send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":5,"steps":1}}}`)
	resp, _ = c.Response("4")
	timedOut("a countdown of 5 s (2025)", resp)
	c.Modern("5", "tools/call", `"name":"countdown","arguments":{"seconds":5,"steps":1}`, `{}`)
	resp, _ = c.Response("5")
	timedOut("a countdown of 5 s (2026)", resp)
}
