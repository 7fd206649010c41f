package spec_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// EncodeRequest quotes the method as JSON (not Go) whatever bytes it holds.
func TestEncodeRequestMethodQuoting(t *testing.T) {
	for _, method := range []string{"tools/call", "a\x01b", `q"uo\te`, "é✓", "\u2028", "<&>", "\x7f"} {
		b := spec.EncodeRequest(spec.ID(`"x"`), method, json.RawMessage(`{"a":[1]}`))
		m, e := spec.Decode(b)
		if e != nil {
			t.Fatalf("EncodeRequest(%q) = %s, does not decode: %v", method, b, e)
		}
		if m.Kind != spec.KindRequest || m.Method != method || string(m.ID) != `"x"` || string(m.Params) != `{"a":[1]}` {
			t.Fatalf("EncodeRequest(%q) = %s, decodes to %+v", method, b, m)
		}
	}
}

func TestAppendResumePolicy(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	tests := []struct {
		name string
		p    spec.ResumePolicyParams
		want string // the params, compared by meaning
	}{
		{"both waits", spec.ResumePolicyParams{RequestID: spec.ID(`7`), ResumeToken: "tok", MinWait: n(1), MaxWait: n(60)},
			`{"requestId":7,"resumeToken":"tok","minWait":1,"maxWait":60}`},
		{"zero minWait left out", spec.ResumePolicyParams{RequestID: spec.ID(`"a"`), ResumeToken: "tok", MinWait: n(0), MaxWait: n(0)},
			`{"requestId":"a","resumeToken":"tok","maxWait":0}`},
		{"no waits", spec.ResumePolicyParams{RequestID: spec.ID(`9007199254740993`), ResumeToken: `t"\` + "\x00é"},
			`{"requestId":9007199254740993,"resumeToken":"t\"\\\u0000é"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("keep")
			b := spec.AppendResumePolicy(prefix, &tt.p)
			if string(b[:4]) != "keep" {
				t.Fatalf("AppendResumePolicy did not append: %s", b)
			}
			m, e := spec.Decode(b[4:])
			if e != nil {
				t.Fatalf("AppendResumePolicy = %s, does not decode: %v", b[4:], e)
			}
			if m.Kind != spec.KindNotification || m.Method != spec.MethodResumePolicy {
				t.Fatalf("AppendResumePolicy = %s: kind %d method %q", b[4:], m.Kind, m.Method)
			}
			if g, w := jsonValue(t, m.Params), jsonValue(t, []byte(tt.want)); !reflect.DeepEqual(g, w) {
				t.Fatalf("params = %s, want %s", m.Params, tt.want)
			}
		})
	}
}

// The encoders take raw parts as produced by json.Marshal, which never returns nil;
// a nil part still should not produce invalid JSON (the json.Marshal-based encoders
// wrote null).
func TestEncodeNilParts(t *testing.T) {
	id := spec.ID(`1`)
	for name, f := range map[string]func() []byte{
		"EncodeResponse": func() []byte { return spec.EncodeResponse(id, nil) },
		"EncodeErrorRaw": func() []byte { return spec.EncodeErrorRaw(id, nil) },
		"EncodeError":    func() []byte { return spec.EncodeError(id, nil) },
	} {
		if b := f(); !json.Valid(b) {
			t.Errorf("%s with a nil part = %s, not valid JSON", name, b)
		}
	}
}
