package resume

import (
	"crypto/sha256"
	"crypto/subtle"

	"github.com/mcp-resume/mcp-resume/internal/token"
)

// TokenHash is the SHA-256 of a resume token. Only hashes are stored; a token itself
// is handed to the client once and never kept or logged.
type TokenHash [sha256.Size]byte

// HashToken returns the hash under which a token's request is stored.
func HashToken(token string) TokenHash { return sha256.Sum256([]byte(token)) }

// newToken returns a fresh token (token.New) and its hash.
func newToken() (string, TokenHash) {
	tok := token.New()
	return tok, HashToken(tok)
}

// equal compares two hashes in constant time.
func (h TokenHash) equal(o TokenHash) bool { return subtle.ConstantTimeCompare(h[:], o[:]) == 1 }
