package spec

import "bytes"

// A single-pass scanner for the envelope of a JSON-RPC message. Decode tries it
// first: it validates the whole message as JSON (the grammar of RFC 8259, as
// encoding/json checks it: bytes in strings are not checked as UTF-8) and picks out
// the six members of the envelope without decoding anything else. It gives up
// (ok false) on everything encoding/json would judge in a way that takes more than
// the grammar: invalid JSON, a top level that is not an object, keys with escapes
// or non-ASCII bytes or that match a member's name only without regard to case,
// repeated members, and "jsonrpc" or "method" values that are not plain ASCII
// strings. Decode then takes the encoding/json path, which finds the same message
// or the right error; a fuzz target checks that the two agree.

// maxScanDepth bounds the nesting the scanner follows; deeper messages take the
// encoding/json path (which has its own limit).
const maxScanDepth = 512

// scanEnvelope fills env from b, the members as subslices of b.
func scanEnvelope(b []byte, env *envelope) (ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	var seen uint8
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		ke, esc, ok := skipString(b, i)
		if !ok || esc {
			return false
		}
		key := b[i+1 : ke-1]
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		vs := skipSpace(b, i+1)
		ve, ok := skipValue(b, vs, 1)
		if !ok {
			return false
		}
		f := envelopeMember(key)
		switch {
		case f == memberFolded:
			return false
		case f >= 0:
			if seen&(1<<f) != 0 {
				return false
			}
			seen |= 1 << f
			if !env.set(f, b[vs:ve]) {
				return false
			}
		}
		i = skipSpace(b, ve)
		if i >= len(b) {
			return false
		}
		if b[i] == '}' {
			return skipSpace(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return false
		}
		i = skipSpace(b, i+1)
	}
}

// The envelope's members, by their index in envelopeNames.
const (
	memberJSONRPC = iota
	memberID
	memberMethod
	memberParams
	memberResult
	memberError

	memberUnknown = -1 // another key: skipped, like encoding/json does
	memberFolded  = -2 // a member's name in other case: left to encoding/json
)

var envelopeNames = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

func envelopeMember(key []byte) int {
	for f, name := range envelopeNames {
		if string(key) == name {
			return f
		}
	}
	for _, c := range key {
		if c >= 0x80 { // encoding/json folds some non-ASCII letters to ASCII ones
			return memberFolded
		}
	}
	for _, name := range envelopeNames {
		if bytes.EqualFold(key, []byte(name)) {
			return memberFolded
		}
	}
	return memberUnknown
}

// set stores v, a valid JSON value, as member f, as json.Unmarshal would; it
// returns false where it would not know how.
func (env *envelope) set(f int, v []byte) bool {
	switch f {
	case memberJSONRPC, memberMethod:
		if string(v) == "null" {
			return true // encoding/json leaves the pointer nil
		}
		in, ok := plainString(v)
		if !ok {
			return false
		}
		// Known values need no allocation.
		p := commonStrings[string(in)]
		if p == nil {
			s := string(in)
			p = &s
		}
		if f == memberJSONRPC {
			env.JSONRPC = p
		} else {
			env.Method = p
		}
	case memberID:
		env.ID = v
	case memberParams:
		env.Params = v
	case memberResult:
		env.Result = v
	case memberError:
		env.Error = v
	}
	return true
}

// commonStrings holds the "jsonrpc" value and the methods clients send most, for
// set to point to instead of allocating. Nothing writes through its pointers.
var commonStrings = func() map[string]*string {
	m := make(map[string]*string)
	for _, s := range []string{
		"2.0", MethodInitialize, "notifications/initialized", "ping", MethodToolsCall, "tools/list",
		MethodGetStatus, MethodResume, MethodCancelled, MethodProgress,
		"resources/list", "resources/read", "prompts/list", "prompts/get",
	} {
		m[s] = &s
	}
	return m
}()

// plainString returns the contents of v, a valid JSON string of ASCII without
// escapes; anything else needs encoding/json's decoding.
func plainString(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	in := v[1 : len(v)-1]
	for _, c := range in {
		if c == '\\' || c >= 0x80 {
			return nil, false
		}
	}
	return in, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the end of the JSON value that starts at b[i] (after
// whitespace), or false when there is no valid one there.
func skipValue(b []byte, i, depth int) (int, bool) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '{':
		if depth >= maxScanDepth {
			return 0, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			var ok bool
			if i, _, ok = skipString(b, i); !ok {
				return 0, false
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			if i, ok = skipValue(b, i+1, depth+1); !ok {
				return 0, false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == '}' {
				return i + 1, true
			}
			if b[i] != ',' {
				return 0, false
			}
			i = skipSpace(b, i+1)
		}
	case c == '[':
		if depth >= maxScanDepth {
			return 0, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = skipValue(b, i, depth+1); !ok {
				return 0, false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, false
			}
			if b[i] == ']' {
				return i + 1, true
			}
			if b[i] != ',' {
				return 0, false
			}
			i++
		}
	case c == '"':
		end, _, ok := skipString(b, i)
		return end, ok
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	}
	return 0, false
}

// skipString returns the end of the string that starts at b[i] ('"'), and whether
// it has escapes.
func skipString(b []byte, i int) (end int, escaped, ok bool) {
	for i++; i < len(b); {
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return 0, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, false, false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, false, false
					}
				}
				i += 6
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		default:
			i++
		}
	}
	return 0, false, false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipNumber returns the end of the number that starts at b[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, true
}

func skipLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}
