package http

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/mcp-resume/mcp-resume/spec"
)

// idKey is the event-id form of a request's raw JSON-RPC id.
func idKey(id spec.ID) string { return base64.RawURLEncoding.EncodeToString(id) }

// appendEventID appends the id of the event carrying message seq of the request
// with key.
func appendEventID(b []byte, key string, seq uint64) []byte {
	b = append(b, key...)
	b = append(b, '.')
	return strconv.AppendUint(b, seq, 10)
}

// parseEventID parses an event id made by appendEventID.
func parseEventID(s string) (spec.ID, uint64, bool) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 {
		return nil, 0, false
	}
	id, err := base64.RawURLEncoding.DecodeString(s[:i])
	if err != nil || len(id) == 0 {
		return nil, 0, false
	}
	seq, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return nil, 0, false
	}
	return spec.ID(id), seq, true
}
