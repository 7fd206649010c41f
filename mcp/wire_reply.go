package mcp

import (
	"encoding/json"
	"maps"
	"reflect"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
)

// encodeReply re-encodes mcp-go's answer under the client's raw id, stamping seq
// when it is not 0. patch, when not nil, may replace the result before encoding.
func encodeReply(id spec.ID, resp mcp.JSONRPCMessage, patch func(any) any, seq uint64) []byte {
	var result any
	var errObj *mcp.JSONRPCErrorDetails
	switch v := resp.(type) {
	case mcp.JSONRPCResponse:
		result = v.Result
	case *mcp.JSONRPCResponse:
		result = v.Result
	case mcp.JSONRPCError:
		errObj = &v.Error
	case *mcp.JSONRPCError:
		errObj = &v.Error
	default:
		return spec.EncodeError(id, spec.NewError(spec.CodeInternalError, "", "internal error: the handler gave no response"))
	}
	if errObj != nil {
		b, err := json.Marshal(errObj)
		if err != nil {
			return spec.EncodeError(id, spec.NewError(spec.CodeInternalError, "", "internal error: encoding an error"))
		}
		if seq > 0 {
			b = stampErrorSeq(b, seq)
		}
		return spec.EncodeErrorRaw(id, b)
	}
	if patch != nil {
		result = patch(result)
	}
	b, err := json.Marshal(result)
	if err != nil {
		return spec.EncodeError(id, spec.NewError(spec.CodeInternalError, "", "internal error: encoding the result: "+err.Error()))
	}
	return spec.EncodeResponseSeq(id, b, seq)
}

// stampErrorSeq puts seq in the `_meta` of an error's data, when data is an object
// or absent.
func stampErrorSeq(errObj []byte, seq uint64) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(errObj, &m) != nil {
		return errObj
	}
	data := m["data"]
	if len(data) == 0 || string(data) == "null" {
		data = json.RawMessage(`{}`)
	}
	if data[0] != '{' {
		return errObj
	}
	m["data"] = spec.StampSeq(data, seq)
	out, err := json.Marshal(m)
	if err != nil {
		return errObj
	}
	return out
}

// errorResponse is e as mcp-go's error response (the id is written by
// encodeReply).
func errorResponse(e *spec.Error) mcp.JSONRPCError {
	d := mcp.JSONRPCErrorDetails{Code: e.Code, Message: e.Message}
	if b, err := json.Marshal(e); err == nil {
		var w struct {
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(b, &w) == nil && len(w.Data) > 0 {
			d.Data = w.Data
		}
	}
	return mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, Error: d}
}

// failed reports whether a final response counts as failed for getStatus: a JSON-RPC
// error, or a tool result with isError.
func failed(resp mcp.JSONRPCMessage) bool {
	var result any
	switch v := resp.(type) {
	case mcp.JSONRPCError, *mcp.JSONRPCError:
		return true
	case mcp.JSONRPCResponse:
		result = v.Result
	case *mcp.JSONRPCResponse:
		result = v.Result
	}
	switch r := result.(type) {
	case *mcp.CallToolResult:
		return r.IsError
	case mcp.CallToolResult:
		return r.IsError
	}
	return false
}

// encodeNotification encodes a notification, stamping seq when it is not 0.
// Its params are encoded into a scratch buffer of the pool: the message is
// the one allocation (a detached request's progress, several a second).
func encodeNotification(n mcp.JSONRPCNotification, seq uint64) []byte {
	buf := paramBufs.Get().(*[]byte)
	defer paramBufs.Put(buf)
	params, err := appendParams((*buf)[:0], n.Params)
	if err != nil {
		return spec.EncodeRequestSeq(nil, n.Method, []byte(`{}`), seq)
	}
	if cap(params) <= maxParamBuf {
		*buf = params[:0] // grown, it is kept so
	}
	return spec.EncodeRequestSeq(nil, n.Method, params, seq)
}

// paramBufs holds the scratch buffers of encodeNotification; one that grew
// past maxParamBuf (a large notification) is not kept.
var paramBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxParamBuf = 64 << 10

// advertise adds the server's resumableRequests advertisement to an initialize
// result.
func (s *Server) advertise(result any) any {
	add := func(r *mcp.InitializeResult) {
		r.Capabilities.Experimental = withMember(r.Capabilities.Experimental, spec.CapabilityName, s.caps)
	}
	return edited(result, add)
}

// withMember returns a copy of m (a result's capabilities, which a handler
// may share) with k set to v.
func withMember(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	maps.Copy(out, m)
	out[k] = v
	return out
}

// withResourceURI gives a resources/read's not-found error (-32602 in the 2026
// era, -32002 before) the URI in its data, as both revisions show it, when the
// handler gave none.
func withResourceURI(resp mcp.JSONRPCMessage, uri string) mcp.JSONRPCMessage {
	var e mcp.JSONRPCError
	switch v := resp.(type) {
	case mcp.JSONRPCError:
		e = v
	case *mcp.JSONRPCError:
		e = *v
	default:
		return resp
	}
	if e.Error.Data != nil || (e.Error.Code != mcp.INVALID_PARAMS && e.Error.Code != mcp.RESOURCE_NOT_FOUND) {
		return resp
	}
	e.Error.Data = map[string]any{"uri": uri}
	return e
}

// legacyResult takes out of resp, the answer to a request of the 2025 era, the
// resultType that only 2026-07-28 defines, which a handler may have copied from
// an answer of that era (the gateway's, from an upstream of that era).
// 2026-07-28 (basic, Result): resultType "is omitted when responding to a
// request that used an earlier protocol version". The handler's own value is
// left as it was: the result is changed on a copy.
func legacyResult(resp mcp.JSONRPCMessage) mcp.JSONRPCMessage {
	r, ok := resp.(mcp.JSONRPCResponse)
	if !ok || r.Result == nil {
		return resp
	}
	const complete = mcp.ResultTypeComplete
	switch res := r.Result.(type) { // a tool's result, the common case, without reflection
	case mcp.CallToolResult:
		if res.ResultType == complete {
			res.ResultType = ""
			r.Result = res
		}
		return r
	case *mcp.CallToolResult:
		if res != nil && res.ResultType == complete {
			c := *res
			c.ResultType = ""
			r.Result = &c
		}
		return r
	}
	v := reflect.ValueOf(r.Result)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return resp
	}
	if f := v.FieldByName("ResultType"); !f.IsValid() || f.String() != string(complete) {
		return resp
	}
	p := reflect.New(v.Type())
	p.Elem().Set(v)
	if md, ok := reflect.TypeAssert[mcp.ResultMetadata](p); ok {
		md.SetResultType("")
		r.Result = p.Interface()
	}
	return r
}

// edited returns result with f applied to a copy of it when it is a T or a
// *T (a handler's result is not changed in place: it may be shared), else
// result as it is.
func edited[T any](result any, f func(*T)) any {
	switch r := result.(type) {
	case T:
		f(&r)
		return r
	case *T:
		cp := *r
		f(&cp)
		return &cp
	}
	return result
}
