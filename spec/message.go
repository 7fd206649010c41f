package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
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

	env    Envelope // Envelope's, once read
	envSet bool
	target string // Target's, read by Decode
}

// Target returns what a request addresses, read once by Decode: the tool's or
// the prompt's name (params.name of tools/call, prompts/get), the resource's
// URI (params.uri of resources/read, resources/subscribe,
// resources/unsubscribe) or the task id (params.taskId of the tasks/ methods
// of both eras); "" for other messages. Every check, every policy and
// every span of the request reads this one value, which is the one mcp-go's
// decoding of the same bytes gives its handler (Decode refuses the messages on
// which they could differ: spec/keys.go).
func (m *Message) Target() string { return m.target }

// targetMember is the member of params that names what a request of method
// addresses; "" for a method that addresses nothing.
func targetMember(method string) string {
	switch method {
	case MethodToolsCall, MethodPromptsGet:
		return "name"
	case MethodResourcesRead, "resources/subscribe", "resources/unsubscribe":
		return "uri"
	case MethodTasksGet, MethodTasksUpdate, MethodTasksCancel, MethodTasksStream, "tasks/result":
		return "taskId"
	}
	return ""
}

// Envelope returns the 2026-07-28 envelope of a request's params (EnvelopeOf),
// read once. A Message is not safe for concurrent use while it is first read.
func (m *Message) Envelope() Envelope {
	if !m.envSet {
		m.env, m.envSet = EnvelopeOf(m.Params), true
	}
	return m.env
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
// that looked like a response or notification, nowhere: see Error.ID). The raw
// members of the Message (Params, Result, Error) may share b's bytes, so b must
// not change afterwards.
func Decode(b []byte) (*Message, *Error) {
	var env envelope
	if scanEnvelope(b, &env) {
		m, e := env.message()
		return checked(b, m, e)
	}
	env = envelope{}
	if err := json.Unmarshal(b, &env); err != nil {
		// Only now tell not-JSON from JSON of the wrong shape: one scan on the
		// common path.
		if !json.Valid(b) {
			return nil, NewError(CodeParseError, ReasonParseError, "parse error: the message is not valid JSON")
		}
		// Valid JSON that is not a request object, or a member of the wrong type:
		// invalid request (JSON-RPC 2.0, section 5.1), keeping the id if it is usable.
		e := NewError(CodeInvalidRequest, ReasonInvalidRequest, "invalid request: "+err.Error())
		var idOnly struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(b, &idOnly) == nil && len(idOnly.ID) > 0 {
			e.ID, _ = ParseID(idOnly.ID)
		}
		return nil, e
	}
	m, e := env.message()
	return checked(b, m, e)
}

// checked refuses m, decoded from b, when readers could take one of its keys
// two ways (checkKeys), and reads its target.
func checked(b []byte, m *Message, e *Error) (*Message, *Error) {
	if e != nil {
		return nil, e
	}
	if e = checkKeys(b); e != nil {
		e.ID = m.ID
		return nil, e
	}
	if key := targetMember(m.Method); key != "" {
		s, err := stringMember(m.Params, key)
		if err != nil {
			e = NewError(CodeInvalidParams, ReasonInvalidParams, fmt.Sprintf("invalid params for %s: %q %v", m.Method, key, err))
			e.ID = m.ID
			return nil, e
		}
		m.target = s
	}
	return m, nil
}

// message checks a decoded envelope and makes the Message.
func (env *envelope) message() (*Message, *Error) {
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

// Builders for the messages the server writes. They append bytes instead of calling
// json.Marshal, which would re-validate and compact the raw parts on every message:
// ids are raw bytes already checked by ParseID, and raw parts are produced by
// json.Marshal in this module.

// EncodeResponse returns a result response for id.
func EncodeResponse(id ID, result json.RawMessage) []byte { return EncodeResponseSeq(id, result, 0) }

// EncodeResponseSeq returns a result response for id whose result carries sequence
// number seq (none when seq is 0).
func EncodeResponseSeq(id ID, result json.RawMessage, seq uint64) []byte {
	n := len(`{"jsonrpc":"2.0","id":,"result":}`) + max(len(id), len("null")) + max(len(result), len("null")) + seqRoom(seq)
	b := make([]byte, 0, n)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"result":`...)
	b = appendWithSeq(b, result, seq)
	return append(b, '}')
}

// EncodeError returns an error response for id (null when id is nil).
func EncodeError(id ID, e *Error) []byte {
	if e == nil {
		e = NewError(CodeInternalError, "", "internal error")
	}
	obj, _ := e.MarshalJSON() // an Error always encodes
	return EncodeErrorRaw(id, obj)
}

// EncodeErrorRaw returns an error response for id with an already encoded error object.
func EncodeErrorRaw(id ID, errObj json.RawMessage) []byte {
	b := make([]byte, 0, 32+len(id)+len(errObj))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"error":`...)
	b = appendRaw(b, errObj)
	return append(b, '}')
}

// EncodeRequest returns a request (a notification when id is nil). The method is
// JSON-quoted; params may be nil.
func EncodeRequest(id ID, method string, params json.RawMessage) []byte {
	return EncodeRequestSeq(id, method, params, 0)
}

// EncodeRequestSeq is EncodeRequest with sequence number seq stamped in the params
// (none when seq is 0).
func EncodeRequestSeq(id ID, method string, params json.RawMessage, seq uint64) []byte {
	// Its exact size, unless the method needs escaping: a queued message is
	// kept as allocated.
	n := len(`{"jsonrpc":"2.0","method":"","params":}`) + len(method) + len(params) + seqRoom(seq)
	if len(id) > 0 {
		n += len(`"id":,`) + len(id)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"jsonrpc":"2.0",`...)
	if len(id) > 0 {
		b = append(b, `"id":`...)
		b = append(b, id...)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = AppendString(b, method)
	if len(params) > 0 {
		b = append(b, `,"params":`...)
		b = appendWithSeq(b, params, seq)
	}
	return append(b, '}')
}

// AppendString appends s as a JSON string. (strconv.AppendQuote is Go syntax, not
// JSON: it would write \x01 for a control byte.)
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

func appendID(b []byte, id ID) []byte {
	if len(id) == 0 {
		return append(b, "null"...)
	}
	return append(b, id...)
}

// ReplaceResponseID returns msg, a response built by EncodeResponseSeq or
// EncodeErrorRaw (it starts with `{"jsonrpc":"2.0","id":<id>,`), under id
// instead; a message of another shape comes back unchanged.
func ReplaceResponseID(msg []byte, old, id ID) []byte {
	const head = `{"jsonrpc":"2.0","id":`
	old = appendID(nil, old)
	if !bytes.HasPrefix(msg, []byte(head)) || !bytes.HasPrefix(msg[len(head):], old) {
		return msg
	}
	rest := msg[len(head)+len(old):]
	b := make([]byte, 0, len(head)+len(id)+len(rest))
	b = append(b, head...)
	b = appendID(b, id)
	return append(b, rest...)
}
