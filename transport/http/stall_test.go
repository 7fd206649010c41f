package http_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// A client whose connection stops carrying bytes mid-call and never comes
// back: the server's write of the call's result (3 MB, more than the stalled
// path's buffers hold) stalls, the write deadline (WriteTimeout) ends the
// stream, the request is detached with its result kept for a resume, and it
// expires at maxWait.
func TestStalledClientDetached(t *testing.T) {
	s := newServer(t, &mcp.Options{Engine: &resume.Options{MaxWait: 2 * time.Second}, QuickCall: -1},
		&httptransport.Options{WriteTimeout: 300 * time.Millisecond, KeepAlive: 100 * time.Millisecond})
	p := faultproxy.NewStaller(t, s.srv.Listener.Addr().String())
	c := e2etest.NewClient(t, httptransport.Dial("http://"+p.Addr()+"/mcp", nil))
	c.Initialize(`{"resumableRequests":{}}`)
	c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, strings.Repeat("x", 3<<20))
	e2etest.PolicyOf(t, c.Next())
	p.Stall()
	stalled := time.Now()
	poll.Until(t, 10*time.Second, "the request detached", func() bool { return s.core.Engine().Stats().Detached == 1 })
	t.Logf("detached %v after the stall (write deadline 300ms)", time.Since(stalled).Round(time.Millisecond))
	poll.Until(t, 10*time.Second, "the request expired", func() bool { return s.core.Engine().Stats().Expired == 1 })
}
