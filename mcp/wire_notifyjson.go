package mcp

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
)

// marshalParams encodes a notification's params exactly as mcp-go's
// NotificationParams.MarshalJSON does (one object: _meta and the additional
// fields, keys sorted, values as encoding/json writes them), without its map
// and reflection for the values notifications carry: strings, numbers,
// booleans and null. Any other value is encoded by encoding/json.
//
// Every progress and log notification of a call goes through here, and
// mcp-go's encoding was most of the server's allocations per notification.
func marshalParams(p mcp.NotificationParams) ([]byte, error) {
	return appendParams(make([]byte, 0, 32+32*len(p.AdditionalFields)), p)
}

// appendParams appends what marshalParams returns to b.
func appendParams(b []byte, p mcp.NotificationParams) ([]byte, error) {
	var small [8]string
	keys := small[:0]
	for k := range p.AdditionalFields {
		if k != "_meta" {
			keys = append(keys, k)
		}
	}
	if p.Meta != nil {
		keys = append(keys, "_meta")
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var v any
		if k == "_meta" {
			v = p.Meta
		} else {
			v = p.AdditionalFields[k]
		}
		var err error
		if b, err = appendJSONString(b, k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = appendJSONValue(b, v); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendJSONValue appends v as encoding/json encodes it.
func appendJSONValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendJSONString(b, v)
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case int32:
		return strconv.AppendInt(b, int64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case float64:
		// encoding/json writes the shortest decimal, in exponent form only
		// outside [1e-6, 1e21): those (and NaN, infinities) it writes itself.
		if a := math.Abs(v); v == 0 || (a >= 1e-6 && a < 1e21) {
			return strconv.AppendFloat(b, v, 'f', -1, 64), nil
		}
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, enc...), nil
}

// appendJSONString appends s quoted as encoding/json quotes it; strings it
// would escape (quotes, backslashes, control bytes, HTML's <, > and &,
// anything not ASCII) it writes itself.
func appendJSONString(b []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			enc, err := json.Marshal(s)
			if err != nil {
				return nil, err
			}
			return append(b, enc...), nil
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), nil
}
