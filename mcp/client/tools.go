package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/spec"
)

// ErrInvalidTool is matched (errors.Is) by the error of a call of a tool that
// ListTools left out: its x-mcp-header annotations break SEP-2243's
// constraints, so its arguments cannot be mirrored in headers.
var ErrInvalidTool = errors.New("client: tool with invalid x-mcp-header annotations")

// tools are the tools ListTools listed last, kept for the headers of their
// calls (guarded by Client.st).
type tools struct {
	valid    map[string]*mcpgo.Tool
	excluded map[string]error // why each tool left out was
}

// ListTools lists the server's tools, every page of them. In the 2026-07-28
// era over Streamable HTTP a tool whose x-mcp-header annotations break
// SEP-2243's constraints (not a primitive, empty, not a header token, not
// unique) is left out, and calls of it fail with ErrInvalidTool; the tools
// listed are kept, so that a call carries the Mcp-Param-* headers its tool's
// annotations name. Other transports carry no headers: there the annotations
// mean nothing, and every tool is listed.
//
// [2026-07-28 server/tools §x-mcp-header, SEP-2243] a client using Streamable
// HTTP rejects a tool definition with invalid x-mcp-header values, excluding
// it from the tools available without failing the others.
func (c *Client) ListTools(ctx context.Context) ([]mcpgo.Tool, error) {
	var all []mcpgo.Tool
	var cursor mcpgo.Cursor
	for pages := 0; ; pages++ {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		raw, err := c.Call(ctx, "tools/list", params, nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor mcpgo.Cursor      `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, &ProtocolError{Problem: "tools/list result: " + err.Error(), Raw: raw}
		}
		for _, tr := range page.Tools {
			t, err := decodeTool(tr)
			if err != nil {
				return nil, &ProtocolError{Problem: "tools/list result: " + err.Error(), Raw: tr}
			}
			all = append(all, t)
		}
		if page.NextCursor == "" || page.NextCursor == cursor || pages == maxPages {
			break
		}
		cursor = page.NextCursor
	}
	kept := tools{valid: map[string]*mcpgo.Tool{}, excluded: map[string]error{}}
	listed := all[:0]
	headers := c.era.modern && c.carriesHeaders()
	for i := range all {
		t := all[i]
		if headers {
			if err := mcpgo.ValidateParamHeaderAnnotations(&t); err != nil {
				kept.excluded[t.Name] = err
				continue
			}
		}
		kept.valid[t.Name] = &t
		listed = append(listed, t)
	}
	c.update(func(st *state) { st.server.tools = kept })
	return listed, nil
}

// carriesHeaders reports whether the client's connection carries HTTP
// headers of its requests (Streamable HTTP); while it has none, it takes the
// Dialer's last one for what the next will be.
func (c *Client) carriesHeaders() (headers bool) {
	c.update(func(st *state) { headers = st.conn.headers })
	return headers
}

// maxPages bounds the pages of one listing (a server whose cursors never end).
const maxPages = 1000

// decodeTool decodes a tool as tools/list lists it, with its input and output
// schemas as the server wrote them (RawInputSchema, RawOutputSchema): every
// keyword kept, in its order ($schema, $defs, $ref, composition,
// conditionals), none resolved.
//
// [2026-07-28 server/tools, SEP-2106] schemas are JSON Schema 2020-12;
// clients pass them on unchanged and do not dereference network $refs.
func decodeTool(raw json.RawMessage) (mcpgo.Tool, error) {
	var t mcpgo.Tool
	if err := json.Unmarshal(raw, &t); err != nil {
		return t, err
	}
	if in, found := member(raw, "inputSchema"); found && string(in) != "null" {
		t.InputSchema, t.RawInputSchema = mcpgo.ToolInputSchema{}, bytes.Clone(in)
	}
	if out, found := member(raw, "outputSchema"); found && string(out) != "null" {
		t.OutputSchema, t.RawOutputSchema = mcpgo.ToolOutputSchema{}, bytes.Clone(out)
	}
	return t, nil
}

// listedTool returns the tool a tools/call of params fields names, as
// ListTools listed it (nil when it did not); an error for one it left out.
func (c *Client) listedTool(fields map[string]json.RawMessage) (*mcpgo.Tool, error) {
	var name string
	_ = json.Unmarshal(fields["name"], &name)
	var tool *mcpgo.Tool
	var why error
	c.update(func(st *state) { tool, why = st.server.tools.valid[name], st.server.tools.excluded[name] })
	if why != nil {
		return nil, fmt.Errorf("client: tools/call %s: %w: %v", name, ErrInvalidTool, why)
	}
	return tool, nil
}

// paramHeaders returns the Mcp-Param-* headers of a tools/call of tool with
// params p, nil for none.
//
// [2026-07-28 server/tools §x-mcp-header] the client mirrors each annotated
// argument into Mcp-Param-<name>: a string as it is, unless it is not plain
// printable ASCII or has leading or trailing whitespace (then
// =?base64?...?=), an integer in decimal, a boolean as true or false; a null
// or absent argument gets no header.
func paramHeaders(tool *mcpgo.Tool, p json.RawMessage) http.Header {
	params := mcpgo.GenerateParamHeaders(tool, p)
	if len(params) == 0 {
		return nil
	}
	h := make(http.Header, len(params))
	for k, v := range params {
		h.Set(k, v)
	}
	return h
}

// fulfil answers a server's input requests (MRTR, or a task's) of op's with
// its handlers (respond), all at once, and returns the answers by their keys.
func (c *Client) fulfil(ctx context.Context, op *operation, in spec.InputRequired) (map[string]json.RawMessage, error) {
	if len(in.InputRequests) == 0 {
		return nil, errors.New("the server answered input_required without an input request")
	}
	// The handlers end with the call, or with Close.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	type answer struct {
		key string
		res json.RawMessage
		err error
	}
	out := make(chan answer, len(in.InputRequests))
	for key, q := range in.InputRequests {
		go func() {
			res, e := c.respond(ctx, op, q.Method, q.Params)
			a := answer{key: key, res: res}
			if e != nil {
				a.err = fmt.Errorf("input request %q (%s): %w", key, q.Method, e)
			}
			out <- a
		}()
	}
	answers := make(map[string]json.RawMessage, len(in.InputRequests))
	var first error
	for range in.InputRequests {
		a := <-out
		if a.err != nil && first == nil {
			first = a.err
			cancel()
		}
		answers[a.key] = a.res
	}
	return answers, first
}

// member is the raw value of obj's member key: spec.Member's, or
// encoding/json's where the scanner cannot answer.
func member(obj []byte, key string) (json.RawMessage, bool) {
	if v, found, ok := spec.Member(obj, key); ok {
		return v, found
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil, false
	}
	v, found := m[key]
	return v, found
}
