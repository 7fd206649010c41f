package mcp_test

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
)

// Messages JSON-RPC allows no answer to are dropped and logged, and the connection
// carries on: a response to an id the server never asked, and a malformed
// notifications/cancelled.
func TestDroppedInputIsLogged(t *testing.T) {
	var logs logbuf.Buffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	core, err := mcp.New(demo.Server("test"), &mcp.Options{Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	c := e2etest.NewClient(t, serveCore(t, core)(t))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":"never-asked","result":{}}`)
	c.Send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"not":"an id"}}}`)
	if got := c.Quiet(`"ping"`); len(got) != 0 {
		t.Fatalf("dropped input was answered: %s", got[0].Raw)
	}
	for _, want := range []string{
		`"id":"\"never-asked\"","message":"response to an unknown request id; dropped"`,
		`"message":"malformed notifications/cancelled; ignored"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, logs.String())
		}
	}
}
