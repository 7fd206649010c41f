package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/internal/everything"
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

// The recipe: `mcp-resume call` prints server-everything's
// long-running tool's progress and result through the gateway, in front of the
// server as a stdio child and as a Streamable HTTP upstream.
func TestGatewayEverythingCall(t *testing.T) {
	path := everything.Path(t)
	for name, args := range map[string]string{
		"stdio child":   "gateway --http 127.0.0.1:0 -- node " + path + " stdio",
		"HTTP upstream": "gateway --http 127.0.0.1:0 --upstream " + everything.StartHTTP(t),
	} {
		t.Run(name, func(t *testing.T) {
			l := spawnNet(t, args, 1)[0]
			var out, errOut strings.Builder
			err := run([]string{"call", "--url", l.URL, "trigger-long-running-operation", "duration=1", "steps=4"}, strings.NewReader(""), &out, &errOut)
			if err != nil || !strings.Contains(out.String(), "Long running operation completed. Duration: 1 seconds, Steps: 4.") {
				t.Fatalf("call: %v; stdout %q; stderr %q", err, out.String(), errOut.String())
			}
			for i := 1; i <= 4; i++ {
				if want := fmt.Sprintf("progress %d/4", i); !strings.Contains(errOut.String(), want) {
					t.Errorf("stderr %q lacks %q", errOut.String(), want)
				}
			}
		})
	}
}

// The gateway's own stdio transport (a real subprocess) in front of
// server-everything: progress and the result.
func TestGatewayEverythingStdio(t *testing.T) {
	c := e2etest.NewClient(t, spawn(t, "gateway --stdio -- node "+everything.Path(t)+" stdio"))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":0.4,"steps":2},"_meta":{"progressToken":"p"}}}`)
	resp, before := c.Response("1")
	progress := 0
	for _, m := range before {
		if m.Method == "notifications/progress" {
			progress++
		}
	}
	if progress != 2 || !strings.Contains(e2etest.Text(resp), "Steps: 2.") {
		t.Fatalf("%d progress, result %s", progress, resp.Raw)
	}
}
