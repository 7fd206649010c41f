package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Rule says what of a call's arguments its event carries.
type Rule string

const (
	// RuleHash: the SHA-256, in hex, of the arguments' canonical JSON (object
	// keys sorted, no insignificant space, numbers as sent): equal arguments
	// hash alike, whatever their order and spacing.
	RuleHash Rule = "hash"
	// RuleRedact: the arguments' keys, each value replaced by "[redacted]"
	// (arguments that are not an object: "[redacted]").
	RuleRedact Rule = "redact"
	// RuleKeep: the arguments as sent.
	RuleKeep Rule = "keep"
)

// redacted replaces a value under RuleRedact.
const redacted = `"[redacted]"`

// Rules maps a tool's name to its Rule. A tool it does not name, and every
// tool of a nil Rules, gets none: its arguments are not in its events.
type Rules map[string]Rule

// NewRules returns the rules of m, tool name to rule name: the one place a
// rule is checked, whether it came from a flag (ParseRules) or a file.
func NewRules(m map[string]string) (Rules, error) {
	if len(m) == 0 {
		return nil, nil
	}
	rs := make(Rules, len(m))
	for tool, name := range m {
		if tool == "" {
			return nil, fmt.Errorf("audit arguments: a rule for no tool (%q)", name)
		}
		switch r := Rule(name); r {
		case RuleHash, RuleRedact, RuleKeep:
			rs[tool] = r
		default:
			return nil, fmt.Errorf("audit arguments: tool %q: rule %q: want hash, redact or keep", tool, name)
		}
	}
	return rs, nil
}

// ParseRules reads "name=rule,name=rule" (the --audit-arguments flag) into the
// map NewRules takes. A tool named twice is an error.
func ParseRules(text string) (map[string]string, error) {
	m := map[string]string{}
	for entry := range strings.SplitSeq(text, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		tool, rule, ok := strings.Cut(entry, "=")
		tool, rule = strings.TrimSpace(tool), strings.TrimSpace(rule)
		if !ok || tool == "" {
			return nil, fmt.Errorf("audit arguments: %q: want name=hash|redact|keep", entry)
		}
		if _, dup := m[tool]; dup {
			return nil, fmt.Errorf("audit arguments: tool %q named twice", tool)
		}
		m[tool] = rule
	}
	return m, nil
}

// String is the rules as ParseRules reads them, sorted by tool.
func (rs Rules) String() string {
	tools := make([]string, 0, len(rs))
	for t := range rs {
		tools = append(tools, t)
	}
	sort.Strings(tools)
	var b strings.Builder
	for i, t := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t + "=" + string(rs[t]))
	}
	return b.String()
}

// Apply sets ev's ArgumentsSHA256 or Arguments from args, the arguments of a
// call of tool as sent (raw JSON; empty for none), by tool's rule; nothing
// without one. Arguments that are not valid JSON are hashed as they are, and
// are never kept or redacted.
func (rs Rules) Apply(tool string, args json.RawMessage, ev *Event) {
	if r, ok := rs[tool]; ok {
		r.Apply(args, ev)
	}
}

// Apply sets ev's arguments by r from args, the arguments of a call as sent
// (raw JSON; empty for none); nothing when r is "".
func (r Rule) Apply(args json.RawMessage, ev *Event) {
	if r == "" {
		return
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}") // none sent: mcp-go calls the tool with none
	}
	if r == RuleHash {
		ev.ArgumentsSHA256 = hashArguments(args)
		return
	}
	v, valid := decodeArguments(args)
	switch {
	case !valid:
		ev.Arguments = json.RawMessage(redacted)
	case r == RuleRedact:
		ev.Arguments = redact(v)
	default:
		var b bytes.Buffer
		_ = json.Compact(&b, args) // one line, whatever the client's spacing
		ev.Arguments = b.Bytes()
	}
}

// decodeArguments decodes args, numbers as sent (1e400 and 9007199254740993
// stay themselves), and reports whether they were one JSON value.
func decodeArguments(args []byte) (any, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	valid := dec.Decode(&v) == nil && !dec.More()
	return v, valid
}

// hashArguments is RuleHash's hex SHA-256 of args: of their canonical JSON,
// or of args as they are when they are not JSON. Arguments already in
// canonical form (a client's encoder writes most so) are hashed as they
// are, without being decoded (isCanonical).
func hashArguments(args []byte) string {
	canon := args
	if !isCanonical(args) {
		if v, valid := decodeArguments(args); valid {
			canon = canonical(v)
		}
	}
	sum := sha256.Sum256(canon)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// canonical is v's JSON with object keys sorted (encoding/json sorts a map's),
// no space, numbers as sent and no HTML escaping.
func canonical(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// redact is v's keys, each value "[redacted]"; "[redacted]" for v no object.
func redact(v any) json.RawMessage {
	obj, ok := v.(map[string]any)
	if !ok {
		return json.RawMessage(redacted)
	}
	out := make(map[string]json.RawMessage, len(obj))
	for k := range obj {
		out[k] = json.RawMessage(redacted)
	}
	b, _ := json.Marshal(out)
	return b
}
