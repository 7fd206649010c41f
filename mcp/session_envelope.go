package mcp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
)

// modernReq is what a request of the 2026-07-28 era declared in its envelope.
// Such a request stands alone: its client capabilities, info and log level are
// its own, never its connection's.
type modernReq struct {
	version string
	caps    spec.ClientCapabilities
	capsRaw json.RawMessage
}

// parseModern reads the envelope of a modern request. A malformed capabilities
// object is left to mcp-go, which answers -32602.
func parseModern(env spec.Envelope) *modernReq {
	mr := &modernReq{version: env.Version, capsRaw: env.Capabilities}
	if len(env.Capabilities) > 2 { // "{}" declares nothing
		_ = json.Unmarshal(env.Capabilities, &mr.caps)
	}
	return mr
}

// resumable reports whether the client declared SEP-975 for this request, and
// with the ack extension: as the extension, or as in the 2025 era under
// experimental (what a client that kept its 2025 capabilities object sends).
func (mr *modernReq) resumable() (on, ack bool) {
	raw, ok := mr.caps.Extensions[spec.ExtensionResumable]
	if !ok {
		raw, ok = mr.caps.Experimental[spec.CapabilityName]
	}
	if !ok || len(raw) == 0 || raw[0] != '{' {
		return false, false
	}
	var cc spec.ClientCapability
	if json.Unmarshal(raw, &cc) != nil {
		return false, false
	}
	return true, slices.Contains(cc.Extensions, spec.ExtensionAck)
}

// allows reports whether the client declared the capability an input request of
// method needs (MRTR: a server must not ask for what the client cannot give).
func (mr *modernReq) allows(method string) (json.RawMessage, bool) {
	switch method {
	case string(mcp.MethodElicitationCreate):
		return json.RawMessage(`{"elicitation":{}}`), mr.caps.Elicitation != nil
	case string(mcp.MethodSamplingCreateMessage):
		return json.RawMessage(`{"sampling":{}}`), mr.caps.Sampling != nil
	case string(mcp.MethodListRoots):
		return json.RawMessage(`{"roots":{}}`), mr.caps.Roots != nil
	}
	return nil, true
}

// discover adds the server's resumable requests extension to a server/discover
// result.
func (s *Server) discover(result any) any {
	add := func(r *mcp.DiscoverResult) {
		ext := withMember(r.Capabilities.Extensions, spec.ExtensionResumable, s.caps)
		if s.opts.tasksOffered() {
			ext[spec.ExtensionTasks] = tasksSettings // tasks/stream (SEP-2694) with them
		}
		r.Capabilities.Extensions = ext
	}
	return edited(result, add)
}

// tasksSettings is the server's settings of the tasks extension in
// server/discover: tasks/stream is served.
var tasksSettings = map[string]any{"stream": struct{}{}}

// newestFirst is spec.Versions as server/discover lists them.
var newestFirst = func() []string {
	v := slices.Clone(spec.Versions)
	slices.Reverse(v)
	return v
}()

// requestState is what a call waiting for input hands its client in an
// input_required result, for the client to echo on its retry: the call's
// request id, its resume token, and the name the request addressed (tool, prompt
// or resource). The token makes it unforgeable: a retry finds the waiting call
// only through the engine's token check, bound to the principal and limited like
// every token check.
type requestState struct {
	ID    spec.ID `json:"i"`
	Token string  `json:"t"`
	Name  string  `json:"n"`
}

// statePrefix marks a requestState as ours: a retry carrying another one belongs
// to a tool that answers input_required itself, and goes to it.
const statePrefix = "mr1."

func (rs *requestState) encode() string { return encodeRef(statePrefix, rs) }

// ourState returns the requestState of a retry, when it carries one of ours.
func ourState(params json.RawMessage) (string, bool) {
	if !bytes.Contains(params, []byte(statePrefix)) {
		return "", false
	}
	st := spec.StringMember(params, "requestState")
	return st, strings.HasPrefix(st, statePrefix)
}

func decodeState(s string) (*requestState, bool) { return decodeRef[requestState](statePrefix, s) }

// CheckHeaders checks the HTTP headers of a 2026-era request against its body,
// as Streamable HTTP asks of the server: MCP-Protocol-Version equal to the
// envelope's version, Mcp-Method to the method, Mcp-Name to the tool, prompt or
// resource it addresses, and each Mcp-Param-* header to the tool argument its
// input schema binds it to (x-mcp-header). lookup returns a header's value and
// whether it is present. It returns nil when they agree, or the error to answer
// (-32020 header mismatch, or -32022 for a version this server does not speak).
func (s *Server) CheckHeaders(m *spec.Message, lookup func(name string) (string, bool)) *spec.Error {
	get := func(name string) string { v, _ := lookup(name); return v }
	env := m.Envelope()
	hv := get(mcp.HeaderProtocolVersion)
	switch {
	case hv == "":
		return mismatch("missing MCP-Protocol-Version header")
	case !env.Modern():
		// A 2026 request without its envelope: invalid params, as for any
		// request missing a required _meta field.
		return spec.NewError(spec.CodeInvalidParams, spec.ReasonEraMismatch,
			"MCP-Protocol-Version is "+hv+" but params._meta[\""+spec.MetaProtocolVersion+"\"] is missing")
	case hv != env.Version:
		return mismatch("MCP-Protocol-Version " + hv + " does not match the body's protocol version " + env.Version)
	case !spec.IsModern(hv):
		return spec.UnsupportedVersion(hv)
	}
	switch hm := get(mcp.HeaderMethod); {
	case hm == "":
		return mismatch("missing Mcp-Method header")
	case hm != m.Method:
		return mismatch("Mcp-Method " + hm + " does not match the body's method " + m.Method)
	}
	if !spec.IsTaskMethod(m.Method) && !mcp.MethodRequiresNameHeader(mcp.MCPMethod(m.Method)) {
		return nil
	}
	name := m.Target()
	switch hn, ok := mcp.DecodeHeaderValue(get(mcp.HeaderName)); {
	case get(mcp.HeaderName) == "":
		return mismatch("missing Mcp-Name header for " + m.Method)
	case !ok:
		return mismatch("Mcp-Name is not valid Base64 in its =?base64?...?= form")
	case hn != name:
		return mismatch("Mcp-Name " + hn + " does not match the body's " + name)
	}
	if m.Method != string(mcp.MethodToolsCall) {
		return nil
	}
	t := s.srv.GetTool(name)
	if t == nil {
		return nil // mcp-go answers an unknown tool
	}
	if !s.headerBound(&t.Tool) {
		return nil
	}
	if err := mcp.ValidateParamHeadersLookup(lookup, &t.Tool, m.Params); err != nil {
		return mismatch(err.Error())
	}
	return nil
}

// schemaKey names one version of a tool's input schema: mcp-go hands out copies
// of a tool, whose schema shares its map or bytes with the registered one until
// the tool is added again.
type schemaKey struct {
	name       string
	props, raw unsafe.Pointer
}

// headerBound reports whether a tool's input schema binds any argument to an
// Mcp-Param-* header (x-mcp-header). Reading a schema for bindings re-encodes it,
// so the answer is kept per schema version.
func (s *Server) headerBound(t *mcp.Tool) bool {
	k := schemaKey{name: t.Name, props: reflect.ValueOf(t.InputSchema.Properties).UnsafePointer()}
	if len(t.RawInputSchema) > 0 {
		k.raw = unsafe.Pointer(&t.RawInputSchema[0])
	}
	if v, ok := s.headerTools.Load(k); ok {
		return v.(bool)
	}
	bound := len(mcp.ExtractParamHeaderBindings(t)) > 0
	s.headerTools.Store(k, bound)
	return bound
}

func mismatch(msg string) *spec.Error {
	return spec.NewError(spec.CodeHeaderMismatch, spec.ReasonHeaderMismatch, msg)
}

// sink is where the messages of request r, taken up as id with token on st
// (a resume, a call sent again with its key), go: st itself for a request of
// the 2025 era (mr nil); for one of the 2026 era a round of its own, through
// which a question the tool asks answers it input_required (MRTR).
func (mr *modernReq) sink(s *Server, st Stream, id spec.ID, token string, r resume.Handle) Stream {
	if mr == nil {
		return st
	}
	rs := requestState{ID: id, Token: token}
	rd := &round{st: st, id: id, orig: id, state: rs.encode()}
	rd.gatherOn(s, r)
	return rd
}
