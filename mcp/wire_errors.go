package mcp

import (
	"encoding/json"
	"errors"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// wireError maps an engine error to the JSON-RPC error a client gets. It is the one
// place this mapping happens. A wrong token and an unknown request map to the same
// error, byte for byte.
func wireError(err error) *spec.Error {
	var se *spec.Error
	if errors.As(err, &se) {
		return se // already the answer (rate_limited)
	}
	// The most precise first: an ended request's error is also resume.ErrEnded.
	switch {
	case errors.Is(err, resume.ErrUnknown):
		return spec.NewError(spec.CodeInvalidParams, spec.ReasonNotFound, "no resumable request with this id and token")
	case errors.Is(err, resume.ErrAcknowledged):
		return spec.NewError(spec.CodeInvalidParams, spec.ReasonAcknowledged, "the request's final response was acknowledged; the result is no longer kept")
	case errors.Is(err, resume.ErrAckAhead):
		return spec.NewError(spec.CodeInvalidParams, spec.ReasonInvalidAck, "the acknowledgement names a message this request has not sent")
	case errors.Is(err, resume.ErrCancelled):
		return spec.NewError(spec.CodeInvalidParams, spec.ReasonCancelled, "the request was cancelled")
	case errors.Is(err, resume.ErrEvicted):
		e := spec.NewError(spec.CodeInvalidParams, spec.ReasonExpired, "the request's result was released early: the server keeps only so many results, and so many bytes of them, and this was the oldest")
		e.Detail = "evicted"
		return e
	case errors.Is(err, resume.ErrExpired), errors.Is(err, resume.ErrEnded):
		return spec.NewError(spec.CodeInvalidParams, spec.ReasonExpired, "the request expired or its result is no longer kept")
	case errors.Is(err, resume.ErrClosed):
		return spec.ShuttingDown()
	case errors.Is(err, resume.ErrUnreachable):
		e := spec.NewError(spec.CodeInternalError, spec.ReasonOwnerUnreachable, "the instance running the request did not answer; ask again")
		e.RetryAfter = 1
		return e
	}
	return spec.NewError(spec.CodeInternalError, "", "internal error")
}

// endedResponse is the engine's Options.Ended: the final response of a request
// that ended without its handler's, {code: -32602, data: {reason:
// "server_restarted", "owner_lost", "store_lost" or "server_stopped"}}, with the sequence number
// in data._meta like every other message of a resumable request.
func endedResponse(id []byte, seq uint64, cause error) []byte {
	reason := spec.ReasonServerRestarted
	switch {
	case errors.Is(cause, resume.ErrOwnerLost):
		reason = spec.ReasonOwnerLost
	case errors.Is(cause, resume.ErrStoreLost):
		reason = spec.ReasonStoreLost
	case errors.Is(cause, resume.ErrStopped):
		reason = spec.ReasonServerStopped
	}
	type data struct {
		Reason spec.Reason       `json:"reason"`
		Meta   map[string]uint64 `json:"_meta"`
	}
	obj := struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    data   `json:"data"`
	}{
		Code:    spec.CodeInvalidParams,
		Message: cause.Error(),
		Data:    data{Reason: reason, Meta: map[string]uint64{spec.MetaSeq: seq}},
	}
	b, _ := json.Marshal(obj) // cannot fail: fixed types
	return spec.EncodeErrorRaw(spec.ID(id), b)
}
