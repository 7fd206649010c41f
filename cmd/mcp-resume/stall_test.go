package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// The recipe, shortened: `mcp-resume call countdown` through a proxy
// whose connections stop carrying bytes (no FIN, no RST) two steps into the
// call, on Streamable HTTP and on WebSocket. The client notices the silence
// (HTTP: 2.5 times the 200 ms keepalive the server announces; WebSocket: a
// ping every 200 ms), says so as it reconnects, says "resumed" once the server
// took the call up again (its next progress step arrives), prints each progress
// step once and the result.
func TestCallThroughStall(t *testing.T) {
	l := spawnNet(t, "serve --http 127.0.0.1:0 --keepalive 200ms", 1)[0]
	host := strings.TrimSuffix(strings.TrimPrefix(l.URL, "http://"), "/mcp")
	for _, tc := range []struct{ name, flag, path, notice string }{
		{"http", "--url", "/mcp", "connection lost (no data for 500ms), reconnecting (attempt 1)\n"},
		{"ws", "--ws", "/ws", "connection lost, reconnecting (attempt 1)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := faultproxy.New(t, host, faultproxy.NoCut, faultproxy.NoCut)
			scheme := "http://"
			if tc.name == "ws" {
				scheme = "ws://"
			}
			var stdout, stderr logbuf.Buffer
			done := make(chan error, 1)
			go func() {
				done <- run([]string{"call", tc.flag, scheme + p.Addr() + tc.path, "--ws-ping", "200ms", "countdown", "seconds=2", "steps=10"}, strings.NewReader(""), &stdout, &stderr)
			}()
			poll.Until(t, 20*time.Second, "progress 2/10", func() bool { return strings.Contains(stderr.String(), "progress 2/10") })
			p.Stall()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("call: %v; stderr %q", err, stderr.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("no result within 60 s; stderr %q", stderr.String())
			}
			lost := strings.Index(stderr.String(), tc.notice)
			resumed := strings.Index(stderr.String(), "\nresumed\n")
			if !strings.Contains(stdout.String(), "countdown done: 10 of 10 steps") || lost < 0 || resumed < lost {
				t.Fatalf("stdout %q, stderr %q: want %q, then \"resumed\"", stdout.String(), stderr.String(), tc.notice)
			}
			for i := 1; i <= 10; i++ {
				if n := strings.Count(stderr.String(), "progress "+strconv.Itoa(i)+"/10"); n != 1 {
					t.Fatalf("progress %d/10 printed %d times: %q", i, n, stderr.String())
				}
			}
		})
	}
}
