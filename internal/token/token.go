// Package token draws the secrets that name requests: the resume tokens the
// engine makes, and the call keys a client chooses (which become its calls'
// tokens). One algorithm, so that both are alike: a token of one is a valid
// key of the other.
package token

import (
	"crypto/rand"
	"encoding/base64"
)

// Len is the length of a token: 256 bits in base64url without padding.
const Len = 43

// New returns a fresh 256-bit secret from the CSPRNG, base64url without
// padding. It never begins with '-': a command line given one (mcp-resume
// status ID TOKEN) would take it for a flag. Drawing again when it would costs
// the token 0.02 bits.
func New() string {
	var b [32]byte
	var enc [Len]byte
	for enc[0] == 0 || enc[0] == '-' {
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+); it panics instead.
		base64.RawURLEncoding.Encode(enc[:], b[:])
	}
	return string(enc[:])
}
