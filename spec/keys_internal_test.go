package spec

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzCheckKeys: the key walk ends, without a panic, on any bytes; on valid
// JSON it refuses exactly what a plain reference walk over encoding/json's
// tokens refuses.
func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{
		`{"a":[{"b":{"c":1}},{"d":2}],"e":{}}`,
		`{"a":1,"A":2}`,
		`{"params":{"arguments":{"x":[1,{"y":2,"y":3}]}}}`,
		`{"params":{"_meta":{"a":{"b":1,"B":2}},"task":{"TTL":1}},"x":[[{"k":1,"K":2}]]}`,
		`{"a":`, `{"a":}`, `{"a":[1,}`, `{"\u00":1}`, `[}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := checkKeys(b) != nil
		if !json.Valid(b) || bytes.TrimSpace(b)[0] != '{' {
			return
		}
		if want := referenceRefuses(t, b); got != want {
			t.Fatalf("checkKeys(%q) refuses: %v, the reference walk: %v", b, got, want)
		}
	})
}

// referenceRefuses applies rules 1 to 3 to b, a valid JSON object, with
// encoding/json's tokens and maps.
func referenceRefuses(t *testing.T, b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var walk func(p place) bool // after the value's first token is read: refuses
	var val func(tok json.Token, p place) bool
	val = func(tok json.Token, p place) bool {
		switch tok {
		case json.Delim('{'):
			return walk(p)
		case json.Delim('['):
			for d.More() {
				next, err := d.Token()
				if err != nil {
					t.Fatal(err)
				}
				if val(next, p) {
					return true
				}
			}
			_, _ = d.Token() // ']'
		}
		return false
	}
	walk = func(p place) bool {
		exact := map[string]bool{}
		folded := map[string]bool{}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				t.Fatal(err)
			}
			k := kt.(string)
			f := string(appendFolded(nil, []byte(k)))
			if exact[k] || p != placeOpen && folded[f] {
				return true
			}
			exact[k], folded[f] = true, true
			if p != placeOpen {
				for _, n := range p.names() {
					if k != n && bytes.EqualFold([]byte(k), []byte(n)) {
						return true
					}
				}
			}
			vt, err := d.Token()
			if err != nil {
				t.Fatal(err)
			}
			var first byte
			if vt == json.Delim('{') {
				first = '{'
			}
			if val(vt, p.child([]byte(k), first)) {
				return true
			}
		}
		_, _ = d.Token() // '}'
		return false
	}
	tok, err := d.Token()
	if err != nil {
		t.Fatal(err)
	}
	return val(tok, placeRoot)
}

// BenchmarkCheckKeys: the key walk of a typical tools/call request, the part
// of Decode that refuses ambiguous keys.
func BenchmarkCheckKeys(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":42}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if e := checkKeys(msg); e != nil {
			b.Fatal(e)
		}
	}
}
