package audit

import "unicode/utf8"

// isCanonical reports, without decoding them, that args are their own
// canonical JSON (canonical's of their decoding), or else not JSON at all
// (then RuleHash hashes them as they are, which is the same). It answers
// false when unsure: for any space, escape, key out of order or repeated,
// control character, invalid UTF-8, U+2028 or U+2029, or nesting deeper than
// maxCanonicalDepth; hashArguments then decodes them.
func isCanonical(args []byte) bool {
	end, ok := canonicalValue(args, 0, 0)
	return ok && end == len(args)
}

// maxCanonicalDepth bounds the nesting isCanonical follows.
const maxCanonicalDepth = 32

// canonicalValue scans the value at b[i:] and returns where it ends, and
// false when it is not in canonical form (or not a value).
func canonicalValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxCanonicalDepth {
		return i, false
	}
	switch c := b[i]; {
	case c == '{':
		return canonicalObject(b, i+1, depth+1)
	case c == '[':
		return canonicalArray(b, i+1, depth+1)
	case c == '"':
		end, ok := plainString(b, i)
		return end, ok
	case c == '-' || ('0' <= c && c <= '9'):
		return number(b, i)
	case hasPrefix(b[i:], "true"):
		return i + 4, true
	case hasPrefix(b[i:], "false"):
		return i + 5, true
	case hasPrefix(b[i:], "null"):
		return i + 4, true
	}
	return i, false
}

// canonicalObject scans an object's members from after its '{': keys in
// strictly increasing byte order (encoding/json writes a map's keys sorted,
// and a key repeated is one key once decoded).
func canonicalObject(b []byte, i, depth int) (int, bool) {
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	var prev []byte
	for first := true; ; first = false {
		start := i
		end, ok := plainString(b, i)
		if !ok {
			return i, false
		}
		key := b[start+1 : end-1]
		if !first && string(key) <= string(prev) {
			return i, false
		}
		prev = key
		if end >= len(b) || b[end] != ':' {
			return i, false
		}
		if i, ok = canonicalValue(b, end+1, depth); !ok || i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '}':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
}

// canonicalArray scans an array's elements from after its '['.
func canonicalArray(b []byte, i, depth int) (int, bool) {
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = canonicalValue(b, i, depth); !ok || i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ']':
			return i + 1, true
		case ',':
			i++
		default:
			return i, false
		}
	}
}

// plainString scans the string at b[i] (its '"'), which is in canonical form
// when it holds no escape and nothing encoding/json would escape (with
// SetEscapeHTML(false)): no control character, valid UTF-8, no U+2028 or
// U+2029.
func plainString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for i++; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\' || c < 0x20:
			return i, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return i, false
			}
			i += size
		}
	}
	return i, false
}

// number scans a JSON number (RFC 8259 §6); a decoded json.Number is
// written back as it was sent.
func number(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return i, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return i, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }
