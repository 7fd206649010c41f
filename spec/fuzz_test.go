package spec_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcp-resume/mcp-resume/spec"
)

// FuzzDecode: Decode never panics; a message's Kind agrees with its fields and the
// message re-encodes to one that decodes the same; an error is ready to send.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"_meta":{"io.mcp-resume/seq":3}}}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":-32602,"message":"m","data":{"reason":"expired"}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"m"}`,
		`{"jsonrpc":"2.0","id":{},"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"result":1,"error":{}}`,
		`{"jsonrpc":"1.0","id":1.5e3,"method":"m","params":"x"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"m"}]`,
		`{"jsonrpc":"2.0","id":"\ud800","method":"\u0000"}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"\xfe\"}",
		``,
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, e := spec.Decode(b)
		if (m == nil) == (e == nil) {
			t.Fatalf("Decode(%q) = %v, %v: want exactly one of a message and an error", b, m, e)
		}
		if e != nil {
			checkDecodeError(t, b, e)
			return
		}
		checkMessage(t, b, m)
	})
}

func checkDecodeError(t *testing.T, b []byte, e *spec.Error) {
	t.Helper()
	switch {
	case e.Code == spec.CodeParseError && e.Reason == spec.ReasonParseError:
		if e.ID != nil {
			t.Fatalf("Decode(%q): parse error with id %s", b, e.ID)
		}
	case e.Code == spec.CodeInvalidRequest && e.Reason == spec.ReasonInvalidRequest:
	case e.Code == spec.CodeInvalidParams && (e.Reason == spec.ReasonAmbiguousKey || e.Reason == spec.ReasonInvalidParams):
	default:
		t.Fatalf("Decode(%q): error %d %q, want parse error or invalid request", b, e.Code, e.Reason)
	}
	if e.ID != nil {
		if _, err := spec.ParseID(e.ID); err != nil {
			t.Fatalf("Decode(%q): error carries id %q, not a valid id: %v", b, e.ID, err)
		}
	}
	out := spec.EncodeError(e.ID, e)
	if !json.Valid(out) {
		t.Fatalf("Decode(%q): EncodeError = %q, not valid JSON", b, out)
	}
	// What the server would send back is itself a well-formed response to that id.
	r, re := spec.Decode(out)
	if re != nil {
		t.Fatalf("Decode(EncodeError(...)) of %q: %v", out, re)
	}
	if r.Kind != spec.KindResponse || !r.ID.Equal(e.ID) || r.Error == nil {
		t.Fatalf("Decode(%q) = %+v, want an error response to id %s", out, r, e.ID)
	}
}

func checkMessage(t *testing.T, b []byte, m *spec.Message) {
	t.Helper()
	if m.ID != nil {
		if id, err := spec.ParseID(m.ID); err != nil || !id.Equal(m.ID) {
			t.Fatalf("Decode(%q): id %q is not a valid id: %v", b, m.ID, err)
		}
	}
	var again []byte
	switch m.Kind {
	case spec.KindRequest, spec.KindNotification:
		if m.Method == "" {
			t.Fatalf("Decode(%q): kind %d with an empty method", b, m.Kind)
		}
		if (m.Kind == spec.KindRequest) != (m.ID != nil) {
			t.Fatalf("Decode(%q): kind %d with id %q", b, m.Kind, m.ID)
		}
		if len(m.Params) > 0 && m.Params[0] != '{' && m.Params[0] != '[' {
			t.Fatalf("Decode(%q): params %q are neither an object nor an array", b, m.Params)
		}
		again = spec.EncodeRequest(m.ID, m.Method, m.Params)
	case spec.KindResponse:
		if m.Method != "" {
			t.Fatalf("Decode(%q): response with method %q", b, m.Method)
		}
		if (m.Result == nil) == (m.Error == nil) {
			t.Fatalf("Decode(%q): response with result %q and error %q", b, m.Result, m.Error)
		}
		if m.Result != nil {
			again = spec.EncodeResponse(m.ID, m.Result)
		} else {
			again = spec.EncodeErrorRaw(m.ID, m.Error)
		}
	default:
		t.Fatalf("Decode(%q): unknown kind %d", b, m.Kind)
	}
	for _, raw := range []json.RawMessage{m.Params, m.Result, m.Error} {
		if raw != nil && !json.Valid(raw) {
			t.Fatalf("Decode(%q): raw member %q is not valid JSON", b, raw)
		}
	}
	m2, e := spec.Decode(again)
	if e != nil {
		t.Fatalf("re-encoded %q as %q, which does not decode: %v", b, again, e)
	}
	if m2.Kind != m.Kind || !m2.ID.Equal(m.ID) || m2.Method != m.Method {
		t.Fatalf("re-encoded %q as %q: decoded kind %d id %q method %q, want %d %q %q",
			b, again, m2.Kind, m2.ID, m2.Method, m.Kind, m.ID, m.Method)
	}
}

// FuzzResumeParams: the params decoders never panic; what they accept has a token
// within bounds, and what they reject is an invalid-params error.
func FuzzResumeParams(f *testing.F) {
	for _, s := range []string{
		`{"resumeToken":"tok"}`,
		`{"requestId":1,"resumeToken":"tok","_meta":{"io.mcp-resume/ack":3}}`,
		`{"requestId":"x","resumeToken":""}`,
		`{"requestId":null,"resumeToken":"tok"}`,
		`{"resumeToken":"` + strings.Repeat("a", spec.MaxTokenLen) + `"}`,
		`{"resumeToken":"` + strings.Repeat("a", spec.MaxTokenLen+1) + `"}`,
		`{"resumeToken":"\u00e9\ud800"}`,
		`["tok"]`,
		`null`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkToken := func(what, tok string) {
			if tok == "" || len(tok) > spec.MaxTokenLen {
				t.Fatalf("%s(%q) accepted a token of %d bytes", what, b, len(tok))
			}
		}
		checkErr := func(what string, e *spec.Error) {
			if e.Code != spec.CodeInvalidParams || e.Reason != spec.ReasonInvalidParams {
				t.Fatalf("%s(%q): error %d %q, want invalid params", what, b, e.Code, e.Reason)
			}
			if !json.Valid(spec.EncodeError(spec.ID(`1`), e)) {
				t.Fatalf("%s(%q): error does not encode", what, b)
			}
		}
		if p, e := spec.DecodeResumeParams(b); e != nil {
			checkErr("DecodeResumeParams", e)
		} else {
			checkToken("DecodeResumeParams", p.ResumeToken)
		}
		if p, e := spec.DecodeGetStatusParams(b); e != nil {
			checkErr("DecodeGetStatusParams", e)
		} else {
			checkToken("DecodeGetStatusParams", p.ResumeToken)
			if _, err := spec.ParseID(p.RequestID); err != nil {
				t.Fatalf("DecodeGetStatusParams(%q) accepted id %q: %v", b, p.RequestID, err)
			}
		}
		if p, err := spec.DecodeCancelledParams(b); err == nil {
			if _, err := spec.ParseID(p.RequestID); err != nil {
				t.Fatalf("DecodeCancelledParams(%q) accepted id %q: %v", b, p.RequestID, err)
			}
		}
	})
}

// FuzzStampSeq: for any JSON object, StampSeq returns a JSON object that carries the
// number under _meta, keeps every other member, and ReadSeq reads the number back.
func FuzzStampSeq(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"a":1}`,
		` { "_meta" : { "progressToken" : "p" } , "x" : [ ] } `,
		`{"_meta":{"io.mcp-resume/seq":1}}`,
		`{"_meta":null,"n":9007199254740993}`,
		`{"a":{"_meta":{}},"s":"_meta"}`,
		`{"_meta":{"a":1},"_meta":{"b":2}}`,
		`[{"a":1}]`,
		`"x"`,
		`{`,
	} {
		f.Add([]byte(s), uint64(7))
	}
	f.Add([]byte(`{"h":"<&>"}`), uint64(0))
	// The known defect: skipped, not failed (see TestStampSeqEscapedMetaKey).
	f.Add([]byte(`{"\u005fmeta":{"x":1}}`), uint64(5))
	f.Add([]byte(`{"_meta":{}}`), uint64(1<<64-1))
	f.Fuzz(func(t *testing.T, b []byte, seq uint64) {
		out := spec.StampSeq(b, seq)
		trimmed := bytes.TrimSpace(b)
		if !json.Valid(b) || len(trimmed) == 0 || trimmed[0] != '{' {
			if len(trimmed) == 0 || trimmed[0] != '{' {
				if !bytes.Equal(out, trimmed) {
					t.Fatalf("StampSeq(%q) = %q, want a non-object unchanged", b, out)
				}
			}
			return
		}
		if !json.Valid(out) || bytes.TrimSpace(out)[0] != '{' {
			t.Fatalf("StampSeq(%q) = %q, not a JSON object", b, out)
		}
		if got := spec.ReadSeq(out); got != seq {
			t.Fatalf("ReadSeq(StampSeq(%q, %d)) = %d (output %q)", b, seq, got, out)
		}
		// Decoded as a map (last key wins, as in most parsers), the number is there and
		// nothing else changed.
		in, got := members(t, b), members(t, out)
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(got["_meta"], &meta); err != nil {
			t.Fatalf("StampSeq(%q) = %q: _meta is not an object", b, out)
		}
		if n := meta[spec.MetaSeq]; string(n) != string(jsonUint(seq)) {
			t.Fatalf("StampSeq(%q, %d) = %q: _meta[seq] = %q", b, seq, out, n)
		}
		for k, v := range in {
			if k == "_meta" {
				continue
			}
			if !sameJSON(t, v, got[k]) {
				t.Fatalf("StampSeq(%q) = %q: member %q changed from %q to %q", b, out, k, v, got[k])
			}
		}
		if len(got) != len(in)+btoi(in["_meta"] == nil) {
			t.Fatalf("StampSeq(%q) = %q: %d members, want %d", b, out, len(got), len(in)+btoi(in["_meta"] == nil))
		}
		var inMeta map[string]json.RawMessage
		if json.Unmarshal(in["_meta"], &inMeta) == nil {
			for k, v := range inMeta {
				if k != spec.MetaSeq && !sameJSON(t, v, meta[k]) {
					t.Fatalf("StampSeq(%q) = %q: _meta member %q changed from %q to %q", b, out, k, v, meta[k])
				}
			}
		}
	})
}

func members(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return m
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if b == nil {
		return false
	}
	// Invalid UTF-8 decodes to U+FFFD either way; compare what a parser sees.
	if !utf8.Valid(a) || !utf8.Valid(b) {
		a, b = bytes.ToValidUTF8(a, []byte("\uFFFD")), bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	return reflect.DeepEqual(jsonValue(t, a), jsonValue(t, b))
}

func jsonUint(n uint64) []byte { b, _ := json.Marshal(n); return b }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
