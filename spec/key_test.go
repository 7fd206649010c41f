package spec

import (
	"strings"
	"testing"
)

func TestCallKey(t *testing.T) {
	good := strings.Repeat("a", KeyMinLen)
	for _, c := range []struct {
		params, want string
		bad          bool
	}{
		{`{"name":"x"}`, "", false},
		{`{"name":"x","_meta":{"progressToken":1}}`, "", false},
		{`{"_meta":{"io.mcp-resume/key":"` + good + `"}}`, good, false},
		{`{"_meta":{"io.mcp-resume/key":"` + good[1:] + `"}}`, "", true},                         // too short
		{`{"_meta":{"io.mcp-resume/key":"` + strings.Repeat("a", KeyMaxLen+1) + `"}}`, "", true}, // too long
		{`{"_meta":{"io.mcp-resume/key":"` + good + `/"}}`, "", true},                            // not in the alphabet
		{`{"_meta":{"io.mcp-resume/key":12345678901234567890123}}`, "", true},                    // not a string
		{`{"_m\u0065ta":{"io.mcp-resume/key":"` + good + `"}}`, good, false},                     // escaped: decoded
	} {
		got, err := CallKey([]byte(c.params))
		if got != c.want || (err != nil) != c.bad || (err != nil && err.Reason != ReasonInvalidKey) {
			t.Errorf("CallKey(%s) = %q, %v", c.params, got, err)
		}
	}
}

func TestWithoutKey(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1,"io.mcp-resume/key":"secret-secret-secret-secret"}}}`
	out := string(WithoutKey([]byte(in)))
	if strings.Contains(out, "secret") || !strings.Contains(out, `"progressToken":1`) || !strings.Contains(out, `"name":"x"`) {
		t.Errorf("WithoutKey: %s", out)
	}
	plain := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`
	if got := string(WithoutKey([]byte(plain))); got != plain {
		t.Errorf("WithoutKey of a request without a key changed it: %s", got)
	}
}
