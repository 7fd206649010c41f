package token_test

import (
	"encoding/base64"
	"testing"

	"github.com/mcp-resume/mcp-resume/internal/token"
)

// New draws distinct 43-character base64url secrets of 256 bits, none
// beginning with '-'.
func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		k := token.New()
		b, err := base64.RawURLEncoding.DecodeString(k)
		if len(k) != token.Len || err != nil || len(b) != 32 || k[0] == '-' || seen[k] {
			t.Fatalf("token %q: len %d, decoded %d bytes, err %v, seen %v", k, len(k), len(b), err, seen[k])
		}
		seen[k] = true
	}
}
