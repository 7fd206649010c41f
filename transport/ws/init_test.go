package ws_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// A connection that opens no session within InitTimeout of virtual time is
// closed then, not before: one that sends nothing, and one that sends requests
// but never initialize. One that initializes, and one whose first request is
// of the 2026-07-28 era (no initialize needed), stay, answering pings.
func TestInitTimeout(t *testing.T) {
	const initTimeout = 10 * time.Second
	synctest.Test(t, func(t *testing.T) {
		core, err := mcp.New(demo.Server("test"), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := ws.NewHandler(core, &ws.AcceptOptions{InitTimeout: initTimeout})
		silent, silentDone := handshake(t, h)
		chatty, chattyDone := handshake(t, h)
		initialized, initializedDone := handshake(t, h)
		modern, modernDone := handshake(t, h)
		start := time.Now()

		chatty.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		chatty.next()
		initialized.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		initialized.next()
		modern.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"` + spec.MetaProtocolVersion + `":"` + spec.Version2026 + `","` + spec.MetaClientCapabilities + `":{}}}}`)
		modern.next()
		time.Sleep(initTimeout - time.Second)
		chatty.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		chatty.next()

		for name, done := range map[string]<-chan struct{}{"silent": silentDone, "chatty": chattyDone} {
			<-done
			// Closed at the deadline, after a close handshake that waits up to
			// CloseTimeout (1s) for a close frame the raw peer does not send.
			if took := time.Since(start); took < initTimeout || took > initTimeout+time.Second {
				t.Errorf("the %s connection closed after %v, want %v and its close handshake", name, took, initTimeout)
			}
		}
		<-silent.closed
		<-chatty.closed
		if n := h.InitTimeouts(); n != 2 {
			t.Errorf("%d init timeouts counted, want 2", n)
		}

		time.Sleep(time.Minute)
		synctest.Wait()
		for name, done := range map[string]<-chan struct{}{"initialized": initializedDone, "modern": modernDone} {
			select {
			case <-done:
				t.Errorf("the %s connection was closed", name)
			default:
			}
		}
		initialized.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		initialized.next()
		initialized.conn.Close()
		modern.conn.Close()
		h.Close()
		core.Close()
	})
}
