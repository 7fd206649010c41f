// Package ws serves MCP over WebSocket with resumable requests, on the core of
// package mcp, and dials it as a client (github.com/coder/websocket underneath).
//
// A WebSocket connection is one stream, like stdio: Conn is a transport.Conn and
// Handler hands each accepted connection to mcp.Server.Serve. A request started on
// one connection is resumed on another with requests/resume and its token; a
// connection that ends (closed, cut, or found dead by the keepalive) detaches its
// resumable requests, which run on until maxWait.
//
// The wire:
//
//   - Subprotocol "mcp" (Sec-WebSocket-Protocol). A client that does not offer it
//     is refused before the upgrade: HTTP 400, a JSON-RPC error with reason
//     subprotocol_required.
//   - One JSON-RPC message per text frame (a message may span continuation
//     frames). Batches are not special: an array is answered -32600 by the core.
//   - A text message over Options.MaxMessageBytes is read to its end and
//     dropped; the core answers it with -32600 message_too_large (id null) and
//     the connection stays open, as on stdio.
//   - A binary message is read to its end and dropped, and answered with -32600
//     binary_frame (id null); the connection stays open. Reason: a client that
//     sent one message the wrong way should not lose its other requests' stream;
//     closing with 1003 would tell it no more than the error does.
//   - Origin and Host are checked before the upgrade, with the policy of the
//     Streamable HTTP transport: by default only loopback hosts and http(s)
//     origins on loopback names; lists of allowed values otherwise. A refused
//     handshake gets HTTP 403 with reason forbidden. A request without Origin
//     (not from a browser) passes the Origin check.
//   - Keepalive: an end that has read nothing of its peer for
//     Options.PingInterval sends a ping; a peer whose pong has not come within
//     Options.PingTimeout is taken for dead (a half-open socket after a laptop
//     sleeps) and its connection is dropped without a close handshake. A dead
//     peer is noticed within PingInterval + PingTimeout of its last byte. A
//     connection that carries messages costs no ping, and of two ends the one
//     with the shorter interval pings alone (a dialled connection's is
//     ClientPing, 8 s; a server's 20 s): its pings and their pongs keep the
//     other end's quiet short. Pongs are answered while the peer reads, which
//     the server's Serve loop always does.
//   - Close codes sent: 1000 when a Conn is closed, 1001 when the server shuts
//     down (Handler.Close). The library itself closes with 1002 on a protocol
//     violation (an unmasked client frame, a bad opcode).
//
// Closing a Conn sends a close frame and waits for the peer's up to
// Options.CloseTimeout, then drops the TCP connection. As with the library,
// cancelling the context of a Read or Write in progress closes the connection (a
// frame cannot be abandoned half read or half written).
package ws
