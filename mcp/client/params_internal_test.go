package client

import (
	"encoding/json"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// encodeParams writes the caller's members as they are, the caller's _meta
// merged with the client's (the
// envelope, the progress token, the key, the trace context, which replaces
// the caller's tracestate), in key order, without changing the caller's map.
func TestEncodeParams(t *testing.T) {
	fields := map[string]json.RawMessage{
		"name":      json.RawMessage(`"tool \"x\""`),
		"arguments": json.RawMessage("{\n  \"a\": [1,\n 2]\n}"),
		"_meta":     json.RawMessage(`{"mine":1,"tracestate":"old","progressToken":"theirs"}`),
	}
	cl := &call{id: spec.ID(`"c-1"`), callKey: "KEY", traceparent: "00-aa-bb-01"}
	env := map[string]json.RawMessage{"io.modelcontextprotocol/protocolVersion": json.RawMessage(`"2026-07-28"`)}
	got, err := encodeParams(fields, cl, true, env)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"_meta":{"io.mcp-resume/key":"KEY","io.modelcontextprotocol/protocolVersion":"2026-07-28","mine":1,"progressToken":"c-1","traceparent":"00-aa-bb-01"},"arguments":` + string(fields["arguments"]) + `,"name":"tool \"x\""}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if len(fields) != 3 || string(fields["_meta"]) != `{"mine":1,"tracestate":"old","progressToken":"theirs"}` {
		t.Fatalf("the caller's map changed: %v", fields)
	}
	for _, tc := range []struct {
		fields map[string]json.RawMessage
		want   string
	}{
		{nil, ""},
		{map[string]json.RawMessage{}, `{}`},
		{map[string]json.RawMessage{"_meta": json.RawMessage(`{"k":true}`), "n\u00e9": json.RawMessage(`null`)}, `{"_meta":{"k":true},"n` + "\u00e9" + `":null}`},
	} {
		got, err := encodeParams(tc.fields, &call{}, false, nil)
		if err != nil || string(got) != tc.want {
			t.Errorf("%v: %s %v, want %s", tc.fields, got, err, tc.want)
		}
	}
	if _, err := encodeParams(map[string]json.RawMessage{"_meta": json.RawMessage(`[1]`)}, cl, true, nil); err == nil {
		t.Error("a _meta that is no object: no error")
	}
	if got, err := encodeParams(map[string]json.RawMessage{"_meta": json.RawMessage(`null`)}, cl, true, nil); err != nil || string(got) != `{"_meta":{"io.mcp-resume/key":"KEY","progressToken":"c-1","traceparent":"00-aa-bb-01"}}` {
		t.Errorf("a null _meta: %s %v", got, err)
	}
}
