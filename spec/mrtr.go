package spec

import (
	"bytes"
	"encoding/json"
)

// Multi round-trip requests (MRTR, SEP-2322) of the 2026-07-28 era: a server
// that needs its client's input answers tools/call, prompts/get or
// resources/read with an input_required result; the client answers the
// questions and sends the request again (a new id) with inputResponses and the
// requestState echoed unchanged.

// Result types of the 2026-07-28 era (a result's resultType; none means
// complete).
const (
	ResultTypeComplete      = "complete"
	ResultTypeInputRequired = "input_required"
)

// InputRequest is one question of a server: in an input_required result, or
// in an input_required task of the Tasks extension.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// InputRequired is an input_required result, as its client reads it to ask
// the questions.
type InputRequired struct {
	ResultType    string                  `json:"resultType"`
	InputRequests map[string]InputRequest `json:"inputRequests"`
	RequestState  string                  `json:"requestState"`
}

// AskedInput reads raw, a result, as an input_required one; ok is false for
// any other result. The result type is looked up without decoding the rest:
// most results are complete.
func AskedInput(raw json.RawMessage) (in InputRequired, ok bool) {
	if v, found, scanned := Member(raw, "resultType"); scanned && (!found || !bytes.Equal(v, []byte(`"`+ResultTypeInputRequired+`"`))) {
		return in, false
	}
	return in, json.Unmarshal(raw, &in) == nil && in.ResultType == ResultTypeInputRequired
}

// RetriesInput reports whether a request of method may be answered
// input_required, and so be sent again with inputResponses (MRTR).
func RetriesInput(method string) bool {
	switch method {
	case MethodToolsCall, MethodPromptsGet, MethodResourcesRead:
		return true
	}
	return false
}
