// Package http serves MCP over Streamable HTTP with resumable requests, on
// the core of package mcp, in both eras: 2025-era sessions (protocol versions
// 2024-11-05 to 2025-11-25) and stateless 2026-07-28 requests, and is its
// client (Dial). It shares net/http's name, so its importers name it
// httptransport:
//
//	import httptransport "github.com/mcp-resume/mcp-resume/transport/http"
//
// A POST of the 2026-07-28 era (its MCP-Protocol-Version header names it, or its
// body carries the envelope) is one request on a session of its own that ends
// with its response stream: no Mcp-Session-Id (one sent is ignored), no event
// ids, no Last-Event-ID; its headers are checked against its body by the core
// (Server.CheckHeaders); an error answered as a JSON body gets 404 (-32601) or
// 400 (the malformed-request codes); closing its stream cancels it unless it
// declared SEP-975. GET and DELETE with a 2026 header get 405. What follows is
// the 2025 era.
//
// One endpoint (mounted by the caller, /mcp by convention) takes:
//
//   - POST: one JSON-RPC message. A request is answered on its own stream: an
//     application/json body when its response is the only message (and the client
//     accepts JSON), otherwise a text/event-stream that carries every message of the
//     request (policy, progress, logs, sampling and elicitation requests) and ends
//     with its response. tools/call streams from its first flush (Options.
//     FirstFlush after it arrived, or its first message: a call answered sooner
//     gets a JSON body), and an accepted requests/resume at once (its lookup
//     errors come as a JSON body), starting with a priming event (an event id and
//     a retry field, SEP-1699) that names a request the client can reconnect to:
//     a call still in the core's quick window is made resumable first, and one
//     whose tool has not started yet (its policy unknown) primes only once it
//     has (mcp.PrimingStream). A notification or a response gets 202 Accepted.
//   - GET: with Last-Event-ID, reconnects to the request stream that event belongs
//     to and replays what follows it; without, opens the session's stream for
//     messages of no request (one per session).
//   - DELETE: ends the session and cancels its calls that the client holds no
//     token of; tasks and resumable requests run on.
//
// Sessions: initialize gets an Mcp-Session-Id; every other message must carry it
// (missing: 400, unknown or ended: 404). A session with no open stream ends after
// Options.SessionIdle. Its resumable requests outlive it: the client resumes them
// with requests/resume from a new session, until maxWait.
//
// Event ids are "<request>.<seq>": the base64url of the request's raw JSON-RPC id
// and the message's sequence number in the request's outbox (0 for the priming
// event). A Last-Event-ID names a request of the same session and acknowledges
// everything up to its seq; only that request's stream is replayed. One that names
// the final response (the client has it all) or a request that has ended gets 410
// with the reason (acknowledged, expired, cancelled), and one whose seq the
// request never gave out gets 400: a reconnect is answered at once, never left
// open with nothing to come. Every call of a session that streams has an
// outbox, even for a client that did not ask for resumability (a hidden
// request: no policy, no sequence numbers), so a dropped stream can be
// reconnected this way while the session lives; a quick call answered with a
// JSON body has none.
//
// Every request is checked for DNS rebinding: its Host must be an allowed host and
// its Origin, when present, an allowed origin (by default loopback names only).
//
// The client (ClientConn) speaks both eras by the message: a request or
// notification that carries the 2026-07-28 envelope goes without the session,
// with the headers that mirror its body (MCP-Protocol-Version, Mcp-Method,
// Mcp-Name, and the caller's Mcp-Param-* through WriteWith); any other goes
// with the session and the protocol version initialize agreed on. Listen opens
// a 2025 session's GET stream. With FailOnStreamLoss, a request's event stream
// that the server closes cleanly after an event id is polled back (SEP-1699):
// after the stream's retry delay, a GET with that Last-Event-ID carries it on.
package http
