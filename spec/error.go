package spec

import (
	"encoding/json"
	"fmt"
	"time"
)

// Error is a JSON-RPC error this server sends. Reason, when set, is written as
// `error.data.reason`; Detail, when set, as `error.data.detail`.
type Error struct {
	Code    int
	Message string
	Reason  Reason
	Detail  string
	// RetryAfter, when not 0, is written as `error.data.retryAfter`: whole seconds
	// after which the request may succeed (ReasonRateLimited).
	RetryAfter int64
	// RetryAfterMs, when not 0, is written as `error.data.retryAfterMs`: the
	// same in milliseconds (SEP-3304's field; see RateLimited).
	RetryAfterMs int64
	// Supported and Requested, when set, are written as `error.data.supported`
	// and `error.data.requested` (an unsupported protocol version, -32022).
	Supported []string
	Requested string
	// RequiredCapabilities, when set, is written as
	// `error.data.requiredCapabilities` (a missing client capability, -32021).
	RequiredCapabilities json.RawMessage
	// TaskID and EarliestSeq, when TaskID is set, are written as
	// `error.data.taskId` and `error.data.earliestSeq` (events_gone, -32010).
	TaskID      string
	EarliestSeq uint64
	// ID is the id of the request the error answers, when it is known.
	ID ID
}

// NewError returns an error with a code, a stable reason and a message.
func NewError(code int, reason Reason, msg string) *Error {
	return &Error{Code: code, Reason: reason, Message: msg}
}

// ShuttingDown is the error of a request the server refuses, or ends, because
// it is shutting down.
func ShuttingDown() *Error {
	return NewError(CodeInternalError, ReasonShuttingDown, "the server is shutting down")
}

// RateLimited is the error of a request refused for a rate or a concurrency
// limit (draft SEP-3304): code -32023, with error.data.retryAfterMs (and
// retryAfter, rounded up to whole seconds, for clients that read the older
// field) saying when to try again, at least 1 ms.
func RateLimited(reason Reason, msg string, after time.Duration) *Error {
	ms := max(after.Milliseconds(), 1)
	if after > time.Duration(ms)*time.Millisecond {
		ms++
	}
	return &Error{Code: CodeRateLimited, Reason: reason, Message: msg, RetryAfterMs: ms, RetryAfter: (ms + 999) / 1000}
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("jsonrpc error %d (%s): %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

type errorData struct {
	Reason Reason `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// RetryAfter: seconds; see Error.RetryAfter.
	RetryAfter           int64           `json:"retryAfter,omitempty"`
	RetryAfterMs         int64           `json:"retryAfterMs,omitempty"`
	Supported            []string        `json:"supported,omitempty"`
	Requested            string          `json:"requested,omitempty"`
	RequiredCapabilities json.RawMessage `json:"requiredCapabilities,omitempty"`
	TaskID               string          `json:"taskId,omitempty"`
	EarliestSeq          *uint64         `json:"earliestSeq,omitempty"`
}

// MarshalJSON writes the JSON-RPC error object.
func (e *Error) MarshalJSON() ([]byte, error) {
	type wire struct {
		Code    int        `json:"code"`
		Message string     `json:"message"`
		Data    *errorData `json:"data,omitempty"`
	}
	w := wire{Code: e.Code, Message: e.Message}
	if e.Reason != "" || e.Detail != "" || e.RetryAfter != 0 || e.RetryAfterMs != 0 || e.Supported != nil || e.RequiredCapabilities != nil || e.TaskID != "" {
		w.Data = &errorData{Reason: e.Reason, Detail: e.Detail, RetryAfter: e.RetryAfter, RetryAfterMs: e.RetryAfterMs,
			Supported: e.Supported, Requested: e.Requested, RequiredCapabilities: e.RequiredCapabilities}
		if e.TaskID != "" {
			w.Data.TaskID, w.Data.EarliestSeq = e.TaskID, &e.EarliestSeq
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a JSON-RPC error object, keeping data.reason when present.
func (e *Error) UnmarshalJSON(b []byte) error {
	var w struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	e.Code, e.Message = w.Code, w.Message
	var d errorData
	if len(w.Data) > 0 && json.Unmarshal(w.Data, &d) == nil {
		e.Reason, e.Detail, e.RetryAfter, e.RetryAfterMs = d.Reason, d.Detail, d.RetryAfter, d.RetryAfterMs
		e.Supported, e.Requested, e.RequiredCapabilities = d.Supported, d.Requested, d.RequiredCapabilities
		e.TaskID = d.TaskID
		if d.EarliestSeq != nil {
			e.EarliestSeq = *d.EarliestSeq
		}
	}
	return nil
}
