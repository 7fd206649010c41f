package spec

// Methods of SEP-975 and the MCP methods the resume layer looks at.
const (
	MethodResumePolicy = "notifications/requests/resumePolicy"
	MethodGetStatus    = "requests/getStatus"
	MethodResume       = "requests/resume"

	MethodInitialize     = "initialize"
	MethodToolsCall      = "tools/call"
	MethodPromptsGet     = "prompts/get"
	MethodResourcesRead  = "resources/read"
	MethodCancelled      = "notifications/cancelled"
	MethodProgress       = "notifications/progress"
	MethodServerDiscover = "server/discover"
)

// CapabilityName is the key of the capability, under `capabilities` (the SEP) or
// under `capabilities.experimental` (for clients whose capability struct lacks the
// field), and the key of the server's advertisement under `experimental`.
const CapabilityName = "resumableRequests"

// Keys this project adds to `_meta`. They are namespaced as MCP asks of extensions.
const (
	// MetaSeq carries a message's sequence number within its request (1, 2, 3, ...)
	// in the `_meta` of its params, its result, or its error's data.
	MetaSeq = "io.mcp-resume/seq"
	// MetaAck, in the `_meta` of requests/resume or requests/getStatus params, says
	// the client holds every message of the request up to and including this number.
	MetaAck = "io.mcp-resume/ack"
	// MetaDropped, in a getStatus result, counts messages dropped under the
	// request's byte budget (log notifications) or coalesced (older progress).
	MetaDropped = "io.mcp-resume/dropped"
	// MetaKey, in the `_meta` of a tools/call's params, names the call with a key
	// the client chose (unguessable: KeyMinLen to KeyMaxLen characters of the
	// base64url alphabet, '.' or '~'). The key is the request's resume token: the
	// client can ask its status or resume it before its policy arrived, and a
	// tools/call sent again with the same key and id attaches to the call instead
	// of running the tool twice.
	MetaKey = "io.mcp-resume/key"
	// MetaDeferred, in the _meta of a tool's result, marks a deferred answer
	// (the call still runs; see the await tool): what to call to get its
	// result, {"tool": name, "arguments": {...}}, and how it stands.
	MetaDeferred = "io.mcp-resume/deferred"
	// MetaReason, in the _meta of the await tool's error result, is why it
	// failed (a Reason: not_found, expired, ...).
	MetaReason = "io.mcp-resume/reason"
	// MetaRequestedTTL, in the `_meta` of a 2025-11-25 CreateTaskResult, is the
	// ttl (milliseconds) the client asked for when the server cut it to its
	// maximum; the task's ttl is what it got.
	MetaRequestedTTL = "io.mcp-resume/requestedTtl"
)

// Bounds of a call key (MetaKey): 22 characters of base64url carry 128 bits.
const (
	KeyMinLen = 22
	KeyMaxLen = 128
)

// Extension names, listed by the server's advertisement and, for ExtensionAck, by a
// client that wants acknowledgement semantics from its first request on.
const (
	ExtensionSeq = "io.mcp-resume/seq"
	ExtensionAck = "io.mcp-resume/ack"
	// ExtensionKey: the server takes call keys (MetaKey).
	ExtensionKey = "io.mcp-resume/key"
)

// JSON-RPC 2.0 error codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// Status is the state of a request as requests/getStatus reports it.
type Status string

const (
	StatusProcessing Status = "processing"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
)

// Reason is the stable, machine-readable `error.data.reason` of an error this
// server sends. Clients may switch on it; its values never change meaning.
type Reason string

const (
	// ReasonNotFound: no request with this token and id. A wrong token gives the same.
	ReasonNotFound Reason = "not_found"
	// ReasonExpired: the request was dropped after maxWait without a client, or its
	// result's retention window ended.
	ReasonExpired Reason = "expired"
	// ReasonCancelled: the client cancelled the request.
	ReasonCancelled Reason = "cancelled"
	// ReasonAcknowledged: the client acknowledged the request's final response
	// (the ack extension, or Last-Event-ID on Streamable HTTP), so it holds the
	// result; the server no longer keeps it. Nothing is lost: do not retry.
	ReasonAcknowledged Reason = "acknowledged"
	// ReasonInvalidAck: an acknowledgement names a message number the request
	// never gave out; nothing was applied. (On a GET's Last-Event-ID, HTTP 400
	// invalid_event_id instead.)
	ReasonInvalidAck Reason = "invalid_ack"
	// ReasonServerRestarted: the request was running when its server stopped.
	ReasonServerRestarted Reason = "server_restarted"
	// ReasonOwnerLost: the instance running the request is gone.
	ReasonOwnerLost Reason = "owner_lost"
	// ReasonOwnerUnreachable (-32603): the instance of a cluster running the
	// request holds its lease but did not answer (it may have just died: the
	// request is claimed once the lease runs out). error.data.retryAfter says
	// when to ask again. Retryable.
	ReasonOwnerUnreachable Reason = "owner_unreachable"
	// ReasonStoreLost: the durable store lost what it held of the request (its
	// NATS stream or bucket was deleted, or NATS came back without its data):
	// its messages and result are gone, and it ended failed.
	ReasonStoreLost Reason = "store_lost"
	// ReasonServerStopped: the instance running the request stopped for good
	// (a shutdown whose drain grace ended) before the request finished, and
	// nothing runs it again: its tool was cancelled. Calling the tool again
	// starts it anew (on a cluster, on another instance).
	ReasonServerStopped Reason = "server_stopped"

	ReasonParseError      Reason = "parse_error"
	ReasonInvalidRequest  Reason = "invalid_request"
	ReasonInvalidParams   Reason = "invalid_params"
	ReasonDuplicateID     Reason = "duplicate_id"
	ReasonMessageTooLarge Reason = "message_too_large"
	ReasonShuttingDown    Reason = "shutting_down"
	// ReasonRateLimited (-32023, HTTP 429): too many failed token checks
	// (getStatus, resume or cancel by token answered not_found) from this
	// principal or remote address, the check not made; or a tool's rate for
	// the principal spent (its policy's rate), the call not run.
	// error.data.retryAfterMs (and retryAfter, in whole seconds) says when one
	// is allowed again. Retryable.
	ReasonRateLimited Reason = "rate_limited"
	// ReasonConcurrencyLimit (-32023, HTTP 429): the tool runs as many calls as
	// its policy allows (of all, or of this principal) and this one did not
	// get a place within the policy's queue wait; not run. Retryable
	// (error.data.retryAfterMs).
	ReasonConcurrencyLimit Reason = "concurrency_limit"
	// ReasonTimeout: the call ran past its tool's timeout (its policy): its tool
	// was cancelled, and the call ended with this error, whether its client was
	// attached, detached or polling a task.
	ReasonTimeout Reason = "timeout"
	// ReasonTooManyRequests (-32023, HTTP 429): the client's principal has the
	// maximum of requests in flight; this one was not run. Retryable once one
	// has finished (error.data.retryAfterMs: a second).
	ReasonTooManyRequests Reason = "too_many_requests"
	// ReasonOverloaded (-32023, HTTP 429): the server is so short of memory
	// that it takes no new call for now; this one was not run. Retryable
	// (error.data.retryAfterMs), on this instance or another of a cluster.
	ReasonOverloaded Reason = "overloaded"
	// ReasonTooManySessions: initialize refused, the server (or the client's
	// principal or address) holds as many sessions as it may, all of them in use.
	ReasonTooManySessions Reason = "too_many_sessions"

	// Streamable HTTP (transport/http): each goes with the HTTP status named.

	// ReasonSessionRequired (400): a message other than initialize without an
	// Mcp-Session-Id header.
	ReasonSessionRequired Reason = "session_required"
	// ReasonUnknownSession (404): the Mcp-Session-Id names no live session (never
	// issued, ended by DELETE, or expired); initialize again.
	ReasonUnknownSession Reason = "unknown_session"
	// ReasonForbidden (403): the Host or Origin header is not allowed (DNS
	// rebinding protection).
	ReasonForbidden Reason = "forbidden"
	// ReasonUnauthorized (401, with WWW-Authenticate: Bearer): authentication is
	// configured and the request carries no API key, or one the server does not
	// know.
	ReasonUnauthorized Reason = "unauthorized"
	// ReasonUnsupportedMediaType (415): a POST body that is not application/json.
	ReasonUnsupportedMediaType Reason = "unsupported_media_type"
	// ReasonNotAcceptable (406): the Accept header rules out what the method answers
	// with (POST needs application/json and text/event-stream, GET the latter).
	ReasonNotAcceptable Reason = "not_acceptable"
	// ReasonUnsupportedVersion (400): an MCP-Protocol-Version this server does not
	// speak.
	ReasonUnsupportedVersion Reason = "unsupported_protocol_version"
	// ReasonInvalidEventID (400): a Last-Event-ID this server never issues.
	ReasonInvalidEventID Reason = "invalid_event_id"
	// ReasonStreamConflict (409): a second standalone GET stream for a session.
	ReasonStreamConflict Reason = "stream_conflict"

	// The network listener and HTTP (package transport, transport/http).

	// ReasonTooManyConnections (HTTP 503, -32603): a connection refused at a
	// connection bound (serve --max-conns, --max-conns-per-address).
	ReasonTooManyConnections Reason = "too_many_connections"
	// ReasonRequestTimeout (HTTP 408, -32600): a request whose body did not arrive
	// within serve --body-timeout.
	ReasonRequestTimeout Reason = "request_timeout"

	// WebSocket (transport/ws).

	// ReasonSubprotocolRequired (HTTP 400, before the upgrade): the client did not
	// offer the WebSocket subprotocol "mcp".
	ReasonSubprotocolRequired Reason = "subprotocol_required"
	// ReasonBinaryFrame (-32600, id null): a binary WebSocket message; messages are
	// text. The message is skipped and the connection stays open.
	ReasonBinaryFrame Reason = "binary_frame"

	// Call keys (MetaKey).

	// ReasonInvalidKey (-32602): a call key that is not a string of KeyMinLen to
	// KeyMaxLen characters of the base64url alphabet, '.' or '~'.
	ReasonInvalidKey Reason = "invalid_key"
	// ReasonAmbiguousKey (-32602): a message with a key that decoders can read
	// two ways: repeated, repeated ignoring case, or a member's name in another
	// case (spec/keys.go).
	ReasonAmbiguousKey Reason = "ambiguous_key"
	// ReasonKeyInUse (-32602): the call key names another request (another id) of
	// this principal.
	ReasonKeyInUse Reason = "key_in_use"
	// ReasonNotResumable (-32602): a tools/call sent again with the key of a call
	// that runs, but not as a resumable request (its tool's policy): it ends with
	// the connection it came on, and is not run a second time.
	ReasonNotResumable Reason = "not_resumable"
	// ReasonInvalidHandle: the await tool got a handle this server did not
	// hand out (malformed).
	ReasonInvalidHandle Reason = "invalid_handle"
	// ReasonSuperseded: an await of a deferred call ended because another
	// await of the same handle took the call over.
	ReasonSuperseded Reason = "superseded"
)

// MetaRelatedTask (_meta) names the task a message belongs to (2025-11-25
// tasks): {"taskId": "..."}, on the questions and notifications of a task.
const MetaRelatedTask = "io.modelcontextprotocol/related-task"
