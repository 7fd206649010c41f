package client

import (
	"encoding/json"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// withDefaults fills in an accepted elicitation's content: each field of the
// requested schema that the answer left out and for which the schema names a
// default gets that default, as a form shows it before the user changes
// anything. A content that is not an object is left as it is.
//
// [2025-11-25 client/elicitation, SEP-1034] primitive fields of the requested
// schema may carry a default; "clients that support defaults SHOULD
// pre-populate form fields with these values".
func withDefaults(schema any, res *mcpgo.ElicitationResult) {
	if res.Action != mcpgo.ElicitationResponseActionAccept || schema == nil {
		return
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return
	}
	var s struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if json.Unmarshal(b, &s) != nil {
		return
	}
	content := map[string]json.RawMessage{}
	if res.Content != nil {
		b, err := json.Marshal(res.Content)
		if err != nil || json.Unmarshal(b, &content) != nil || content == nil {
			return // not an object: the handler's answer goes as it is
		}
	}
	added := false
	for name, p := range s.Properties {
		if _, set := content[name]; set || len(p.Default) == 0 {
			continue
		}
		content[name] = p.Default
		added = true
	}
	if added {
		res.Content = content
	}
}
