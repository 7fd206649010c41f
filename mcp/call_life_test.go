package mcp_test

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/memstore"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// A call of policy Always that answers within Options.QuickCall, sending
// nothing before, is answered as a plain call: its response comes first, with
// no sequence number, and the engine never held it. A call that runs longer
// gets its policy once the window has passed (virtual time), and its response
// through its outbox.
func TestQuickCallAnsweredPlainly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{"resumableRequests":{"extensions":["io.mcp-resume/ack"]}}`)

		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
		if m := c.Next(); string(m.ID) != "1" || e2etest.Text(m) != "hi" || m.Seq() != 0 {
			t.Fatalf("a quick call's first message: %s, want its plain response", m.Raw)
		}
		if st := core.Engine().Stats(); st.Processing+st.Completed+st.Failed != 0 {
			t.Errorf("the engine holds %+v after a quick call", st)
		}

		start := time.Now()
		c.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"steps":1}}}`)
		e2etest.PolicyOf(t, c.Next())
		if d := time.Since(start); d != mcp.DefaultQuickCall {
			t.Errorf("the policy came after %v, want %v", d, mcp.DefaultQuickCall)
		}
		if m := c.Next(); string(m.ID) != "2" || m.Seq() == 0 {
			t.Fatalf("want the response from the outbox, got %s", m.Raw)
		}
	})
}

// A call that sends a message within the window becomes resumable first: its
// policy, then its notifications numbered from its outbox, then its response.
func TestQuickCallNotifiesResumable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{"resumableRequests":{"extensions":["io.mcp-resume/ack"]}}`)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0,"steps":3},"_meta":{"progressToken":"p"}}}`)
		e2etest.PolicyOf(t, c.Next())
		resp, before := c.Response("1")
		if len(before) != 3 {
			t.Fatalf("%d messages before the response, want 3 progress notifications", len(before))
		}
		for i, m := range before {
			if e2etest.Progress(m) != i+1 || m.Seq() != uint64(i+1) {
				t.Errorf("notification %d: %s, want progress %d with seq %d", i, m.Raw, i+1, i+1)
			}
		}
		if resp.Seq() != 4 {
			t.Errorf("response %s, want seq 4", resp.Raw)
		}
	})
}

// A call its client named with a key is resumable from its start, however
// quick: the client holds its token (the key) already. So is every call with
// a negative QuickCall.
func TestQuickCallKeyedOrOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			opts  *mcp.Options
			param string
		}{
			{"keyed", nil, `,"_meta":{"io.mcp-resume/key":"k7Xq2mP9vR4tY8wZ1nB6cD3fH5jL0sA"}`},
			{"off", &mcp.Options{QuickCall: -1}, ""},
		} {
			core, err := mcp.New(demo.Server("test"), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			c := e2etest.NewClient(t, serveCore(t, core)(t))
			c.Initialize(`{"resumableRequests":{}}`)
			c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}%s}}`, tc.param)
			if m := c.Next(); m.Method != spec.MethodResumePolicy {
				t.Errorf("%s: first message %s, want the policy", tc.name, m.Raw)
			}
			c.Response("1")
		}
	})
}

// A connection lost within the window cancels the call: its client holds no
// token, so nobody could resume it.
func TestQuickCallLostConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		causes := make(chan error, 1)
		core, err := mcp.New(blockServer(causes), &mcp.Options{QuickCall: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c := e2etest.NewClient(t, serveCore(t, core)(t))
		c.Initialize(`{"resumableRequests":{}}`)
		c.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block"}}`)
		synctest.Wait()
		c.Close()
		if err := <-causes; err == nil || !strings.Contains(err.Error(), "connection lost") {
			t.Errorf("the tool ended with %v, want the lost connection", err)
		}
		if st := core.Engine().Stats(); st.Processing != 0 {
			t.Errorf("the engine holds %+v", st)
		}
	})
}

// A restartable tool of a 2026 request (of a client that declared SEP-975, so
// that it outlives the process) that asks its client within the quick window (the question makes the call a request at once, MRTR) keeps its
// policy's restartability: after a restart on its store it runs again,
// instead of failing with server_restarted.
func TestQuickCallAskRestartable(t *testing.T) {
	for _, restartable := range []bool{true, false} {
		st := memstore.New()
		opts := mcp.Options{Store: st, Tools: map[string]mcp.Policy{"ask": {Mode: mcp.Always, Restartable: restartable}}}
		core1, err := mcp.New(demo.Server("test"), &opts)
		if err != nil {
			t.Fatal(err)
		}
		a := e2etest.NewClient(t, serveSessions(t, core1)(t, nil))
		caps := fmt.Sprintf(`{"elicitation":{},"extensions":{%q:{}}}`, spec.ExtensionResumable)
		a.Modern(`"q"`, "tools/call", `"name":"ask","arguments":{"question":"now?"}`, caps)
		if m, _ := a.Response(`"q"`); !strings.Contains(string(m.Raw), "input_required") {
			t.Fatalf("the question: %s", m.Raw)
		}
		a.Close()
		core1.Close() // the request stays in the store, waiting for its answer

		core2, err := mcp.New(demo.Server("test"), &opts)
		if err != nil {
			t.Fatal(err)
		}
		var stats resume.Stats
		poll.Until(t, 10*time.Second, "the recovery", func() bool {
			stats = core2.Engine().Stats()
			return stats.Processing+stats.Failed > 0
		})
		if restartable && (stats.Processing != 1 || stats.Failed != 0) {
			t.Errorf("restartable: %+v after the restart, want the call running again", stats)
		}
		if !restartable && stats.Failed != 1 {
			t.Errorf("not restartable: %+v after the restart, want it failed (server_restarted)", stats)
		}
		core2.Close()
	}
}
