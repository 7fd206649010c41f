package spec

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Member returns the raw value of the member key of obj, a JSON object, without
// decoding the rest: found reports whether obj has it. ok is false when the
// scanner cannot answer as encoding/json would (obj is not a valid object, has
// a key with escapes or non-ASCII bytes, or one that equals key only without
// regard to case, which encoding/json would match into a struct field): the
// caller then decodes with encoding/json.
func Member(obj []byte, key string) (v []byte, found, ok bool) {
	start, end, found, ok := memberAt(obj, key)
	if !ok || !found {
		return nil, false, ok
	}
	return obj[start:end], true, true
}

// memberAt is Member with the value's place in obj: obj[start:end].
func memberAt(obj []byte, key string) (start, end int, found, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, 0, false, false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return 0, 0, false, skipSpace(obj, i+1) == len(obj)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return 0, 0, false, false
		}
		ke, esc, sok := skipString(obj, i)
		if !sok || esc {
			return 0, 0, false, false
		}
		k := obj[i+1 : ke-1]
		i = skipSpace(obj, ke)
		if i >= len(obj) || obj[i] != ':' {
			return 0, 0, false, false
		}
		vs := skipSpace(obj, i+1)
		ve, vok := skipValue(obj, vs, 1)
		if !vok {
			return 0, 0, false, false
		}
		switch {
		case string(k) == key:
			if found {
				return 0, 0, false, false // repeated: encoding/json takes the last
			}
			start, end, found = vs, ve, true
		case bytes.EqualFold(k, []byte(key)) || !ascii(k):
			return 0, 0, false, false
		}
		i = skipSpace(obj, ve)
		if i >= len(obj) {
			return 0, 0, false, false
		}
		if obj[i] == '}' {
			return start, end, found, skipSpace(obj, i+1) == len(obj)
		}
		if obj[i] != ',' {
			return 0, 0, false, false
		}
		i = skipSpace(obj, i+1)
	}
}

// StringMember returns the member key of obj as a string: "" when it is absent,
// null or not a string. It decodes with encoding/json where Member cannot answer.
func StringMember(obj []byte, key string) string {
	v, found, ok := Member(obj, key)
	if ok {
		if !found {
			return ""
		}
		if s, plain := plainString(v); plain {
			return string(s)
		}
		var s string
		_ = json.Unmarshal(v, &s)
		return s
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return ""
	}
	var s string
	for k, raw := range m { // encoding/json's rules for a struct field: exact, else folded
		if k == key {
			_ = json.Unmarshal(raw, &s)
			return s
		}
	}
	for k, raw := range m {
		if bytes.EqualFold([]byte(k), []byte(key)) {
			_ = json.Unmarshal(raw, &s)
			return s
		}
	}
	return ""
}

// Lookup returns the member key of obj, a JSON object of a message Decode
// took, as every reader finds it (Decode leaves no other key a reader could
// take for it): found is false when obj has none, or is not an object.
func Lookup(obj []byte, key string) (v []byte, found bool) {
	v, found, ok := Member(obj, key)
	if ok {
		return v, found
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil, false
	}
	v, found = m[key]
	return v, found
}

// stringMember returns the member key of obj, a params object that passed
// checkKeys, as encoding/json decodes it into a string field: "" when it is
// absent or null, an error when it is not a string. (checkKeys leaves no other
// key that encoding/json would match to key.)
func stringMember(obj []byte, key string) (string, error) {
	if len(obj) == 0 || obj[0] != '{' {
		return "", nil // no params, or not an object: the method's own decoding answers
	}
	v, found := Lookup(obj, key)
	if !found || string(v) == "null" {
		return "", nil
	}
	if s, plain := plainString(v); plain {
		return string(s), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", errors.New("must be a string")
	}
	return s, nil
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}
