package gateway

import (
	"encoding/json"
	"testing"
)

// A tool whose x-mcp-header annotation mcp-go's server would panic on is
// skipped (decodeTool's error), not served.
func TestDecodeToolBadHeaderAnnotation(t *testing.T) {
	bad := `{"name":"t","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"not a header name!"}}}}`
	if _, err := decodeTool(json.RawMessage(bad)); err == nil {
		t.Fatal("a tool with a bad x-mcp-header annotation decoded")
	}
	good := `{"name":"t","inputSchema":{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region"}}}}`
	if _, err := decodeTool(json.RawMessage(good)); err != nil {
		t.Fatalf("a good annotation: %v", err)
	}
}
