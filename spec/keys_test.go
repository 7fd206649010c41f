package spec_test

import (
	"strings"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// TestKeysRefused: every way a key can be read two ways is refused with
// -32602 ambiguous_key, under the request's id.
func TestKeysRefused(t *testing.T) {
	for _, msg := range []string{
		// The scope bypass: an exact reader takes "name", encoding/json the last key equal ignoring case.
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","Name":"countdown","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","NAME":"countdown"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"nAmE":"countdown","name":"echo"}}`,
		// A misspelling alone: encoding/json reads it as the name, an exact reader sees none.
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"Name":"countdown"}}`,
		// Repeated exactly: encoding/json keeps the last, the scanner the first.
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","name":"countdown"}}`,
		// Spelled with escapes, or with U+212A KELVIN SIGN, which encoding/json folds to "k".
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","n\u0061me":"countdown"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/get\",\"params\":{\"tas\u212aId\":\"x\"}}",
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"a\",\"tas\u212aId\":\"x\"}}",
		// Invalid UTF-8 decodes to U+FFFD: two different byte strings, one key.
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"m\",\"params\":{\"a\xff\":1,\"a\xfe\":2}}",
		// The 2026 envelope, the call key, the progress token in _meta.
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","_meta":{"IO.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","_meta":{"io.mcp-resume/key":"a","io.mcp-resume/KEY":"b"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","_META":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","_meta":{"ProgressToken":"p"}}}`,
		// The envelope itself, and a task's ttl.
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","Method":"tools/call","params":{"name":"countdown"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","Params":{"name":"countdown"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","task":{"TTL":5}}}`,
		// Deeper protocol objects: capabilities.
		`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"capabilities":{"roots":{},"Roots":{"listChanged":true}}}}`,
		// A tool's arguments may differ in case, never repeat.
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","arguments":{"a":1,"a":2}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x","arguments":{"deep":[{"k":1,"k":2}]}}}`,
	} {
		_, e := spec.Decode([]byte(msg))
		if e == nil || e.Code != spec.CodeInvalidParams || e.Reason != spec.ReasonAmbiguousKey || string(e.ID) != "4" {
			t.Errorf("Decode(%s) = %v, want -32602 %s for id 4", msg, e, spec.ReasonAmbiguousKey)
		}
	}
}

// TestKeysAccepted: what clients send is untouched, a tool's and a user's data
// keep keys that differ only in case, and an object of many keys is checked
// by its set.
func TestKeysAccepted(t *testing.T) {
	var many strings.Builder
	many.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{`)
	for i := range 300 {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	many.WriteString(`}}}`)
	for _, tc := range []struct{ msg, target string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":1,"Seconds":2},"_meta":{"progressToken":"p","io.mcp-resume/key":"kkkkkkkkkkkkkkkkkkkkkk"}}}`, "countdown"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"count\u0064own"}}`, "countdown"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`, "file:///a"},
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"A":"1","a":"2"}}}`, "p"},
		{`{"jsonrpc":"2.0","id":1,"result":{"action":"accept","content":{"Name":"x","name":"y"}}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"id":1,"ID":2},"content":[]}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"a":1,"A":2}}}`, ""},
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`, ""},
		{many.String(), "x"},
	} {
		m, e := spec.Decode([]byte(tc.msg))
		if e != nil {
			t.Errorf("Decode(%.120s) = %v, want a message", tc.msg, e)
			continue
		}
		if m.Target() != tc.target {
			t.Errorf("Decode(%.120s).Target() = %q, want %q", tc.msg, m.Target(), tc.target)
		}
	}
	many.Reset()
	many.WriteString(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"arguments":{`)
	for i := range 40 {
		many.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
	}
	many.WriteString(`"kxxx":2}}}`)
	if _, e := spec.Decode([]byte(many.String())); e == nil || e.Reason != spec.ReasonAmbiguousKey {
		t.Errorf("a key repeated among 41: %v, want %s", e, spec.ReasonAmbiguousKey)
	}
}

// TestTargetMustBeString: a name or URI that is not a string is refused, as
// mcp-go would refuse it, before any check reads it as "".
func TestTargetMustBeString(t *testing.T) {
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":7}}`,
		`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":{"a":1}}}`,
	} {
		_, e := spec.Decode([]byte(msg))
		if e == nil || e.Code != spec.CodeInvalidParams || string(e.ID) != "2" {
			t.Errorf("Decode(%s) = %v, want -32602 for id 2", msg, e)
		}
	}
}
