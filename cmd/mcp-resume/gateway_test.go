package main

import (
	"os"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/streamable"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// The shared end-to-end suite through the gateway: `mcp-resume gateway` in front
// of `mcp-resume serve --stdio` (this binary twice, each a real subprocess), on
// each of the gateway's transports. Everything the suite checks of the demo
// tools (progress, resumes, acks, elicitation and sampling while detached,
// cancels, both protocol eras, tasks) holds for tools the gateway only relays.
func TestGatewayEndToEnd(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		e2etest.Run(t, e2etest.Harness{
			Dial: func(t testing.TB) transport.Conn { return spawn(t, "gateway --stdio -- "+os.Args[0]) },
		})
	})
	// Two start-up lines: the gateway's listener, and its upstream child's (its
	// logs go to the gateway's stderr), in either order.
	ls := spawnNet(t, "gateway --http 127.0.0.1:0 -- "+os.Args[0], 2)
	if ls[0].URL == "" {
		ls[0], ls[1] = ls[1], ls[0]
	}
	t.Run("http", func(t *testing.T) {
		e2etest.Run(t, e2etest.Harness{
			Dial: func(t testing.TB) transport.Conn {
				c := streamable.Dial(ls[0].URL, nil)
				t.Cleanup(func() { _ = c.Close() })
				return c
			},
			Reconnect: true,
		})
	})
	t.Run("ws", func(t *testing.T) {
		e2etest.Run(t, e2etest.Harness{
			Dial: func(t testing.TB) transport.Conn {
				c, err := ws.Dial(t.Context(), ls[0].WS, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			},
			Reconnect: true,
		})
	})
}

func TestGatewayFlags(t *testing.T) {
	for _, args := range []string{
		"gateway", // no upstream
		"gateway --upstream http://127.0.0.1:1/mcp -- x", // both
		"gateway --conformance -- x",
		"gateway --upstream-token-env NOPE_NOT_SET_X --upstream http://127.0.0.1:1/mcp",
		"serve -- x", // serve takes no command
	} {
		var out strings.Builder
		if err := run(strings.Fields(args), strings.NewReader(""), &out, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
