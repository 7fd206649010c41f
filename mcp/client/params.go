package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-resume/mcp-resume/spec"
)

// A request's params as the client writes them: the caller's members as they
// are, with a _meta of the client's (progress token, call key, trace context,
// the 2026-07-28 envelope) merged into the caller's. Every request goes this
// way, so it writes the object itself rather than through maps and
// reflection.

// paramFields decodes params, which must encode as a JSON object or be nil,
// into its members; nil for nil params. A map of raw members is taken as it
// is (each member must be JSON), and never changed by the client.
func paramFields(params any) (map[string]json.RawMessage, error) {
	switch p := params.(type) {
	case nil:
		return nil, nil
	case map[string]json.RawMessage:
		for k, v := range p {
			if !json.Valid(v) {
				return nil, fmt.Errorf("member %q is not JSON", k)
			}
		}
		return p, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	fields := map[string]json.RawMessage{}
	if string(b) != "null" {
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, fmt.Errorf("must be a JSON object: %w", err)
		}
	}
	return fields, nil
}

// encodeParams encodes a request's params (fields, nil for none), adding to
// its _meta the progress token (the call's id) when progress is wanted, the
// call's key when it has one, the trace context of its span when it is
// traced, and envelope's members (the 2026-07-28 envelope; nil for none).
// fields' _meta is replaced in what it writes, its other members kept; fields
// is not changed. Members are written in key order, as they are.
func encodeParams(fields map[string]json.RawMessage, cl *call, progress bool, envelope map[string]json.RawMessage) (json.RawMessage, error) {
	traced := cl.traceparent != ""
	withMeta := progress || cl.callKey != "" || traced || envelope != nil
	if fields == nil && !withMeta {
		return nil, nil
	}
	var outBuf [8]pair
	out := pairs(outBuf[:0])
	var given json.RawMessage // the caller's _meta
	for k, v := range fields {
		if k == "_meta" && withMeta {
			given = v
			continue
		}
		out = append(out, pair{k, v})
	}
	if withMeta {
		var metaBuf [12]pair
		meta := pairs(metaBuf[:0])
		if given != nil {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(given, &m); err != nil {
				return nil, fmt.Errorf("_meta must be an object: %w", err)
			}
			for k, v := range m {
				meta = append(meta, pair{k, v})
			}
		}
		for k, v := range envelope {
			meta = meta.with(k, v)
		}
		if progress {
			meta = meta.with("progressToken", json.RawMessage(cl.id))
		}
		if cl.callKey != "" {
			meta = meta.with(spec.MetaKey, quote(cl.callKey))
		}
		if traced {
			meta = meta.with("traceparent", quote(cl.traceparent))
			if cl.tracestate != "" {
				meta = meta.with("tracestate", quote(cl.tracestate))
			} else {
				meta = meta.without("tracestate") // the caller's, of another span
			}
		}
		out = append(out, pair{"_meta", meta.appendTo(make([]byte, 0, meta.size()))})
	}
	return out.appendTo(make([]byte, 0, out.size())), nil
}

// pair is one member of a JSON object being written: its key and its value,
// JSON.
type pair struct {
	key string
	val json.RawMessage
}

// pairs are the members of a JSON object being written.
type pairs []pair

// with returns ms with key's member set to v, in place of any it had.
func (ms pairs) with(key string, v json.RawMessage) pairs {
	for i := range ms {
		if ms[i].key == key {
			ms[i].val = v
			return ms
		}
	}
	return append(ms, pair{key, v})
}

// without returns ms without key's member.
func (ms pairs) without(key string) pairs {
	return slices.DeleteFunc(ms, func(m pair) bool { return m.key == key })
}

// size is about how many bytes the object takes.
func (ms pairs) size() int {
	n := 2
	for _, m := range ms {
		n += len(m.key) + len(m.val) + 4
	}
	return n
}

// appendTo appends the object, its members in key order, to b.
func (ms pairs) appendTo(b []byte) []byte {
	slices.SortFunc(ms, func(x, y pair) int { return strings.Compare(x.key, y.key) })
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = spec.AppendString(b, m.key)
		b = append(b, ':')
		b = append(b, m.val...)
	}
	return append(b, '}')
}

// quote is s as a JSON string.
func quote(s string) json.RawMessage { return spec.AppendString(nil, s) }

// errNotJSON: an Envelope's capabilities that are not JSON.
var errNotJSON = errors.New("client: Envelope.Capabilities is not JSON")
