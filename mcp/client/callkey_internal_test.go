package client

import (
	"strings"
	"testing"
)

// A call key, which becomes the call's resume token and is printed for
// `mcp-resume status ID TOKEN`, never begins with '-' (a flag there); among
// 2,000, some would otherwise.
func TestCallKeyNotAFlag(t *testing.T) {
	for i := range 2000 {
		if k := newCallKey(); strings.HasPrefix(k, "-") || len(k) != 43 {
			t.Fatalf("key %d: %q", i, k)
		}
	}
}
