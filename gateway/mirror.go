package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	resumemcp "github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
)

// newServer is the mcp-go server the gateway's clients see: the upstream's name,
// version, instructions and capabilities (list changes always, since the gateway
// follows the upstream's). Before the upstream answered (init nil: a gateway
// started in the background), every capability, and Options.Name.
func (g *Gateway) newServer(init *mcpgo.InitializeResult) *server.MCPServer {
	if init == nil {
		init = everything(g.opts.Name)
	}
	c := init.Capabilities
	opts := []server.ServerOption{server.WithToolCapabilities(true)}
	if c.Resources != nil {
		opts = append(opts, server.WithResourceCapabilities(c.Resources.Subscribe, true))
	}
	opts = append(opts, server.WithHooks(g.hooks()))
	if c.Prompts != nil {
		opts = append(opts, server.WithPromptCapabilities(true))
	}
	if c.Logging != nil {
		opts = append(opts, server.WithLogging())
	}
	if c.Completions != nil {
		opts = append(opts, server.WithCompletions(),
			server.WithPromptCompletionProvider(completer{g}), server.WithResourceCompletionProvider(completer{g}))
	}
	if init.Instructions != "" {
		opts = append(opts, server.WithInstructions(init.Instructions))
	}
	name := init.ServerInfo.Name
	if name == "" {
		name = "upstream"
	}
	return server.NewMCPServer(name, init.ServerInfo.Version, opts...)
}

// everything is what a server of every capability would say it is, named
// name: what a gateway serves before its upstream answered, and an
// Aggregate always.
func everything(name string) *mcpgo.InitializeResult {
	init := &mcpgo.InitializeResult{ServerInfo: mcpgo.Implementation{Name: name}}
	_ = json.Unmarshal([]byte(`{"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"logging":{},"completions":{}}`), &init.Capabilities)
	return init
}

// maxPages bounds the pages of one list the gateway reads.
const maxPages = 1000

// listAll reads every page of a list method; field names the items.
func (g *Gateway) listAll(ctx context.Context, method, field string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	cursor := ""
	for range maxPages {
		params := map[string]string{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := g.client().Call(ctx, method, params, nil)
		if err != nil {
			return nil, fmt.Errorf("gateway: %s: %w", method, err)
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("gateway: %s: %w", method, err)
		}
		var items []json.RawMessage
		if v := page[field]; len(v) > 0 {
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, fmt.Errorf("gateway: %s: %w", method, err)
			}
		}
		out = append(out, items...)
		cursor = ""
		if v := page["nextCursor"]; len(v) > 0 {
			_ = json.Unmarshal(v, &cursor)
		}
		if cursor == "" {
			return out, nil
		}
	}
	return out, nil
}

// mirror lists the upstream's tools, resources, resource templates and prompts
// and serves them as they are, each through a handler that asks the upstream.
func (g *Gateway) mirror(ctx context.Context) error {
	init := g.link.Load().init
	changed := false
	// What the gateway serves of its upstream (Served) changes once, when
	// every list was read: an Aggregate never takes the new tools with the
	// old resources.
	next := g.Served()
	defer func() {
		if !changed {
			return
		}
		g.mu.Lock()
		g.served = next
		g.mu.Unlock()
		if g.opts.OnMirrored != nil {
			g.opts.OnMirrored()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, g.opts.ConnectTimeout)
	defer cancel()
	if init.Capabilities.Resources != nil {
		if err := g.mirrorList(ctx, "resources/list", "resources", &changed, func(raws []json.RawMessage) {
			rs := decodeAll(g, raws, "resource", func(r mcpgo.Resource) server.ServerResource {
				return server.ServerResource{Resource: r, Handler: g.readResource}
			})
			next.Resources = rs
			g.srv.SetResources(rs...)
		}); err != nil {
			return err
		}
		if err := g.mirrorList(ctx, "resources/templates/list", "resourceTemplates", &changed, func(raws []json.RawMessage) {
			ts := decodeAll(g, raws, "resource template", func(t mcpgo.ResourceTemplate) server.ServerResourceTemplate {
				return server.ServerResourceTemplate{Template: t, Handler: g.readResource}
			})
			next.Templates = ts
			g.srv.SetResourceTemplates(ts...)
		}); err != nil {
			return err
		}
	}
	if init.Capabilities.Prompts != nil {
		if err := g.mirrorList(ctx, "prompts/list", "prompts", &changed, func(raws []json.RawMessage) {
			ps := decodeAll(g, raws, "prompt", func(pr mcpgo.Prompt) server.ServerPrompt {
				return server.ServerPrompt{Prompt: pr, Handler: g.getPrompt}
			})
			next.Prompts = ps
			g.srv.SetPrompts(ps...)
		}); err != nil {
			return err
		}
	}
	// The tools last: a client that sees the upstream's tools finds its
	// resources and prompts too.
	if err := g.mirrorList(ctx, "tools/list", "tools", &changed, func(raws []json.RawMessage) {
		// Tools the gateway did not mirror are its own (the core's await
		// tool): an upstream tool of the same name never replaces one. A
		// deferred answer tells its client to call the await tool with a
		// handle that holds the call's token: served by the upstream's tool,
		// the handle would go upstream, and the call's result never come.
		// The upstream's tool is left out instead (said in the log).
		g.mu.Lock()
		mirrored := g.mirrored
		g.mu.Unlock()
		own := map[string]bool{}
		for name := range g.srv.ListTools() {
			if !mirrored[name] {
				own[name] = true
			}
		}
		tools := make([]server.ServerTool, 0, len(raws))
		support := map[string]mcpgo.TaskSupport{}
		tasks := init.Capabilities.Tasks != nil
		names := make(map[string]bool, len(raws))
		for _, raw := range raws {
			t, err := decodeTool(raw)
			if err != nil {
				g.log.Warn().Err(err).Msg("an upstream tool is skipped")
				continue
			}
			if own[t.Name] {
				g.log.Warn().Str("tool", t.Name).Msg("an upstream tool is skipped: the gateway serves a tool of that name itself (the await tool, which deferred answers name); rename it upstream to serve it")
				continue
			}
			names[t.Name] = true
			if t.Execution != nil && t.Execution.TaskSupport != "" {
				support[t.Name] = t.Execution.TaskSupport
				tasks = true
			}
			// What the gateway's clients see of it is the core's to say (from
			// its policy, which TaskSupport feeds); mcp-go would refuse a call
			// of a required one that carries no params.task, a 2026 client's.
			t.Execution = nil
			tools = append(tools, server.ServerTool{Tool: t, Handler: g.callTool})
		}
		g.mu.Lock()
		g.taskSupport = nil
		if tasks {
			g.taskSupport = support
		}
		g.mirrored = names
		next.Tools = slices.Clone(tools)
		g.mu.Unlock()
		// By changes alone: the core adds its own tools to the server as it
		// is made, which may be while the gateway mirrors (a gateway started
		// in the background).
		var gone []string
		for name := range mirrored {
			if !names[name] {
				gone = append(gone, name)
			}
		}
		if len(gone) > 0 {
			g.srv.DeleteTools(gone...)
		}
		if len(tools) > 0 {
			g.srv.AddTools(tools...)
		}
	}); err != nil {
		return err
	}
	return nil
}

// mirrorList reads a list and, when it is not what it was when last mirrored,
// serves it with set: the gateway's clients hear of a list change only when
// there is one (an upstream may say its lists changed when they did not,
// several times while it starts).
func (g *Gateway) mirrorList(ctx context.Context, method, field string, changed *bool, set func([]json.RawMessage)) error {
	raws, err := g.listAll(ctx, method, field)
	if err != nil {
		return err
	}
	h := sha256.New()
	for _, raw := range raws {
		h.Write(raw)
		h.Write([]byte{0})
	}
	sum := string(h.Sum(nil))
	g.mu.Lock()
	same := g.lists[method] == sum
	g.lists[method] = sum
	g.mu.Unlock()
	if !same {
		set(raws)
		*changed = true
	}
	return nil
}

// decodeAll decodes the items of a list, skipping (and logging) those that do
// not decode.
func decodeAll[T, S any](g *Gateway, raws []json.RawMessage, what string, serve func(T) S) []S {
	out := make([]S, 0, len(raws))
	for _, raw := range raws {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			g.log.Warn().Err(err).Msgf("an upstream %s is skipped", what)
			continue
		}
		out = append(out, serve(v))
	}
	return out
}

// decodeTool is an upstream tool as mcp-go serves it, its schemas as they came.
func decodeTool(raw json.RawMessage) (mcpgo.Tool, error) {
	var t mcpgo.Tool
	if err := json.Unmarshal(raw, &t); err != nil {
		return t, err
	}
	var schemas struct {
		In  json.RawMessage `json:"inputSchema"`
		Out json.RawMessage `json:"outputSchema"`
	}
	if err := json.Unmarshal(raw, &schemas); err != nil {
		return t, err
	}
	if t.Name == "" {
		return t, fmt.Errorf("gateway: a tool without a name: %s", raw)
	}
	t.InputSchema = mcpgo.ToolInputSchema{}
	t.RawInputSchema = schemas.In
	if len(schemas.In) == 0 {
		t.RawInputSchema = json.RawMessage(`{"type":"object"}`)
	}
	t.OutputSchema = mcpgo.ToolOutputSchema{}
	t.RawOutputSchema = nil
	if len(schemas.Out) > 0 {
		t.RawOutputSchema = schemas.Out
	}
	// mcp-go's server panics on a tool whose x-mcp-header annotations are
	// wrong: one upstream's bad tool must not take the gateway down.
	if err := mcpgo.ValidateParamHeaderAnnotations(&t); err != nil {
		return t, fmt.Errorf("gateway: tool %s: %w", t.Name, err)
	}
	return t, nil
}

func (g *Gateway) readResource(ctx context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
	raw, err := g.request(ctx, "resources/read", map[string]any{"uri": req.Params.URI})
	if err != nil {
		return nil, err
	}
	res, err := mcpgo.ParseReadResourceResult(&raw)
	if err != nil {
		return nil, err
	}
	return res.Contents, nil
}

// getPrompt asks the upstream for a prompt; an upstream of the 2026-07-28 era
// is asked in that era, and its questions (an input_required answer) are
// passed to the client, or asked here, as a tool call's are (callTool).
func (g *Gateway) getPrompt(ctx context.Context, req mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
	var args any
	if req.Params.Arguments != nil {
		args = req.Params.Arguments
	}
	params, err := callParams(req.Params.Name, args, req.Params.MultiRoundTripParams)
	if err != nil {
		return nil, err
	}
	r := &relay{ctx: ctx, g: g, tool: req.Params.Name}
	up := g.client()
	if up == nil {
		return nil, upstreamErr(errNotYet)
	}
	raw, err := up.Call(ctx, spec.MethodPromptsGet, params, &client.CallOptions{
		OnRequest:           r.ask,
		ReturnInputRequired: func() bool { return resumemcp.TakesInputRequired(ctx) },
		Envelope:            g.envelope(ctx, req.Params.Meta),
	})
	if err != nil {
		return nil, upstreamErr(err)
	}
	res, err := mcpgo.ParseGetPromptResult(&raw)
	if err != nil {
		return nil, err
	}
	if res.ResultType == mcpgo.ResultTypeInputRequired && res.RequestState != "" {
		res.RequestState = clientState(res.RequestState)
	}
	res.Meta = ownMeta(res.Meta)
	return res, nil
}

// completer passes completion/complete on to the upstream.
type completer struct{ g *Gateway }

func (c completer) CompletePromptArgument(ctx context.Context, name string, arg mcpgo.CompleteArgument, cc mcpgo.CompleteContext) (*mcpgo.Completion, error) {
	return c.complete(ctx, map[string]any{"type": "ref/prompt", "name": name}, arg, cc)
}

func (c completer) CompleteResourceArgument(ctx context.Context, uri string, arg mcpgo.CompleteArgument, cc mcpgo.CompleteContext) (*mcpgo.Completion, error) {
	return c.complete(ctx, map[string]any{"type": "ref/resource", "uri": uri}, arg, cc)
}

func (c completer) complete(ctx context.Context, ref map[string]any, arg mcpgo.CompleteArgument, cc mcpgo.CompleteContext) (*mcpgo.Completion, error) {
	params := map[string]any{"ref": ref, "argument": arg}
	if len(cc.Arguments) > 0 {
		params["context"] = cc
	}
	raw, err := c.g.request(ctx, "completion/complete", params)
	if err != nil {
		return nil, err
	}
	var res struct {
		Completion mcpgo.Completion `json:"completion"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	return &res.Completion, nil
}
