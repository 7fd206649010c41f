package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// One reading of a message's keys. A check of ours reads a member with the
// scanner (Member: exact keys) or encoding/json; mcp-go, the handler's side,
// decodes the same bytes again with encoding/json, which matches a struct
// field's key without regard to case and keeps the last of repeated keys. Two
// readers with other rules can find two values in one message: a scope check
// read "name":"echo" while mcp-go ran "Name":"countdown". Decode refuses every
// message on which such readers could disagree, so that every reader, whatever
// its rules, finds the same value:
//
//  1. No object anywhere repeats a key (compared as decoded: escapes undone,
//     invalid UTF-8 replaced, as encoding/json does). RFC 8259 §4: "The names
//     within an object SHOULD be unique"; I-JSON (RFC 7493 §2.3) makes it a
//     MUST.
//  2. No object that the protocol defines has two keys equal ignoring case
//     (encoding/json's folding: Unicode simple folding, so U+212A KELVIN SIGN
//     equals "k"). The objects whose keys a tool or a user names (a tool's
//     arguments and structured content, an elicitation's content, schemas,
//     maps of ids) are exempt (openMember): their keys are data, read as map
//     keys, exactly.
//  3. In the objects whose members our checks read (the message, its params,
//     params._meta, params.task), no key may equal one of those members'
//     names ignoring case without being it: "Name" alone is read as the tool's
//     name by encoding/json and as nothing by an exact reader.
//
// A refused request is answered with -32602 and ReasonAmbiguousKey.

// openMember reports whether the value of member key, starting with first, is
// an object whose keys are data rather than the protocol's names.
func openMember(key []byte, first byte) bool {
	switch string(key) {
	case "arguments", "structuredContent", "data", "inputSchema", "outputSchema", "requestedSchema",
		"properties", "experimental", "inputRequests", "inputResponses":
		return true
	case "content": // an elicitation's answer; a tool result's content is an array
		return first == '{'
	}
	return false
}

// The names our checks read, by the object that holds them (rule 3).
var (
	rootNames = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	// paramsNames: the members a check, a dispatch or a handler decision of
	// ours reads in a request's or notification's params.
	paramsNames = []string{
		"name", "uri", "arguments", "_meta", "task", "taskId", "requestId", "resumeToken",
		"requestState", "inputResponses", "protocolVersion", "capabilities", "clientInfo",
		"after", "reason", "progressToken",
	}
	metaNames = []string{
		"progressToken", "traceparent", "tracestate", MetaKey, MetaAck, MetaSeq,
		MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo, MetaLogLevel,
		MetaSubscriptionID, MetaRelatedTask,
	}
	taskNames = []string{"ttl"}
)

// place is where an object sits in a message, which decides the rules its keys
// follow.
type place uint8

const (
	placeOpen     place = iota // rule 1: a tool's or a user's data
	placeProtocol              // rules 1 and 2
	placeRoot                  // rules 1 to 3, with rootNames
	placeParams                // ... with paramsNames
	placeMeta                  // ... with metaNames
	placeTask                  // ... with taskNames
)

func (p place) names() []string {
	switch p {
	case placeRoot:
		return rootNames
	case placeParams:
		return paramsNames
	case placeMeta:
		return metaNames
	case placeTask:
		return taskNames
	}
	return nil
}

// child is the place of the object that is member key's value (first: its
// first byte) in an object at p.
func (p place) child(key []byte, first byte) place {
	switch {
	case p == placeOpen || openMember(key, first):
		return placeOpen
	case p == placeRoot && string(key) == "params":
		return placeParams
	case p == placeParams && string(key) == "_meta":
		return placeMeta
	case p == placeParams && string(key) == "task":
		return placeTask
	}
	return placeProtocol
}

// linearKeys is how many keys of one object are compared pairwise; an object
// with more gets a set.
const linearKeys = 16

// keyWalker walks a valid JSON message and checks its keys. keys holds the
// keys of the objects open on its way down, each object's from its mark on;
// path, the members that lead to the object walked.
type keyWalker struct {
	b    []byte
	keys []key
	path []key
	err  *Error
}

// key is a key of b: b[start:end] between its quotes, or, when it has escapes
// or bytes beyond ASCII, as encoding/json decodes it (dec).
type key struct {
	start, end int
	dec        []byte
}

func (w *keyWalker) bytes(k key) []byte {
	if k.dec != nil {
		return k.dec
	}
	return w.b[k.start:k.end]
}

var walkers = sync.Pool{New: func() any { return &keyWalker{keys: make([]key, 0, 32), path: make([]key, 0, 8)} }}

// checkKeys returns the error that refuses b, a valid JSON message, when a
// reader could take one of its keys two ways (rules 1 to 3 above); nil when
// none could.
func checkKeys(b []byte) *Error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	w := walkers.Get().(*keyWalker)
	w.b = b
	w.object(i, placeRoot)
	err := w.err
	w.b, w.keys, w.path, w.err = nil, w.keys[:0], w.path[:0], nil
	walkers.Put(w)
	return err
}

// value walks the value at b[i] in place p (for its objects) and returns its end.
func (w *keyWalker) value(i int, p place) int {
	i = skipSpace(w.b, i)
	if i >= len(w.b) {
		return i
	}
	switch w.b[i] {
	case '{':
		return w.object(i, p)
	case '[':
		i = skipSpace(w.b, i+1)
		if i < len(w.b) && w.b[i] == ']' {
			return i + 1
		}
		for w.err == nil && i < len(w.b) {
			i = skipSpace(w.b, w.value(i, p))
			if i >= len(w.b) || w.b[i] != ',' {
				return i + 1 // ']'
			}
			i = skipSpace(w.b, i+1)
		}
		return len(w.b)
	case '"':
		if end, _, ok := skipString(w.b, i); ok {
			return end
		}
	case 't', 'n':
		return i + 4
	case 'f':
		return i + 5
	default:
		if end, ok := skipNumber(w.b, i); ok {
			return end
		}
	}
	return len(w.b) // not JSON (Decode never asks): the walk ends
}

// object walks the object at b[i] in place p and returns its end.
func (w *keyWalker) object(i int, p place) int {
	mark := len(w.keys)
	var set map[string]bool
	names := p.names()
	i = skipSpace(w.b, i+1)
	for w.err == nil && i < len(w.b) && w.b[i] == '"' {
		ke, esc, ok := skipString(w.b, i)
		if !ok {
			return len(w.b)
		}
		k := key{start: i + 1, end: ke - 1}
		if esc || !ascii(w.b[k.start:k.end]) {
			var s string
			_ = json.Unmarshal(w.b[i:ke], &s) // valid: undoes escapes, replaces invalid UTF-8
			k.dec = []byte(s)
		}
		kb := w.bytes(k)
		if w.repeated(kb, p == placeOpen, mark, &set) {
			w.refuse(kb, p, "")
			return len(w.b)
		}
		if p != placeOpen {
			if n := misspelled(kb, names); n != "" {
				w.refuse(kb, p, n)
				return len(w.b)
			}
		}
		w.keys = append(w.keys, k)
		i = skipSpace(w.b, ke)
		vs := skipSpace(w.b, i+1) // ':'
		var first byte
		if vs < len(w.b) {
			first = w.b[vs]
		}
		w.path = append(w.path, k)
		i = skipSpace(w.b, w.value(vs, p.child(kb, first)))
		w.path = w.path[:len(w.path)-1]
		if i >= len(w.b) || w.b[i] != ',' {
			break
		}
		i = skipSpace(w.b, i+1)
	}
	w.keys = w.keys[:mark]
	if w.err != nil || i >= len(w.b) {
		return len(w.b)
	}
	return i + 1 // '}'
}

// repeated reports whether the current object (its keys from mark on) has k
// already, exactly or (when !exact) ignoring case as encoding/json does. Past
// linearKeys keys it keeps them, folded where they are compared so, in *set.
func (w *keyWalker) repeated(k []byte, exact bool, mark int, set *map[string]bool) bool {
	as := func(k []byte) string {
		if exact {
			return string(k)
		}
		return string(appendFolded(nil, k))
	}
	if n := len(w.keys) - mark; n < linearKeys {
		for _, o := range w.keys[mark:] {
			if ob := w.bytes(o); exact && bytes.Equal(ob, k) || !exact && bytes.EqualFold(ob, k) {
				return true
			}
		}
		return false
	} else if *set == nil {
		*set = make(map[string]bool, 2*n)
		for _, o := range w.keys[mark:] {
			(*set)[as(w.bytes(o))] = true
		}
	}
	ks := as(k)
	if (*set)[ks] {
		return true
	}
	(*set)[ks] = true
	return false
}

// misspelled returns the name of names that k equals only ignoring case, or "".
func misspelled(k []byte, names []string) string {
	for _, n := range names {
		if string(k) == n {
			return ""
		}
	}
	for _, n := range names {
		if bytes.EqualFold(k, []byte(n)) {
			return n
		}
	}
	return ""
}

// refuse sets w.err for key k of the object at w.path, in place p: a key it
// has already (name == ""), or a misspelling of name.
func (w *keyWalker) refuse(k []byte, p place, name string) {
	where := "the message"
	if len(w.path) > 0 {
		parts := make([]string, len(w.path))
		for j, pk := range w.path {
			parts[j] = string(w.bytes(pk))
		}
		where = strings.Join(parts, ".")
	}
	var msg string
	switch {
	case name != "":
		msg = fmt.Sprintf("%s has the key %q, which decoders that ignore case read as %q and exact ones do not: spell it %q",
			where, truncateKey(k), name, name)
	case p == placeOpen:
		msg = fmt.Sprintf("%s has the key %q twice: decoders disagree on which one counts; send each key once", where, truncateKey(k))
	default:
		msg = fmt.Sprintf("%s has the key %q twice, counting keys equal ignoring case: decoders disagree on which one counts; send each key once",
			where, truncateKey(k))
	}
	w.err = NewError(CodeInvalidParams, ReasonAmbiguousKey, msg)
}

func truncateKey(k []byte) string {
	const max = 64
	if len(k) > max {
		return string(k[:max]) + "..."
	}
	return string(k)
}

// appendFolded appends k with encoding/json's case folding undone into one
// spelling: two keys equal ignoring case (as bytes.EqualFold says, which
// encoding/json matches) append the same bytes.
func appendFolded(b, k []byte) []byte {
	for i := 0; i < len(k); {
		c := k[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(k[i:])
		b = utf8.AppendRune(b, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return b
}
