// Package mcp is the JSON-RPC core for MCP with resumable requests (SEP-975).
//
// A Server wraps an existing mcp-go *server.MCPServer, tools unchanged, and serves
// it on any transport.Conn. For each connection it reads messages on one goroutine
// and dispatches them:
//
//   - initialize goes to mcp-go synchronously; the core notes whether the client
//     advertised resumableRequests and adds the server's own advertisement;
//   - requests/getStatus, requests/resume, notifications/cancelled and every client
//     response are handled here (mcp-go has no hook for them);
//   - every other request runs in its own goroutine through MCPServer.HandleMessage,
//     on a context of its own that only cancellation, expiry or shutdown ends;
//   - a tools/call from a client that advertised the capability becomes resumable
//     by its tool's Policy: the core registers it with the resume engine, writes
//     notifications/requests/resumePolicy first, and from then on every outgoing
//     message of the request (notifications, server-to-client requests, the final
//     response) goes through the request's outbox with a sequence number.
//
// Notifications reach the right request through a per-request mcp-go session whose
// notification channel belongs to that request. Server-to-client requests
// (sampling, elicitation, roots) get ids from the core, travel in the originating
// request's outbox, and the client's answer, on whichever connection, is routed
// back to the waiting handler. Response ids are written from the raw bytes the
// client sent, never from mcp-go's float64 decoding.
package mcp
