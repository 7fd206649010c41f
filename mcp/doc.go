// Package mcp is the JSON-RPC core for MCP with resumable requests (SEP-975), in
// both eras of the protocol: 2025-era sessions opened by initialize, and
// stateless 2026-07-28 requests that carry their envelope in params._meta.
//
// A Server wraps an existing mcp-go *server.MCPServer, tools unchanged, and serves
// it on any transport.Conn. For each connection it reads messages on one goroutine
// and dispatches them:
//
//   - a request with a 2026-07-28 envelope is served statelessly (session_envelope.go): its
//     client capabilities, info and log level are its own; a tool's question to
//     the client ends the request's round as input_required and the client's
//     retry carries the answer to the waiting tool (call_mrtr.go); it is resumable
//     only when the request declares SEP-975 as an extension;
//   - initialize goes to mcp-go synchronously; the core notes whether the client
//     advertised resumableRequests and adds the server's own advertisement;
//   - requests/getStatus, requests/resume, notifications/cancelled and every client
//     response are handled here (mcp-go has no hook for them);
//   - every other request runs on a worker goroutine (kept between calls, so a
//     call does not grow a fresh stack) through MCPServer.HandleMessage, on a
//     context of its own that only cancellation, expiry or shutdown ends;
//   - a tools/call from a client that advertised the capability becomes resumable
//     by its tool's Policy: the core registers it with the resume engine, writes
//     notifications/requests/resumePolicy first, and from then on every outgoing
//     message of the request (notifications, server-to-client requests, the final
//     response) goes through the request's outbox with a sequence number.
//
// Notifications reach the right request through a per-request mcp-go session whose
// notification channel belongs to that request. mcp-go's send into it never blocks
// and drops what does not fit; the core holds the sending tool back until there is
// room instead (through the session hook mcp-go calls right before each send), so
// a tool that notifies in a tight loop loses nothing. Server-to-client requests
// (sampling, elicitation, roots) get ids from the core, travel in the originating
// request's outbox, and the client's answer, on whichever connection, is routed
// back to the waiting handler. Response ids are written from the raw bytes the
// client sent, never from mcp-go's float64 decoding.
//
// Streams. Everything the core writes goes to a Stream, as a Message (its kind,
// its sequence number, its bytes): the stream of the request it belongs to, or the session's default stream for
// messages of no request. Serve gives every message of a connection the
// connection itself as its stream (stdio, WebSocket). A transport with several
// streams per session (Streamable HTTP) uses a Session instead: it hands each
// message to Session.Handle with the stream its answers go to, reconnects a
// request's stream by event id (Session.Reconnect), and reports closed streams
// (Session.StreamClosed). In such a session every call gets an outbox, also for a
// client that did not ask for resumability, so that any dropped stream can be
// reconnected while the session lives; that client never sees a policy, a token
// or a sequence number.
//
// Restarts. With a durable store, a tool whose Policy is Restartable stores its
// call's request; a Server whose engine recovers such a call that was running
// runs it again on a session of its own (no client until one resumes it).
//
// Principals. A transport that authenticates its clients gives each session the
// principal it authenticated (SessionOptions: ServeWith, NewSession). Every
// resumable request the session starts is bound to it (resume.StartOptions), and
// getStatus, resume and cancel by token from a session of another principal get
// exactly the answer of an unknown request (resume.Engine.LookupAs).
package mcp
