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
	if canPrepend(obj) {
		return appendStamped(make([]byte, 0, len(obj)+len(key)+len(val)+16), obj, key, val)
	}
	if out, ok := insertMeta(obj, key, val); ok {
		return out
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

// insertMeta returns obj with key:val put first in the object that is its
// _meta member, found by the scanner without decoding: ok is false when the
// scanner cannot say what encoding/json would (see Member), when _meta is not
// an object, or when it has key already.
func insertMeta(obj []byte, key string, val []byte) ([]byte, bool) {
	start, end, found, ok := memberAt(obj, "_meta")
	if !ok || !found || obj[start] != '{' {
		return nil, false
	}
	if _, has, ok := Member(obj[start:end], key); !ok || has {
		return nil, false
	}
	b := make([]byte, 0, len(obj)+len(key)+len(val)+4)
	b = append(b, obj[:start+1]...)
	b = append(b, '"')
	b = append(b, key...)
	b = append(b, `":`...)
	b = append(b, val...)
	if obj[skipSpace(obj, start+1)] != '}' {
		b = append(b, ',')
	}
	return append(b, obj[start+1:]...), true
}

// canPrepend reports whether obj (a JSON object) has no "_meta" text anywhere, in
// any case, and no escape that could spell it: then a fresh `_meta` can go first.
func canPrepend(obj []byte) bool {
	return !containsFold(obj, `_meta"`) && !bytes.Contains(obj, []byte(`\u`))
}

// appendStamped appends obj with `"_meta":{key:val}` inserted first; obj must pass
// canPrepend.
func appendStamped(b, obj []byte, key string, val []byte) []byte {
	b = append(b, `{"_meta":{"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	b = append(b, val...)
	b = append(b, '}')
	if rest := bytes.TrimSpace(obj[1:]); len(rest) > 0 && rest[0] != '}' {
		b = append(b, ',')
	}
	return append(b, obj[1:]...)
}

// seqRoom is the most appendWithSeq adds to an object for seq, so that builders
// allocate once: `"_meta":{"<MetaSeq>":<seq's digits>},`.
func seqRoom(seq uint64) int {
	if seq == 0 {
		return 0
	}
	digits := 1
	for n := seq; n >= 10; n /= 10 {
		digits++
	}
	return len(`"_meta":{"":},`) + len(MetaSeq) + digits
}

// appendWithSeq appends obj with its sequence number stamped, without an
// intermediate copy when it can.
func appendWithSeq(b []byte, obj json.RawMessage, seq uint64) []byte {
	if seq == 0 {
		return appendRaw(b, obj)
	}
	if t := bytes.TrimSpace(obj); len(t) >= 2 && t[0] == '{' && canPrepend(t) {
		var num [20]byte
		return appendStamped(b, t, MetaSeq, strconv.AppendUint(num[:0], seq, 10))
	}
	return appendRaw(b, StampSeq(obj, seq))
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

// containsFold reports whether s contains sub, an ASCII string that starts with a
// byte no other character folds to (such as '_'), in any case, without allocating.
// Only windows starting with that byte can match, so it looks for those first.
func containsFold(s []byte, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := bytes.IndexByte(s[i:len(s)-len(sub)+1], sub[0])
		if j < 0 {
			return false
		}
		i += j
		if bytes.EqualFold(s[i:i+len(sub)], []byte(sub)) {
			return true
		}
	}
	return false
}

// WithRelatedTask returns msg, a JSON-RPC request or notification, with
// params._meta["io.modelcontextprotocol/related-task"] = {"taskId": task}
// (2025-11-25: the task the message belongs to). A message it cannot read, or
// whose params are not an object, is returned unchanged.
func WithRelatedTask(msg []byte, task string) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(msg, &fields) != nil {
		return msg
	}
	params, ok := fields["params"]
	if !ok {
		params = json.RawMessage("{}")
	}
	ref, _ := json.Marshal(map[string]string{"taskId": task})
	stamped := stampMeta(params, MetaRelatedTask, ref)
	if bytes.Equal(stamped, bytes.TrimSpace(params)) {
		return msg
	}
	fields["params"] = stamped
	out, err := json.Marshal(fields)
	if err != nil {
		return msg
	}
	return out
}
