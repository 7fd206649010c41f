package client

import (
	"fmt"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/internal/invariant"
	"github.com/mcp-resume/mcp-resume/spec"
)

// state is what the client's goroutines share: whether it closed, the
// connection of the moment (linkState: links.go), the requests in flight and
// what a server's message is matched to (registry: registry.go), and what the
// server said of itself (learned). It is read and changed only through
// Client.update, under the client's one lock, which checks its invariants
// after each change. The calls it holds are guarded by the same lock (the
// fields call says so of: "guarded by Client.st").
type state struct {
	closed bool // Close ran: no call is added any more, every call is finished
	conn   linkState
	reg    registry
	server learned
}

// linkState is the connection of the moment.
type linkState struct {
	link  *link         // the current connection, nil while there is none
	ready chan struct{} // closed while link is set; replaced when it is lost
	// headers: the latest link carries HTTP headers (a headerWriter).
	headers bool
	lastErr error // why the last connection attempt failed
}

// learned is what the server said of itself: its answer to the latest
// initialize (or server/discover's, in that form), its SEP-975
// advertisement, and the tools ListTools listed last.
type learned struct {
	init  *mcpgo.InitializeResult
	caps  *spec.ServerCapability
	tools tools
}

// update runs f on the client's state under its lock, then checks the
// state's invariants. f reads and changes the state and returns; what its
// caller does with what it read (writes, callbacks, goroutines) runs after
// update returns. f must not call back into the client; it may wait on
// Client.quiet, which releases the lock while it waits.
func (c *Client) update(f func(st *state)) { c.st.Update(f) }

// newState is the state of a client before its first connection.
func newState() state {
	return state{conn: linkState{ready: make(chan struct{})}, reg: newRegistry()}
}

// Check panics when the state breaks an invariant: a bug of the code that
// changed it, found at the change. The checks that visit every call run in
// test binaries only (invariant.Thorough).
func (st *state) Check() {
	if (st.conn.link != nil) != closed(st.conn.ready) {
		panic("client: ready is closed while there is no link, or open while there is one")
	}
	if !invariant.Thorough() {
		return
	}
	for key, cl := range st.reg.calls {
		if key != cl.key {
			panic(fmt.Sprintf("client: call %s is registered under %s", cl.key, key))
		}
		if cl.finished {
			continue
		}
		switch {
		case st.closed:
			panic(fmt.Sprintf("client: call %s is in flight on a closed client", cl.key))
		case cl.link != nil && !cl.sent:
			panic(fmt.Sprintf("client: call %s is on a link it was not sent on", cl.key))
		case cl.resuming && (cl.policy == nil || cl.link == nil):
			panic(fmt.Sprintf("client: call %s is resumed without a policy or a link", cl.key))
		case cl.unconfirmed && !cl.resuming:
			panic(fmt.Sprintf("client: call %s waits for a resume it did not send", cl.key))
		case cl.callbacks < 0:
			panic(fmt.Sprintf("client: call %s counts %d progress callbacks", cl.key, cl.callbacks))
		}
	}
}

// closed reports whether ch is closed.
func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
