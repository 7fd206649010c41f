package spec_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
)

// FuzzOneReading: for any message Decode takes, what our checks read (the
// method, the target a scope or a policy is decided on, the call key, the
// 2026 envelope's version, a task request, an MRTR state, initialize's
// version) is what mcp-go's decoding of the same bytes gives its handler, as
// mcp-go's HandleMessage and its request types decode them; a message on
// which they could differ is refused.
func FuzzOneReading(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","Name":"countdown","arguments":{"seconds":1}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"Name":"countdown"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","n\u0061me":"countdown"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"nam\u212a\":\"x\"}}",
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","_meta":{"io.mcp-resume/key":"kkkkkkkkkkkkkkkkkkkkkk","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","task":{"ttl":1000},"requestState":"mr1.x"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":4,"Method":"tools/call","method":"tools/list"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, e := spec.Decode(b)
		if e != nil || m.Kind == spec.KindResponse {
			return
		}
		if err := sameReading(b, m); err != nil {
			t.Fatalf("Decode(%q) accepted a message readers take two ways: %v", b, err)
		}
	})
}

// sameReading compares what our checks read of m, decoded from b, with what
// mcp-go reads of b.
func sameReading(b []byte, m *spec.Message) error {
	var base struct {
		Method mcp.MCPMethod `json:"method"`
	}
	if json.Unmarshal(b, &base) == nil && string(base.Method) != m.Method {
		return fmt.Errorf("method: ours %q, mcp-go's %q", m.Method, base.Method)
	}
	var proto struct {
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(b, &proto) == nil {
		if ours, theirs := m.Envelope().Version, proto.Params.Meta.ProtocolVersion(); ours != theirs && ours != "?" {
			return fmt.Errorf("protocol version: ours %q, mcp-go's %q", ours, theirs)
		}
	}
	switch m.Method {
	case spec.MethodToolsCall:
		var r mcp.CallToolRequest
		if json.Unmarshal(b, &r) != nil {
			return nil // mcp-go refuses it: no handler runs
		}
		if r.Params.Name != m.Target() {
			return fmt.Errorf("tool: ours %q, mcp-go's %q", m.Target(), r.Params.Name)
		}
		key, ke := spec.CallKey(m.Params)
		theirs, _ := r.Params.Meta.GetMetaField(spec.MetaKey).(string)
		if ke == nil && key != theirs {
			return fmt.Errorf("call key: ours %q, mcp-go's %q", key, theirs)
		}
		if ours := spec.StringMember(m.Params, "requestState"); ours != r.Params.RequestState {
			return fmt.Errorf("requestState: ours %q, mcp-go's %q", ours, r.Params.RequestState)
		}
		task, found := spec.Lookup(m.Params, "task")
		if asked := found && len(task) > 0 && task[0] == '{'; asked != (r.Params.Task != nil) {
			return fmt.Errorf("task: ours %v, mcp-go's %+v", asked, r.Params.Task)
		}
	case spec.MethodPromptsGet:
		var r mcp.GetPromptRequest
		if json.Unmarshal(b, &r) == nil && r.Params.Name != m.Target() {
			return fmt.Errorf("prompt: ours %q, mcp-go's %q", m.Target(), r.Params.Name)
		}
	case spec.MethodResourcesRead:
		var r mcp.ReadResourceRequest
		if json.Unmarshal(b, &r) == nil && r.Params.URI != m.Target() {
			return fmt.Errorf("resource: ours %q, mcp-go's %q", m.Target(), r.Params.URI)
		}
	case spec.MethodInitialize:
		var r mcp.InitializeRequest
		if json.Unmarshal(b, &r) == nil && r.Params.ProtocolVersion != spec.StringMember(m.Params, "protocolVersion") {
			return fmt.Errorf("initialize: ours %q, mcp-go's %q", spec.StringMember(m.Params, "protocolVersion"), r.Params.ProtocolVersion)
		}
	}
	return nil
}

// TestOneReadingSpellings: every message of up to three params keys drawn
// from the spellings a reader may take for "name" or "task" (exact, folded,
// escaped, with U+212A KELVIN SIGN or U+017F LONG S, repeated), in every
// order: Decode refuses it, or our reading and mcp-go's agree.
func TestOneReadingSpellings(t *testing.T) {
	spellings := []string{`"name"`, `"Name"`, `"n\u0061me"`, `"nAmE"`, `"task"`, "\"tas\u212a\"", "\"ta\u017fk\"", `"_meta"`}
	values := []string{`"echo"`, `null`, `{"ttl":1}`}
	n := 0
	var gen func(prefix string, depth int)
	gen = func(prefix string, depth int) {
		if depth > 0 {
			msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + prefix + `}}`
			m, e := spec.Decode([]byte(msg))
			n++
			if e == nil {
				if err := sameReading([]byte(msg), m); err != nil {
					t.Errorf("%s: %v", msg, err)
				}
			}
		}
		if depth == 3 {
			return
		}
		for _, k := range spellings {
			for _, v := range values {
				p := prefix
				if p != "" {
					p += ","
				}
				gen(p+k+":"+v, depth+1)
			}
		}
	}
	gen("", 0)
	if n < 14000 {
		t.Fatalf("only %d messages made", n)
	}
}
