// Package client is an MCP client whose requests survive disconnects: the client
// half of SEP-975 (resumable requests) as mcp-resume implements it (spec/README.md).
//
// A Client connects through a Dialer, any function that returns a new
// transport.Conn: transport/stdio.Command for a server started as a child process,
// httptransport.Dial (with ClientOptions.FailOnStreamLoss) for Streamable HTTP,
// transport/ws.Dial for WebSocket. It advertises resumableRequests with the ack
// extension in initialize and records the resume policy the server sends for each
// request.
//
// When the connection is lost, the Client:
//
//   - fails each request in flight that the server had not made resumable, with
//     an error matching ErrNotResumable (its outcome is unknown; a tool call is
//     not sent twice);
//   - dials again, waiting at least the requests' minWait and backing off between
//     failed attempts, and gives a request up (ErrGaveUp) once its maxWait passed
//     without a connection;
//   - initializes the new connection and sends requests/resume for each
//     resumable request: the original id, its token, and `_meta["io.mcp-resume/ack"]`
//     = the last sequence number received, so that the server sends only what the
//     client does not have. A resume the server answers with a retryAfter
//     without taking it up (owner_unreachable: the cluster instance that runs the
//     request did not answer, and the request is claimed once its lease runs
//     out; rate_limited) is sent again on the same connection after that
//     delay, up to 30 times.
//
// A connection that reports the loss of one request's stream while it lives on
// (httptransport.ClientOptions.ReportStreamLoss: a POST's event stream cut, or
// silent) costs that request alone: its stream is taken up with the server's
// own means when it gave event ids (a GET with Last-Event-ID), else the request
// is resumed on the same connection, sent again, or fails, as above. A request
// whose write failed before the server could have it (transport.ErrMaybeSent
// tells when it may have), or that the server refused for a session it forgot
// (unknown_session, which also drops the connection), is sent again on the
// next connection, up to 3 times.
//
// A connection that goes silent (a laptop's sleep, a NAT that forgot the flow:
// no FIN, no RST) is taken for dead within 15 s with the transports' defaults:
// over Streamable HTTP the client asks for a keepalive on its requests'
// streams (httptransport.ClientKeepAlive) and takes one silent for 2.5 times
// it for lost; over WebSocket it pings a connection quiet for ws.ClientPing.
//
// A tools/call that the server answers with a deferred answer (the tool runs
// on; the answer names a tool to call for its result: a server with
// mcp.Options.AnswerWithin, or `mcp-resume serve --answer-within`) is followed
// by Call itself: it calls the tool the answer names with its arguments, again
// while that answers deferred, and returns the call's own result (deferred.go).
// The awaits' progress goes to the call's Progress, their questions to its
// handlers; a Call whose ctx ends stops the call on the server. Only a caller
// that hands the answer on to a client that cannot wait asks for it as it is
// (CallOptions.KeepDeferred).
//
// CallTool therefore returns the tool's result however many disconnects happen.
// Progress callbacks run exactly once per notification and in order: each call
// carries a progress token of its own (its id), and a notification whose sequence
// number was seen already is dropped. Sampling and elicitation requests go to
// handlers the caller supplies (Options.Sampling, Options.Elicitation); one that
// the server sends again after a resume gets the same answer, the handler runs
// once per server request id.
//
// Request ids are strings with a random prefix per Client ("c-<12 hex>-<n>"), so
// they never collide with ids a server still keeps resumable from an earlier
// connection or another client.
//
// Against a server that does not offer resumability (any plain MCP server) the
// Client works as a plain MCP client: no policy arrives, nothing is resumed, and a
// disconnect fails the calls in flight with ErrNotResumable.
//
// With Options.ProtocolVersion of the 2026-07-28 era the Client speaks that era
// where the server does (modern.go): Connect asks server/discover (and settles
// the version on a -32022 answer, or initializes a server of the 2025 era);
// every request carries the envelope in params._meta, SEP-975 declared as the
// era's extension, so a server of this project still makes calls resumable.
// A server's questions then come as input_required results (multi round-trip
// requests): Call answers them with the same handlers and sends the request
// again with the answers and the server's requestState, unchanged. ListTools
// keeps the tools' schemas as written, and over Streamable HTTP a tools/call
// mirrors the arguments its tool's x-mcp-header annotations name into
// Mcp-Param-* headers; a tool whose annotations are invalid is left out.
//
// In the 2025 era over Streamable HTTP, the Client listens on the session's GET
// stream after initialize (questions and notifications of no request). In
// either era, an accepted elicitation gets the requested schema's defaults for
// the fields its handler left out (SEP-1034).
//
// A client of a 2025 session with Options.Discover asks each connection's
// server/discover whether the server speaks 2026-07-28 too, and sends a
// request with CallOptions.Envelope in that era there: the session carries list
// changes, subscriptions and the server's requests of no call, and such a
// request declares the capabilities and log level its Envelope gives (a
// gateway passes its own client's on). CallOptions.ReturnInputRequired hands an
// input_required answer back to the caller instead of answering it.
//
// A Call may have handlers of its own (CallOptions.OnRequest, OnLog): the
// server's requests and log messages that belong to it go there instead of the
// Options' (Call says how the client tells). With CallOptions.AsTask a tool call
// becomes a task of the server's, which the client follows to its end (either
// era's form). With Options.KeepConnected the client connects again after every
// loss, for a client that listens to its server (a gateway).
package client
