package mcp

import (
	"encoding/json"
	"strconv"
	"testing"
)

// FuzzStreamCursor: whatever a client puts in tasks/stream's params, the cursor
// is read without a panic, and one accepted is the integer that was sent.
func FuzzStreamCursor(f *testing.F) {
	for _, s := range []string{`{}`, `{"after":0}`, `{"after":18446744073709551614}`, `{"after":-1}`, `{"after":"3"}`, `{"after":1e3}`, `{"after":null}`, `[`, `{"after":01}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		after, from, err := streamCursor(params)
		if err != nil || !from {
			return
		}
		var p struct{ After json.Number }
		if json.Unmarshal(params, &p) != nil {
			return // the scanner took a member the decoder would not
		}
		if n, perr := strconv.ParseUint(string(p.After), 10, 64); perr != nil || n != after {
			t.Fatalf("%s: cursor %d accepted from %q", params, after, p.After)
		}
	})
}
