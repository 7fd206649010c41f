package spec_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

func TestDecodeMessages(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   spec.Kind
		id     string // "" means no id (nil)
		method string
		params string
		result string
		errObj string
	}{
		{
			name: "request with object params",
			in:   `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
			kind: spec.KindRequest, id: `1`, method: "tools/call", params: `{"name":"x"}`,
		},
		{
			name: "request with array params",
			in:   `{"jsonrpc":"2.0","id":"a-1","method":"m","params":[1,2]}`,
			kind: spec.KindRequest, id: `"a-1"`, method: "m", params: `[1,2]`,
		},
		{
			name: "request without params",
			in:   `{"jsonrpc":"2.0","id":0,"method":"ping"}`,
			kind: spec.KindRequest, id: `0`, method: "ping",
		},
		{
			name: "request with an empty string id",
			in:   `{"jsonrpc":"2.0","id":"","method":"ping"}`,
			kind: spec.KindRequest, id: `""`, method: "ping",
		},
		{
			name: "request id above 2^53 kept byte for byte",
			in:   `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`,
			kind: spec.KindRequest, id: `9007199254740993`, method: "ping",
		},
		{
			name: "request id spelled as a float kept byte for byte",
			in:   `{"jsonrpc":"2.0","id":1.5e3,"method":"ping"}`,
			kind: spec.KindRequest, id: `1.5e3`, method: "ping",
		},
		{
			name: "request with whitespace everywhere",
			in:   " \n{ \"jsonrpc\" : \"2.0\" ,\t\"id\" : -1 , \"method\" : \"m\" , \"params\" : { } }\r\n",
			kind: spec.KindRequest, id: `-1`, method: "m", params: `{ }`,
		},
		{
			name: "members in any order",
			in:   `{"params":{},"method":"m","id":"x","jsonrpc":"2.0"}`,
			kind: spec.KindRequest, id: `"x"`, method: "m", params: `{}`,
		},
		{
			name: "notification",
			in:   `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
			kind: spec.KindNotification, method: "notifications/cancelled", params: `{"requestId":1}`,
		},
		{
			name: "notification without params",
			in:   `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			kind: spec.KindNotification, method: "notifications/initialized",
		},
		{
			name: "result response",
			in:   `{"jsonrpc":"2.0","id":7,"result":{"ok":true}}`,
			kind: spec.KindResponse, id: `7`, result: `{"ok":true}`,
		},
		{
			name: "null result response",
			in:   `{"jsonrpc":"2.0","id":7,"result":null}`,
			kind: spec.KindResponse, id: `7`, result: `null`,
		},
		{
			name: "error response",
			in:   `{"jsonrpc":"2.0","id":"q","error":{"code":-32601,"message":"no"}}`,
			kind: spec.KindResponse, id: `"q"`, errObj: `{"code":-32601,"message":"no"}`,
		},
		{
			name: "error response with a null id",
			in:   `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
			kind: spec.KindResponse, errObj: `{"code":-32700,"message":"parse error"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, e := spec.Decode([]byte(tt.in))
			if e != nil {
				t.Fatalf("Decode(%s): error %v", tt.in, e)
			}
			if m.Kind != tt.kind {
				t.Errorf("Kind = %d, want %d", m.Kind, tt.kind)
			}
			if tt.id == "" {
				if m.ID != nil {
					t.Errorf("ID = %s, want nil", m.ID)
				}
			} else if string(m.ID) != tt.id {
				t.Errorf("ID = %s, want %s", m.ID, tt.id)
			}
			if m.Method != tt.method {
				t.Errorf("Method = %q, want %q", m.Method, tt.method)
			}
			for _, f := range []struct {
				name      string
				got, want string
			}{{"Params", string(m.Params), tt.params}, {"Result", string(m.Result), tt.result}, {"Error", string(m.Error), tt.errObj}} {
				if f.got != f.want {
					t.Errorf("%s = %q, want %q", f.name, f.got, f.want)
				}
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const (
		parse   = spec.CodeParseError
		invalid = spec.CodeInvalidRequest
	)
	tests := []struct {
		name string
		in   string
		code int
		id   string // the id the error answers; "" means none
		// bug, when set, says why the case does not pass today.
		bug string
	}{
		{name: "empty input", in: ``, code: parse},
		{name: "truncated object", in: `{"jsonrpc":"2.0","id":1`, code: parse},
		{name: "not JSON", in: `hello`, code: parse},
		{name: "trailing comma", in: `{"jsonrpc":"2.0","id":1,"method":"m",}`, code: parse},
		{name: "two objects", in: `{"jsonrpc":"2.0","id":1,"method":"m"}{}`, code: parse},

		{name: "missing jsonrpc", in: `{"id":1,"method":"m"}`, code: invalid, id: `1`},
		{name: "jsonrpc 1.0", in: `{"jsonrpc":"1.0","id":"a","method":"m"}`, code: invalid, id: `"a"`},
		{name: "jsonrpc empty", in: `{"jsonrpc":"","id":2,"method":"m"}`, code: invalid, id: `2`},
		{name: "jsonrpc null", in: `{"jsonrpc":null,"id":2,"method":"m"}`, code: invalid, id: `2`},
		{name: "jsonrpc missing in a notification", in: `{"method":"m"}`, code: invalid},
		{name: "null", in: `null`, code: invalid},
		{name: "empty object", in: `{}`, code: invalid},

		{name: "object id", in: `{"jsonrpc":"2.0","id":{"a":1},"method":"m"}`, code: invalid},
		{name: "bool id", in: `{"jsonrpc":"2.0","id":true,"method":"m"}`, code: invalid},
		{name: "false id", in: `{"jsonrpc":"2.0","id":false,"method":"m"}`, code: invalid},
		{name: "array id", in: `{"jsonrpc":"2.0","id":[1],"method":"m"}`, code: invalid},
		{name: "object id in a response", in: `{"jsonrpc":"2.0","id":{},"result":1}`, code: invalid},
		{name: "null id in a request", in: `{"jsonrpc":"2.0","id":null,"method":"m"}`, code: invalid},

		{name: "empty method", in: `{"jsonrpc":"2.0","id":3,"method":""}`, code: invalid, id: `3`},
		{name: "empty method in a notification", in: `{"jsonrpc":"2.0","method":""}`, code: invalid},
		{name: "string params", in: `{"jsonrpc":"2.0","id":4,"method":"m","params":"x"}`, code: invalid, id: `4`},
		{name: "number params", in: `{"jsonrpc":"2.0","id":"n","method":"m","params":5}`, code: invalid, id: `"n"`},
		{name: "bool params", in: `{"jsonrpc":"2.0","id":4,"method":"m","params":true}`, code: invalid, id: `4`},
		{name: "null params", in: `{"jsonrpc":"2.0","id":4,"method":"m","params":null}`, code: invalid, id: `4`},
		{name: "string params in a notification", in: `{"jsonrpc":"2.0","method":"m","params":"x"}`, code: invalid},

		{name: "result and error", in: `{"jsonrpc":"2.0","id":5,"result":1,"error":{"code":1,"message":"x"}}`, code: invalid, id: `5`},
		{name: "neither method nor result nor error", in: `{"jsonrpc":"2.0","id":6}`, code: invalid, id: `6`},
		{name: "only jsonrpc", in: `{"jsonrpc":"2.0"}`, code: invalid},

		// JSON-RPC 2.0 (section 5.1 and its examples): valid JSON that is not a Request
		// object is Invalid Request (-32600), not Parse error, and the id is kept when
		// it can be read.
		{name: "number", in: `1`, code: invalid, bug: "valid JSON that is not an object gives -32700 (parse error); JSON-RPC 2.0 says -32600"},
		{name: "array", in: `[1]`, code: invalid, bug: "valid JSON that is not an object gives -32700 (parse error); JSON-RPC 2.0 says -32600"},
		{name: "string", in: `"x"`, code: invalid, bug: "valid JSON that is not an object gives -32700 (parse error); JSON-RPC 2.0 says -32600"},
		{name: "number jsonrpc", in: `{"jsonrpc":2,"id":1,"method":"m"}`, code: invalid, id: `1`, bug: "a mistyped member gives -32700 with id null: the request id 1 is lost"},
		{name: "number method (spec example)", in: `{"jsonrpc":"2.0","method":1,"params":"bar"}`, code: invalid, bug: "a mistyped member gives -32700; the JSON-RPC 2.0 spec example answers -32600"},
		{name: "number method with an id", in: `{"jsonrpc":"2.0","id":"r","method":1}`, code: invalid, id: `"r"`, bug: "a mistyped member gives -32700 with id null: the request id is lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, e := spec.Decode([]byte(tt.in))
			if e == nil {
				t.Fatalf("Decode(%s) = %+v, want an error", tt.in, m)
			}
			if m != nil {
				t.Errorf("Decode(%s) returned a message with its error: %+v", tt.in, m)
			}
			if e.Code != tt.code {
				t.Errorf("Code = %d, want %d (%v)", e.Code, tt.code, e)
			}
			wantReason := spec.ReasonInvalidRequest
			if tt.code == spec.CodeParseError {
				wantReason = spec.ReasonParseError
			}
			if e.Reason != wantReason {
				t.Errorf("Reason = %q, want %q", e.Reason, wantReason)
			}
			if e.Message == "" {
				t.Error("Message is empty")
			}
			if tt.id == "" {
				if e.ID != nil {
					t.Errorf("ID = %s, want none", e.ID)
				}
			} else if string(e.ID) != tt.id {
				t.Errorf("ID = %s, want %s", e.ID, tt.id)
			}
			// The error is ready to send.
			if out := spec.EncodeError(e.ID, e); !json.Valid(out) {
				t.Errorf("EncodeError = %s, not valid JSON", out)
			}
		})
	}
}

// The error Decode returns is a plain *Error an errors.As finds through wrapping.
func TestDecodeErrorAs(t *testing.T) {
	_, e := spec.Decode([]byte(`{"jsonrpc":"2.0","id":1}`))
	wrapped := errors.Join(errors.New("reading stdin"), e)
	var got *spec.Error
	if !errors.As(wrapped, &got) || got.Code != spec.CodeInvalidRequest {
		t.Fatalf("errors.As(%v) = %v, want the *spec.Error", wrapped, got)
	}
}

// Decode does not keep b: the caller may reuse its buffer.
func TestDecodeCopiesID(t *testing.T) {
	b := []byte(`{"jsonrpc":"2.0","id":"abc","method":"m"}`)
	m, e := spec.Decode(b)
	if e != nil {
		t.Fatal(e)
	}
	copy(b, bytes.Repeat([]byte("x"), len(b)))
	if string(m.ID) != `"abc"` {
		t.Fatalf("ID after reusing the input = %s, want \"abc\"", m.ID)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	id := spec.ID(`9007199254740993`)
	tests := []struct {
		name string
		b    []byte
		kind spec.Kind
		id   spec.ID
	}{
		{"response", spec.EncodeResponse(id, json.RawMessage(`{"a":1}`)), spec.KindResponse, id},
		{"error", spec.EncodeError(id, spec.NewError(spec.CodeInvalidParams, spec.ReasonExpired, "gone")), spec.KindResponse, id},
		{"error with null id", spec.EncodeError(nil, spec.NewError(spec.CodeParseError, spec.ReasonParseError, "bad")), spec.KindResponse, nil},
		{"raw error", spec.EncodeErrorRaw(id, json.RawMessage(`{"code":1,"message":"m"}`)), spec.KindResponse, id},
		{"request", spec.EncodeRequest(id, "tools/call", json.RawMessage(`{"x":[1]}`)), spec.KindRequest, id},
		{"notification", spec.EncodeRequest(nil, spec.MethodProgress, nil), spec.KindNotification, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, e := spec.Decode(tt.b)
			if e != nil {
				t.Fatalf("Decode(%s): %v", tt.b, e)
			}
			if m.Kind != tt.kind || !m.ID.Equal(tt.id) {
				t.Fatalf("Decode(%s) = kind %d id %s, want kind %d id %s", tt.b, m.Kind, m.ID, tt.kind, tt.id)
			}
		})
	}
	if b := spec.EncodeError(nil, spec.NewError(1, "", "m")); !bytes.Contains(b, []byte(`"id":null`)) {
		t.Errorf("EncodeError(nil, ...) = %s, want \"id\":null", b)
	}
	if b := spec.EncodeRequest(nil, "m", nil); bytes.Contains(b, []byte(`"id"`)) || bytes.Contains(b, []byte(`"params"`)) {
		t.Errorf("EncodeRequest(nil, m, nil) = %s, want neither id nor params", b)
	}
}
