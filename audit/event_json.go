package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// The JSON form of an Event, appended to a buffer with no reflection: what
// a File writes for each call, in a batch's one buffer. It is byte for byte
// json.Marshal's of wireEvent (its field order, omitempty, times as
// time.Time's MarshalJSON writes them in UTC, strings and arguments escaped
// as encoding/json escapes them by default, HTML characters included).

// appendJSON appends e's JSON form to b. On an error (a time whose year has
// more than four digits, arguments that are not JSON) it returns b as it was.
func (e *Event) appendJSON(b []byte) ([]byte, error) {
	n := len(b)
	b = append(b, `{"start":`...)
	b, err := appendTime(b, e.Start)
	if err != nil {
		return b[:n], err
	}
	b = append(b, `,"end":`...)
	if b, err = appendTime(b, e.End); err != nil {
		return b[:n], err
	}
	b = appendField(b, `,"principal":`, e.Principal, true)
	b = appendField(b, `,"tool":`, e.Tool, false)
	b = appendField(b, `,"request_id":`, e.RequestID, false)
	b = appendField(b, `,"trace_id":`, e.TraceID, true)
	b = appendField(b, `,"span_id":`, e.SpanID, true)
	b = appendField(b, `,"transport":`, e.Transport, true)
	b = appendField(b, `,"protocol_version":`, e.ProtocolVersion, true)
	b = appendField(b, `,"outcome":`, string(e.Outcome), false)
	b = appendField(b, `,"reason":`, e.Reason, true)
	b = append(b, `,"bytes_in":`...)
	b = strconv.AppendInt(b, e.BytesIn, 10)
	b = append(b, `,"bytes_out":`...)
	b = strconv.AppendInt(b, e.BytesOut, 10)
	b = appendField(b, `,"arguments_sha256":`, e.ArgumentsSHA256, true)
	if len(e.Arguments) > 0 {
		b = append(b, `,"arguments":`...)
		if b, err = appendRaw(b, e.Arguments); err != nil {
			return b[:n], err
		}
	}
	return append(b, '}'), nil
}

// appendTime appends t in UTC as time.Time's MarshalJSON writes it, with its
// error for a year it cannot write.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		_, err := t.MarshalJSON()
		return b, err
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendField appends name and v, unless v is empty and omitted when empty.
func appendField(b []byte, name, v string, omitEmpty bool) []byte {
	if v == "" && omitEmpty {
		return b
	}
	return appendString(append(b, name...), v)
}

// appendRaw appends raw JSON compacted and HTML-escaped, as encoding/json
// writes a json.RawMessage.
func appendRaw(b, raw []byte) ([]byte, error) {
	n := len(b)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return b[:n], err
	}
	b = buf.Bytes()
	if needsHTMLEscape(b[n:]) {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, b[n:])
		b = append(b[:n], esc.Bytes()...)
	}
	return b, nil
}

// needsHTMLEscape reports whether p may hold what json.HTMLEscape escapes:
// <, >, &, or a byte that begins U+2028 or U+2029.
func needsHTMLEscape(p []byte) bool {
	for _, c := range p {
		if c == '<' || c == '>' || c == '&' || c == 0xe2 {
			return true
		}
	}
	return false
}

const hexDigits = "0123456789abcdef"

// appendString appends s quoted as encoding/json quotes a string by default:
// ", \\ and the control characters escaped (\b \f \n \r \t by name), <, > and
// & as \u003c \u003e \u0026, U+2028 and U+2029 as \u2028 \u2029, and each
// byte of invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
