package spec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeFast: where the scanner takes a message (scanEnvelope reports ok),
// encoding/json takes it too and finds the same envelope; and every input the
// scanner takes is valid JSON. Where it declines, Decode's encoding/json path
// decides, so the two paths give the same answer for every input.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkScan(t, b) })
}

// TestScanTakesCommonMessages guards the point of the scanner: the messages
// clients send every day take the fast path.
func TestScanTakesCommonMessages(t *testing.T) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"héllo \"x\" \u00e9"},"_meta":{"progressToken":1}}}`,
		` { "jsonrpc" : "2.0" , "method" : "notifications/initialized" } ` + "\n",
		`{"jsonrpc":"2.0","id":"a-1","result":{"content":[{"type":"text","text":"t"}],"isError":false}}`,
		`{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":-32602,"message":"m","data":{"reason":"expired"}}}`,
		`{"jsonrpc":"2.0","id":-1.5e+3,"method":"x/custom","params":[1,true,null,{}]}`,
	} {
		var env envelope
		if !scanEnvelope([]byte(s), &env) {
			t.Errorf("scanEnvelope(%s) declined", s)
		}
		checkScan(t, []byte(s))
	}
}

// TestScanDeclines lists inputs the scanner must leave to encoding/json.
func TestScanDeclines(t *testing.T) {
	for _, s := range []string{
		``, `null`, `[]`, `{"jsonrpc":"2.0","id":1,"method":"m"} x`, `{"jsonrpc":"2.0","id":1,"method":"m",}`,
		`{"JSONRPC":"2.0","id":1,"method":"m"}`, `{"jſonrpc":"2.0","id":1,"method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}`, `{"jsonrpc":"2\u002e0","id":1,"method":"m"}`,
		`{"jsonrpc":2,"id":1,"method":"m"}`, `{"jsonrpc":"2.0","id":1,"method":"m\xff"}`,
		`{"jsonrpc":"2.0","id":01,"method":"m"}`, `{"jsonrpc":"2.0","id":1.,"method":"m"}`,
		`{"jsonrpc":"2.0","id":"a` + "\x01" + `","method":"m"}`, `{"jsonrpc":"2.0","id":"\x","method":"m"}`,
		`{"jsonrpc":"2.0","id":1,"method":"m","params":` + strings.Repeat("[", maxScanDepth+1) + strings.Repeat("]", maxScanDepth+1) + `}`,
		"\xef\xbb\xbf{}",
	} {
		var env envelope
		if scanEnvelope([]byte(s), &env) {
			t.Errorf("scanEnvelope(%q) took it", s)
		}
		checkScan(t, []byte(s))
	}
}

func checkScan(t *testing.T, b []byte) {
	t.Helper()
	var fast envelope
	if !scanEnvelope(b, &fast) {
		return
	}
	if !json.Valid(b) {
		t.Fatalf("scanEnvelope took %q, which is not valid JSON", b)
	}
	var slow envelope
	if err := json.Unmarshal(b, &slow); err != nil {
		t.Fatalf("scanEnvelope took %q, which encoding/json refuses: %v", b, err)
	}
	sameString := func(name string, a, b *string) {
		if (a == nil) != (b == nil) || (a != nil && *a != *b) {
			t.Fatalf("%s: scanner %v, encoding/json %v", name, deref(a), deref(b))
		}
	}
	sameRaw := func(name string, a, b json.RawMessage) {
		if (a == nil) != (b == nil) || !bytes.Equal(a, b) {
			t.Fatalf("%s: scanner %q, encoding/json %q", name, a, b)
		}
	}
	sameString("jsonrpc", fast.JSONRPC, slow.JSONRPC)
	sameString("method", fast.Method, slow.Method)
	sameRaw("id", fast.ID, slow.ID)
	sameRaw("params", fast.Params, slow.Params)
	sameRaw("result", fast.Result, slow.Result)
	sameRaw("error", fast.Error, slow.Error)
	// ParseID agrees with encoding/json on what an id is.
	if len(fast.ID) > 0 && string(fast.ID) != "null" { // null is no id (Decode)
		_, err := ParseID(fast.ID)
		var s string
		var n json.Number
		jsonOK := json.Unmarshal(fast.ID, &s) == nil || (fast.ID[0] != '"' && json.Unmarshal(fast.ID, &n) == nil)
		if (err == nil) != jsonOK {
			t.Fatalf("ParseID(%q) = %v; encoding/json accepts it: %v", fast.ID, err, jsonOK)
		}
	}
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

var scanSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
	`{"jsonrpc":"2.0","id":"a","result":{"_meta":{"io.mcp-resume/seq":3}}}`,
	`{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":-32602,"message":"m","data":{"reason":"expired"}}}`,
	`{"jsonrpc":"2.0","id":null,"method":"m"}`,
	`{"jsonrpc":null,"id":1,"method":null,"result":null}`,
	`{"jsonrpc":"2.0","id":{},"method":"m"}`,
	`{"jsonrpc":"2.0","id":1,"result":1,"error":{}}`,
	`{"jsonrpc":"1.0","id":1.5e3,"method":"m","params":"x"}`,
	`{"Id":1,"jsonrpc":"2.0","method":"m"}`,
	`{"x":[1,{"y":"\ud800\n"}],"jsonrpc":"2.0","id":-0.0e-0,"method":"m"}`,
	`{}`,
	` {"jsonrpc":"2.0","id":"\u0041","method":"m"}	`,
}
