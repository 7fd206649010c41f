package spec

import (
	"encoding/json"
	"fmt"
)

// CallKey returns the call key (MetaKey) in params' `_meta`: "" when there is
// none, or an error (ReasonInvalidKey) when it is not a valid key.
func CallKey(params json.RawMessage) (string, *Error) {
	if len(params) == 0 {
		return "", nil
	}
	meta, found := Lookup(params, "_meta")
	if !found {
		return "", nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return "", nil
	}
	raw, has := m[MetaKey]
	if !has {
		return "", nil
	}
	var key string
	if json.Unmarshal(raw, &key) != nil || !validKey(key) {
		return "", NewError(CodeInvalidParams, ReasonInvalidKey,
			fmt.Sprintf("_meta[%q] must be a string of %d to %d characters of A-Z, a-z, 0-9, '-', '_', '.' or '~', chosen at random (it is the request's resume token)", MetaKey, KeyMinLen, KeyMaxLen))
	}
	return key, nil
}

func validKey(k string) bool {
	if len(k) < KeyMinLen || len(k) > KeyMaxLen {
		return false
	}
	for i := range len(k) {
		switch c := k[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == '~':
		default:
			return false
		}
	}
	return true
}

// WithoutKey returns the request msg without its call key (MetaKey), for
// keeping it where secrets are not kept (a restartable request's stored
// payload); msg itself when it has none or cannot be decoded.
func WithoutKey(msg []byte) []byte {
	var req map[string]json.RawMessage
	if json.Unmarshal(msg, &req) != nil {
		return msg
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(req["params"], &params) != nil {
		return msg
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(params["_meta"], &meta) != nil {
		return msg
	}
	if _, ok := meta[MetaKey]; !ok {
		return msg
	}
	delete(meta, MetaKey)
	params["_meta"], _ = json.Marshal(meta)
	req["params"], _ = json.Marshal(params)
	out, err := json.Marshal(req)
	if err != nil {
		return msg
	}
	return out
}
