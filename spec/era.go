package spec

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Protocol versions. Requests of the 2025 era (LegacyVersions) belong to a session
// opened by initialize; requests of the 2026 era (ModernVersions) are stateless and
// carry their protocol version, client capabilities and client info in
// params._meta (the envelope).
var (
	LegacyVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	ModernVersions = []string{Version2026}
	// Versions is every version served, oldest first.
	Versions = append(slices.Clone(LegacyVersions), ModernVersions...)
)

// Version2026 is the stateless revision of MCP.
const Version2026 = "2026-07-28"

// Keys of the 2026-07-28 envelope in a request's params._meta, and of the
// server's _meta in its results.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// ExtensionResumable is SEP-975 as a 2026-07-28 extension: a client declares it
// in a request's clientCapabilities.extensions (its value a ClientCapability),
// and the request keeps every semantic of a resumable request of the 2025 era.
// The server advertises it in server/discover's capabilities.extensions (its
// value a ServerCapability).
const ExtensionResumable = "io.mcp-resume/resumableRequests"

// Methods of the 2026-07-28 era.
const (
	MethodSubscriptionsListen = "subscriptions/listen"
)

// Error codes of the 2026-07-28 era.
const (
	CodeHeaderMismatch     = -32020 // HTTP headers and body disagree, or a required header is missing
	CodeMissingCapability  = -32021 // the request needs a client capability it did not declare
	CodeUnsupportedVersion = -32022 // error.data: supported, requested
	// CodeRateLimited (draft SEP-3304, RateLimited): too many requests; error.data
	// says in retryAfterMs when to try again. HTTP 429 with Retry-After.
	CodeRateLimited = -32023
)

// Reasons of the 2026-07-28 era's errors.
const (
	ReasonHeaderMismatch    Reason = "header_mismatch"
	ReasonMissingCapability Reason = "missing_capability"
	ReasonEraMismatch       Reason = "era_mismatch"
	ReasonInvalidState      Reason = "invalid_request_state"
)

// IsModern reports whether v is a protocol version of the stateless era.
func IsModern(v string) bool { return slices.Contains(ModernVersions, v) }

// Supported reports whether v is a protocol version this server speaks.
func Supported(v string) bool { return slices.Contains(Versions, v) }

// Envelope is what a 2026-07-28 request carries in params._meta.
type Envelope struct {
	// Version is the request's protocol version; "" when the request has none (a
	// 2025-era request).
	Version string
	// Capabilities is the client's capabilities object for this request; nil
	// when absent.
	Capabilities json.RawMessage
}

// Modern reports whether the request declared a protocol version in its envelope.
func (e Envelope) Modern() bool { return e.Version != "" }

// ClientCapabilities is the part of a 2026 client's capabilities the core reads.
type ClientCapabilities struct {
	Elicitation  *json.RawMessage           `json:"elicitation,omitempty"`
	Sampling     *json.RawMessage           `json:"sampling,omitempty"`
	Roots        *json.RawMessage           `json:"roots,omitempty"`
	Extensions   map[string]json.RawMessage `json:"extensions,omitempty"`
	Experimental map[string]json.RawMessage `json:"experimental,omitempty"`
}

// EnvelopeOf reads the envelope of a request's params. A request whose params
// never mention the protocol version key is taken as 2025-era without decoding;
// the others are read by Member, without decoding the rest of the params, where
// it can.
func EnvelopeOf(params json.RawMessage) Envelope {
	if !bytes.Contains(params, []byte(`protocolVersion`)) {
		return Envelope{}
	}
	if meta, found, ok := Member(params, "_meta"); ok {
		if !found {
			return Envelope{}
		}
		version, vfound, vok := Member(meta, MetaProtocolVersion)
		caps, cfound, cok := Member(meta, MetaClientCapabilities)
		if vok && cok {
			var e Envelope
			if vfound {
				if s, plain := plainString(version); plain {
					e.Version = string(s)
				} else if string(version) != "null" {
					return envelopeSlow(params)
				}
			}
			if cfound && string(caps) != "null" {
				e.Capabilities = caps
			}
			return e
		}
	}
	return envelopeSlow(params)
}

// envelopeSlow is EnvelopeOf by encoding/json.
func envelopeSlow(params json.RawMessage) Envelope {
	var p struct {
		Meta struct {
			Version any             `json:"io.modelcontextprotocol/protocolVersion"`
			Caps    json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return Envelope{}
	}
	var e Envelope
	switch v := p.Meta.Version.(type) {
	case string:
		e.Version = v
	case nil:
	default:
		e.Version = "?" // present but not a string: modern, and unsupported
	}
	if len(p.Meta.Caps) > 0 && !bytes.Equal(p.Meta.Caps, []byte("null")) {
		e.Capabilities = p.Meta.Caps
	}
	return e
}

// UnsupportedVersion returns the error for a request of a protocol version this
// server does not speak (-32022, with the versions it does).
func UnsupportedVersion(requested string) *Error {
	e := NewError(CodeUnsupportedVersion, ReasonUnsupportedVersion, "unsupported protocol version "+requested)
	e.Supported, e.Requested = Versions, requested
	return e
}

// The Tasks extension of 2026-07-28 (io.modelcontextprotocol/tasks): a
// tools/call may be answered with a task, which the client polls.
const (
	ExtensionTasks    = "io.modelcontextprotocol/tasks"
	MethodTasksGet    = "tasks/get"
	MethodTasksUpdate = "tasks/update"
	MethodTasksCancel = "tasks/cancel"
	ReasonUnknownTask = Reason("unknown_task")
)

// Resumable task event streams (SEP-2694, draft): tasks/stream sends a task's
// events from a cursor as notifications/tasks/event, each with its task-scoped
// seq (from 0), and answers once the task has ended and every event it keeps
// after the cursor was sent; a cursor older than the events kept is refused
// with CodeEventsGone (data: reason events_gone, taskId, earliestSeq).
const (
	MethodTasksStream = "tasks/stream"
	MethodTaskEvent   = "notifications/tasks/event"
	CodeEventsGone    = -32010
	ReasonEventsGone  = Reason("events_gone")
	ReasonStreamOpen  = Reason("stream_open") // a second tasks/stream of one task on one connection
	EventTypeProgress = "io.mcp-resume.progress"
	EventTypeLog      = "io.mcp-resume.log"
	EventTypeInput    = "io.mcp-resume.input"
	EventTypeStatus   = "io.mcp-resume.status"
	// MethodTaskStatus is 2025-11-25's notification of a task's new status.
	// A task keeps one among its messages each time it waits for input and
	// goes on again: its stream's status events.
	MethodTaskStatus = "notifications/tasks/status"
)

// IsTaskMethod reports whether method is one of the Tasks extension's requests.
func IsTaskMethod(method string) bool {
	return method == MethodTasksGet || method == MethodTasksUpdate || method == MethodTasksCancel || method == MethodTasksStream
}
