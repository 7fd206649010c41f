package spec

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzEnvelope: the scanner's envelope (EnvelopeOf) is the one encoding/json reads
// (envelopeSlow), and StringMember finds what json.Unmarshal into a struct field
// finds.
func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"echo"}`,
		`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":5,"io.modelcontextprotocol/clientCapabilities":null}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28"}}`,
		`{"_META":{"io.modelcontextprotocol/protocolVersion":"x"}}`,
		`{"_meta":{"io.modelcontextprotocol/protocolVersion":"a"},"_meta":{}}`,
		`{"name":"t\u00e9","uri":"file:///x","requestState":"mr1.abc"}`,
		`{"Name":"n"}`, `[]`, `{"_meta":7,"protocolVersion":1}`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		fast, slow := EnvelopeOf(params), envelopeSlow(params)
		if !bytes.Contains(params, []byte("protocolVersion")) {
			slow = Envelope{}
		}
		if fast.Version != slow.Version || !bytes.Equal(fast.Capabilities, slow.Capabilities) {
			t.Fatalf("EnvelopeOf(%q) = %+v, encoding/json reads %+v", params, fast, slow)
		}
		for _, key := range []string{"name", "uri", "requestState"} {
			var want string
			var p map[string]json.RawMessage
			if json.Unmarshal(params, &p) == nil {
				var v struct {
					Name         string `json:"name"`
					URI          string `json:"uri"`
					RequestState string `json:"requestState"`
				}
				_ = json.Unmarshal(params, &v)
				want = map[string]string{"name": v.Name, "uri": v.URI, "requestState": v.RequestState}[key]
			}
			if got := StringMember(params, key); got != want && json.Valid(params) {
				t.Fatalf("StringMember(%q, %q) = %q, encoding/json reads %q", params, key, got, want)
			}
		}
	})
}
