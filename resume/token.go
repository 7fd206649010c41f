package resume

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// TokenHash is the SHA-256 of a resume token. Only hashes are stored; a token itself
// is handed to the client once and never kept or logged.
type TokenHash [sha256.Size]byte

// HashToken returns the hash under which a token's request is stored.
func HashToken(token string) TokenHash { return sha256.Sum256([]byte(token)) }

// newToken returns a fresh 256-bit token from the CSPRNG, base64url without padding
// (43 characters), and its hash. It never begins with '-': a command line given
// one (mcp-resume status ID TOKEN) would take it for a flag. Drawing again when
// it would costs the token 0.02 bits.
func newToken() (string, TokenHash) {
	var b [32]byte
	var enc [43]byte // base64.RawURLEncoding.EncodedLen(32)
	for enc[0] == 0 || enc[0] == '-' {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+); it panics instead.
		base64.RawURLEncoding.Encode(enc[:], b[:])
	}
	return string(enc[:]), sha256.Sum256(enc[:])
}

// equal compares two hashes in constant time.
func (h TokenHash) equal(o TokenHash) bool { return subtle.ConstantTimeCompare(h[:], o[:]) == 1 }
