package spec_test

import (
	"testing"

	"github.com/mcp-resume/mcp-resume/spec"
)

// BenchmarkDecode decodes a typical tools/call request.
func BenchmarkDecode(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":42}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := spec.Decode(msg); err != nil {
			b.Fatal(err)
		}
	}
}
