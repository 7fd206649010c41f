// Package transport is the connection boundary between the MCP core and the bytes
// on a wire: a Conn reads and writes whole JSON-RPC messages. Sub-packages implement
// it for stdio (transport/stdio), Streamable HTTP (transport/http) and WebSocket
// (transport/ws); Pipe is an in-memory pair for tests and in-process use. Contract
// tests for every Conn live in package conntest.
//
// The checks both network handlers make on an HTTP request live here too:
// AllowedRequest (Host and Origin, against DNS rebinding) and KeySet (bearer API
// keys, each mapped to a principal, stored as SHA-256 and compared in constant
// time).
package transport
