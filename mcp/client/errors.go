package client

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/mcp-resume/mcp-resume/spec"
)

// ErrClosed is returned by calls in flight when the Client is closed, and by calls
// made after.
var ErrClosed = errors.New("client: closed")

// ErrNotResumable is matched (errors.Is) by the error of a call whose connection
// was lost before the server made it resumable (a plain MCP server never does):
// its outcome is unknown, and it is not sent again, since a tool call may not be
// safe to repeat.
var ErrNotResumable = errors.New("client: connection lost and the request was not resumable")

// ErrGaveUp is matched (errors.Is) by the error of a resumable call that could not
// be resumed within its maxWait, and of a new call that found no connection within
// Options.ReconnectTimeout.
var ErrGaveUp = errors.New("client: gave up reconnecting")

// ErrNoConnection is matched (errors.Is) by the error of a call that found no
// connection to be sent on within Options.ReconnectTimeout (an ErrGaveUp
// too): the server never had it.
var ErrNoConnection = errors.New("client: no connection")

// errNoAnswer is matched by the error of an initialize that got no answer: it
// could not be sent (the server refused it, or could not be reached), or its
// connection ended before the answer came. Nothing was connected, so nothing
// was lost.
var errNoAnswer = errors.New("no answer")

// ProtocolError reports a message from the server that is not valid JSON-RPC.
// The connection is dropped and every call on it fails with this error: a server
// that sends garbage is not resumed.
type ProtocolError struct {
	Problem string
	Raw     []byte // the start of the offending message
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("client: server broke the protocol: %s: %.120q", e.Problem, quotable(e.Raw))
}

// quotable is the part of a message an error may quote: what comes before a
// resume token, if the message carries one (errors end up in logs).
func quotable(raw []byte) []byte {
	if i := bytes.Index(raw, []byte(`"resumeToken"`)); i >= 0 {
		return raw[:i]
	}
	return raw
}

// PolicyError reports a notifications/requests/resumePolicy for a call in flight
// that cannot be used (no token, a negative wait, a malformed field). The call
// fails with it and is cancelled on the server.
type PolicyError struct {
	ID      spec.ID
	Problem string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("client: invalid resume policy for request %s: %s", e.ID, e.Problem)
}

// ResumeError reports a requests/resume the server refused: the request is
// unknown (not_found), expired, cancelled, lost with its server
// (server_restarted, owner_lost), already acknowledged by this client
// (acknowledged), or its ack was refused (invalid_ack). Err carries the JSON-RPC error and its
// error.data.reason.
type ResumeError struct {
	ID  spec.ID
	Err *spec.Error
}

func (e *ResumeError) Error() string {
	return fmt.Sprintf("client: resuming request %s failed: %v", e.ID, e.Err)
}

func (e *ResumeError) Unwrap() error { return e.Err }

// Reason returns the server's error.data.reason (not_found, expired, ...).
func (e *ResumeError) Reason() spec.Reason { return e.Err.Reason }

// resumeReasons are the reasons with which a server refuses requests/resume.
var resumeReasons = map[spec.Reason]bool{
	spec.ReasonNotFound: true, spec.ReasonExpired: true, spec.ReasonCancelled: true,
	spec.ReasonServerRestarted: true, spec.ReasonOwnerLost: true, spec.ReasonServerStopped: true,
	spec.ReasonAcknowledged: true, spec.ReasonInvalidAck: true,
}
