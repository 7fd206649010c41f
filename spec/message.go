package spec

import (
	"bytes"
	"encoding/json"
)

// Kind is what a decoded JSON-RPC message is.
type Kind int

const (
	KindRequest      Kind = iota + 1 // method and id
	KindNotification                 // method, no id
	KindResponse                     // id and result or error, no method
)

// Message is one decoded JSON-RPC 2.0 message. Params, Result and Error stay raw: the
// layer that handles the method decodes them.
type Message struct {
	Kind   Kind
	ID     ID // nil for notifications
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
}

type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// Decode parses one JSON-RPC 2.0 message. Its error is always an *Error ready to
// send; when the message had a usable id, the error's ID is set so the caller can
// answer that request, otherwise the answer goes with id null (or, for something
// that looked like a response or notification, nowhere: see Error.ID).
func Decode(b []byte) (*Message, *Error) {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, NewError(CodeParseError, ReasonParseError, "parse error: "+err.Error())
	}
	var id ID
	hasID := len(env.ID) > 0 && !bytes.Equal(env.ID, []byte("null"))
	if hasID {
		var err error
		if id, err = ParseID(env.ID); err != nil {
			return nil, NewError(CodeInvalidRequest, ReasonInvalidRequest, "invalid request: "+err.Error())
		}
	}
	fail := func(msg string) (*Message, *Error) {
		e := NewError(CodeInvalidRequest, ReasonInvalidRequest, "invalid request: "+msg)
		e.ID = id
		return nil, e
	}
	if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
		return fail(`"jsonrpc" must be "2.0"`)
	}
	m := &Message{ID: id, Params: env.Params, Result: env.Result, Error: env.Error}
	switch {
	case env.Method != nil:
		if *env.Method == "" {
			return fail(`"method" must be a non-empty string`)
		}
		if len(env.Params) > 0 && env.Params[0] != '{' && env.Params[0] != '[' {
			return fail(`"params" must be an object or an array`)
		}
		m.Method = *env.Method
		if len(env.ID) == 0 {
			m.Kind = KindNotification
		} else if !hasID {
			return fail(`"id" must not be null in a request`)
		} else {
			m.Kind = KindRequest
		}
	case env.Result != nil || env.Error != nil:
		if env.Result != nil && env.Error != nil {
			return fail("a response has a result or an error, not both")
		}
		m.Kind = KindResponse
	default:
		return fail(`a message needs "method", "result" or "error"`)
	}
	return m, nil
}

// Raw JSON builders for the messages the server writes. The id goes in as raw bytes.

// EncodeResponse returns a result response for id.
func EncodeResponse(id ID, result json.RawMessage) []byte {
	return encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      ID              `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", id, result})
}

// EncodeError returns an error response for id (null when id is nil).
func EncodeError(id ID, e *Error) []byte {
	return encode(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      ID     `json:"id"`
		Error   *Error `json:"error"`
	}{"2.0", id, e})
}

// EncodeErrorRaw returns an error response for id with an already encoded error object.
func EncodeErrorRaw(id ID, errObj json.RawMessage) []byte {
	return encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      ID              `json:"id"`
		Error   json.RawMessage `json:"error"`
	}{"2.0", id, errObj})
}

// EncodeRequest returns a request (a notification when id is nil).
func EncodeRequest(id ID, method string, params json.RawMessage) []byte {
	return encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      ID              `json:"id,omitempty"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}{"2.0", id, method, params})
}

func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only raw messages that are not valid JSON get here, and every one of them
		// was produced by json.Marshal in this module: a programming error.
		panic("spec: encoding a message: " + err.Error())
	}
	return b
}
