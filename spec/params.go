package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ResumePolicyParams are the params of notifications/requests/resumePolicy.
type ResumePolicyParams struct {
	RequestID   ID     `json:"requestId"`
	ResumeToken string `json:"resumeToken"`
	MinWait     *int64 `json:"minWait,omitempty"` // seconds
	MaxWait     *int64 `json:"maxWait,omitempty"` // seconds
}

// AppendResumePolicy appends the encoded notifications/requests/resumePolicy for
// p, without json.Marshal: it is written once per resumable request, on the hot
// path. minWait is left out when zero.
func AppendResumePolicy(b []byte, p *ResumePolicyParams) []byte {
	b = append(b, `{"jsonrpc":"2.0","method":"`+MethodResumePolicy+`","params":{"requestId":`...)
	b = append(b, p.RequestID...)
	b = append(b, `,"resumeToken":`...)
	b = AppendString(b, p.ResumeToken)
	if p.MinWait != nil && *p.MinWait > 0 {
		b = append(b, `,"minWait":`...)
		b = strconv.AppendInt(b, *p.MinWait, 10)
	}
	if p.MaxWait != nil {
		b = append(b, `,"maxWait":`...)
		b = strconv.AppendInt(b, *p.MaxWait, 10)
	}
	return append(b, "}}"...)
}

// RequestMeta is the part of a request's `_meta` this project reads.
type RequestMeta struct {
	Ack *uint64 `json:"io.mcp-resume/ack,omitempty"`
}

// GetStatusParams are the params of requests/getStatus.
type GetStatusParams struct {
	RequestID   ID           `json:"requestId"`
	ResumeToken string       `json:"resumeToken"`
	Meta        *RequestMeta `json:"_meta,omitempty"`
}

// GetStatusResult is the result of requests/getStatus.
type GetStatusResult struct {
	RequestID         ID             `json:"requestId"`
	Status            Status         `json:"status"`
	HasPendingMessage bool           `json:"hasPendingMessage"`
	HasInputRequest   bool           `json:"hasInputRequest"`
	Meta              map[string]any `json:"_meta,omitempty"`
}

// ResumeParams are the params of requests/resume. The request to resume is named by
// the JSON-RPC id of the requests/resume message itself.
type ResumeParams struct {
	ResumeToken string       `json:"resumeToken"`
	Meta        *RequestMeta `json:"_meta,omitempty"`
}

// CancelledParams are the params of notifications/cancelled. ResumeToken is this
// project's extension: with it, a client may cancel a request that is not attached
// to its connection (for example one left detached after a crash).
type CancelledParams struct {
	RequestID   ID     `json:"requestId"`
	Reason      string `json:"reason,omitempty"`
	ResumeToken string `json:"resumeToken,omitempty"`
}

// ServerCapability is what the server advertises under
// `capabilities.experimental.resumableRequests`.
type ServerCapability struct {
	MaxWait    int64    `json:"maxWait"`
	MinWait    int64    `json:"minWait"`
	Extensions []string `json:"extensions"`
}

// ClientCapability is what a client may put under `resumableRequests`. The SEP
// defines it as an empty object; Extensions is ours.
type ClientCapability struct {
	Extensions []string `json:"extensions,omitempty"`
}

// MaxTokenLen bounds the resume token a client may send; ours are 43 characters.
const MaxTokenLen = 256

var errNoParams = errors.New("params are required")

func decodeParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return errNoParams
	}
	if raw[0] != '{' {
		return errors.New("params must be an object")
	}
	return json.Unmarshal(raw, v)
}

// CheckToken checks a resume token as the server takes one: present, and at most
// MaxTokenLen bytes.
func CheckToken(tok string) error {
	if tok == "" {
		return errors.New(`"resumeToken" is required and must be a non-empty string`)
	}
	if len(tok) > MaxTokenLen {
		return fmt.Errorf(`"resumeToken" is longer than %d bytes`, MaxTokenLen)
	}
	return nil
}

func invalidParams(method string, err error) *Error {
	return NewError(CodeInvalidParams, ReasonInvalidParams, fmt.Sprintf("invalid params for %s: %v", method, err))
}

// DecodeGetStatusParams validates the params of requests/getStatus.
func DecodeGetStatusParams(raw json.RawMessage) (*GetStatusParams, *Error) {
	var p GetStatusParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, invalidParams(MethodGetStatus, err)
	}
	if len(p.RequestID) == 0 {
		return nil, invalidParams(MethodGetStatus, errors.New(`"requestId" is required`))
	}
	if err := CheckToken(p.ResumeToken); err != nil {
		return nil, invalidParams(MethodGetStatus, err)
	}
	return &p, nil
}

// DecodeResumeParams validates the params of requests/resume.
func DecodeResumeParams(raw json.RawMessage) (*ResumeParams, *Error) {
	var p ResumeParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, invalidParams(MethodResume, err)
	}
	if err := CheckToken(p.ResumeToken); err != nil {
		return nil, invalidParams(MethodResume, err)
	}
	return &p, nil
}

// DecodeCancelledParams validates the params of notifications/cancelled.
func DecodeCancelledParams(raw json.RawMessage) (*CancelledParams, error) {
	var p CancelledParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if len(p.RequestID) == 0 {
		return nil, errors.New(`"requestId" is required`)
	}
	if p.ResumeToken != "" {
		if err := CheckToken(p.ResumeToken); err != nil {
			return nil, err
		}
	}
	return &p, nil
}
