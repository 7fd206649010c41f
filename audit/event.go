package audit

import (
	"encoding/json"
	"time"
)

// Outcome is how a call ended.
type Outcome string

const (
	// OK: the tool's result, not an error, was the answer.
	OK Outcome = "ok"
	// Error: the answer was a JSON-RPC error, or a result with isError
	// (Reason tool_error).
	Error Outcome = "error"
	// Refused: the server answered the call with an error before its tool
	// ran (too_many_requests, duplicate_id, shutting_down, a credential
	// without the tool's scope, a tool that runs only as a task, ...).
	Refused Outcome = "refused"
	// Cancelled: its client cancelled it; it got no answer.
	Cancelled Outcome = "cancelled"
	// Lost: it ended without its tool's answer reaching anyone, for Reason:
	// connection_lost, expired, shutdown, store_lost, server_stopped,
	// server_restarted, owner_lost.
	Lost Outcome = "lost"
)

// Event is one tools/call as the audit trail has it. Its JSON form (MarshalJSON)
// has stable field names; a field that is empty or zero is left out, but
// start, end, tool, request_id, outcome, bytes_in and bytes_out, which are
// always there.
type Event struct {
	// Start is when the call arrived; End when it ended (its answer
	// written, or its end otherwise).
	Start, End time.Time
	// Principal is who the call's credentials name (an API key's name, an
	// OAuth subject); "" without authentication. Never the credential.
	Principal string
	// Tool is the tool named by the call ("" when unknown: a request lost
	// with the process that ran it).
	Tool string
	// RequestID is the call's JSON-RPC id as text (a string id's text, a
	// number's digits).
	RequestID string
	// TraceID and SpanID are the W3C ids of the call's span, in hex, when
	// the server traces; "" otherwise.
	TraceID, SpanID string
	// Transport is what the call came over: stdio, http, websocket; "" for
	// none (a call run again after a restart).
	Transport string
	// ProtocolVersion is the MCP version of its session, or of the request
	// (2026-07-28).
	ProtocolVersion string
	// Outcome is how it ended, Reason why when there is a stable reason:
	// the error's data.reason, tool_error, or a resume reason (Lost).
	Outcome Outcome
	Reason  string
	// BytesIn is the size of the call's params; BytesOut that of the
	// response written for it (0 when it had none).
	BytesIn, BytesOut int64
	// ArgumentsSHA256 is the hex SHA-256 of the canonical JSON of the
	// call's arguments (RuleHash); Arguments the arguments redacted
	// (RuleRedact) or as sent (RuleKeep). Both empty without a rule.
	ArgumentsSHA256 string
	Arguments       json.RawMessage
}

// wireEvent is Event's JSON form as encoding/json reads it (UnmarshalJSON):
// its names are the documented ones. Its fields are Event's, in order, so
// that each converts to the other. appendJSON writes the same, byte for
// byte, as json.Marshal of it (FuzzAppendJSON).
type wireEvent struct {
	Start           time.Time       `json:"start"`
	End             time.Time       `json:"end"`
	Principal       string          `json:"principal,omitempty"`
	Tool            string          `json:"tool"`
	RequestID       string          `json:"request_id"`
	TraceID         string          `json:"trace_id,omitempty"`
	SpanID          string          `json:"span_id,omitempty"`
	Transport       string          `json:"transport,omitempty"`
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	Outcome         Outcome         `json:"outcome"`
	Reason          string          `json:"reason,omitempty"`
	BytesIn         int64           `json:"bytes_in"`
	BytesOut        int64           `json:"bytes_out"`
	ArgumentsSHA256 string          `json:"arguments_sha256,omitempty"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
}

// MarshalJSON encodes the event as one JSON object with no newline in it;
// times in UTC (RFC 3339 with nanoseconds).
func (e Event) MarshalJSON() ([]byte, error) {
	return e.appendJSON(nil)
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Event(w)
	return nil
}
