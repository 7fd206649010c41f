package spec

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// StampSeq returns obj, a JSON object, with `_meta["io.mcp-resume/seq"] = seq` set.
// An existing `_meta` object keeps its other keys. A value that is not an object is
// returned unchanged (there is nowhere to put the number).
func StampSeq(obj json.RawMessage, seq uint64) json.RawMessage {
	return stampMeta(obj, MetaSeq, strconv.AppendUint(nil, seq, 10))
}

func stampMeta(obj json.RawMessage, key string, val []byte) json.RawMessage {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' {
		return obj
	}
	entry := append([]byte(`"`+key+`":`), val...)
	// Fast path: no "_meta" text anywhere, in any case, and no escapes that could
	// spell it, so insert a fresh object first.
	if !containsFold(obj, `_meta"`) && !bytes.Contains(obj, []byte(`\u`)) {
		out := make([]byte, 0, len(obj)+len(entry)+12)
		out = append(out, `{"_meta":{`...)
		out = append(out, entry...)
		out = append(out, '}')
		if rest := bytes.TrimSpace(obj[1:]); len(rest) > 0 && rest[0] != '}' {
			out = append(out, ',')
		}
		return append(out, obj[1:]...)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil {
		return obj
	}
	meta := map[string]json.RawMessage{}
	if m, ok := fields["_meta"]; ok {
		if err := json.Unmarshal(m, &meta); err != nil || meta == nil {
			meta = map[string]json.RawMessage{}
		}
	}
	meta[key] = val
	fields["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(fields)
	if err != nil {
		return obj
	}
	return out
}

// ReadSeq returns the sequence number stamped in obj's `_meta`, or 0.
// Keys match exactly, as JSON keys do (encoding/json's struct decoding would also
// take "_META").
func ReadSeq(obj json.RawMessage) uint64 {
	var fields, meta map[string]json.RawMessage
	if json.Unmarshal(obj, &fields) != nil || json.Unmarshal(fields["_meta"], &meta) != nil {
		return 0
	}
	var seq uint64
	if json.Unmarshal(meta[MetaSeq], &seq) != nil {
		return 0
	}
	return seq
}

// containsFold reports whether s contains the ASCII string sub in any case, without
// allocating.
func containsFold(s []byte, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if bytes.EqualFold(s[i:i+len(sub)], []byte(sub)) {
			return true
		}
	}
	return false
}
