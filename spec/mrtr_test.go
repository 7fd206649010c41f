package spec

import "testing"

func TestAskedInput(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		asked bool
		state string
	}{
		{`{"content":[]}`, false, ""},
		{`{"resultType":"complete","content":[]}`, false, ""},
		{`{"resultType":"input_required","inputRequests":{"q":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"s\u00e9"}`, true, "sé"},
		{`{"resultType":"input_required","inputRequests":{"q":{"method":"roots/list"}}}`, true, ""},
		{`{"resultType":"input_required","inputRequests":7}`, false, ""},
	} {
		in, ok := AskedInput([]byte(tc.raw))
		if ok != tc.asked || in.RequestState != tc.state {
			t.Errorf("AskedInput(%s) = %+v, %v; want asked %v, state %q", tc.raw, in, ok, tc.asked, tc.state)
		}
		if ok && len(in.InputRequests) != 1 {
			t.Errorf("AskedInput(%s): input requests %v", tc.raw, in.InputRequests)
		}
	}
	for _, m := range []string{MethodToolsCall, MethodPromptsGet, MethodResourcesRead} {
		if !RetriesInput(m) {
			t.Errorf("RetriesInput(%s) false", m)
		}
	}
	if RetriesInput("tools/list") {
		t.Error("RetriesInput(tools/list) true")
	}
}
