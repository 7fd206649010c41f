package mcp

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/mcp-resume/mcp-resume/spec"
)

// What the core hands a client to name a request by (a task id, a 2026
// requestState, a deferred answer's handle) has one shape: a prefix that says
// what it is, then base64url of a JSON object that carries the request's id
// and token ("i", "t") and what else that kind needs. It is a secret (its
// token), checked only through the engine's token check, bound to the
// principal and limited like every token check.

// named is a kind of reference: it names a request by its id and token.
type named interface {
	named() (spec.ID, string)
}

func (t *taskID) named() (spec.ID, string)        { return t.ID, t.Token }
func (rs *requestState) named() (spec.ID, string) { return rs.ID, rs.Token }
func (h *deferHandle) named() (spec.ID, string)   { return h.ID, h.Token }

// encodeRef returns v as a reference with prefix.
func encodeRef(prefix string, v named) string {
	b, _ := json.Marshal(v)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// decodeRef reads s, a reference with prefix, as a T: false when s is not one
// (another prefix, not base64url, not the JSON of a T, or naming no request:
// a token spec.CheckToken refuses, an id that is none).
func decodeRef[T any, P interface {
	*T
	named
}](prefix, s string) (*T, bool) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return nil, false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, false
	}
	v := new(T)
	if json.Unmarshal(b, v) != nil {
		return nil, false
	}
	id, tok := P(v).named()
	if spec.CheckToken(tok) != nil {
		return nil, false
	}
	if _, err := spec.ParseID(id); err != nil {
		return nil, false
	}
	return v, true
}
