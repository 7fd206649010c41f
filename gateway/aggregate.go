package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	resumemcp "github.com/mcp-resume/mcp-resume/mcp"
)

// Served is what a gateway serves of its upstream, as last mirrored: its
// tools, resources, resource templates and prompts, each with the handler that
// asks the upstream (the gateway's own tools, the core's await tool, aside).
type Served struct {
	Tools     []server.ServerTool
	Resources []server.ServerResource
	Templates []server.ServerResourceTemplate
	Prompts   []server.ServerPrompt
}

// Served is what g serves of its upstream now.
func (g *Gateway) Served() Served {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.served
}

// Conflict is how an Aggregate names its upstreams' tools and prompts.
type Conflict string

const (
	// PrefixAlways names every tool and prompt NAME__tool, NAME its
	// upstream's name: a name never changes when another upstream adds one.
	PrefixAlways Conflict = "prefix"
	// PrefixOnConflict keeps a name as its upstream says it, unless two
	// upstreams offer it: then each is NAME__tool.
	PrefixOnConflict Conflict = "conflict"
	// Priority keeps every name as its upstream says it; of two upstreams
	// that offer one, the first (in the order given) keeps it and the others'
	// are NAME__tool.
	Priority Conflict = "priority"
)

// Separator joins an upstream's name and its tool's or prompt's name.
const Separator = "__"

// MaxName is the longest name an Aggregate gives a tool or prompt: the tool
// name rules of both eras allow 128 of [A-Za-z0-9_.-], and the model APIs
// clients hand tools to allow 64 of [A-Za-z0-9_-]. A longer name keeps its
// first 55 bytes and ends with "-" and 8 hex digits of its SHA-256.
const MaxName = 64

// upstreamName is what an upstream's name may be: it starts a tool's name, so
// it holds no separator, and it names directories and JetStream streams, so
// it is in lower case (file systems that do not tell case apart).
var upstreamName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// CheckName says why name cannot name an upstream, or nil.
func CheckName(name string) error {
	if !upstreamName.MatchString(name) {
		return fmt.Errorf("upstream name %q: want 1 to 32 of a-z 0-9 - (it starts its tools' names, NAME__tool)", name)
	}
	return nil
}

// Exposed is the name an Aggregate gives tool of upstream when it prefixes
// it: NAME__tool, shortened to MaxName.
func Exposed(upstream, tool string) string {
	name := upstream + Separator + tool
	if len(name) <= MaxName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:MaxName-9] + "-" + hex.EncodeToString(sum[:4])
}

// AggregateOptions configure an Aggregate.
type AggregateOptions struct {
	// Name and Version are the aggregate server's, in its initialize result.
	Name, Version string
	// Conflict is how tools and prompts are named; default PrefixAlways.
	Conflict Conflict
	Logger   *zerolog.Logger
}

// Aggregate serves several gateways' upstreams as one server: every
// upstream's tools and prompts under names Conflict gives them, resources and
// resource templates by their URIs (the first upstream that lists one serves
// it), completions and subscriptions routed to the upstream of the prompt or
// resource they name. It follows its members' lists (each change of one is a
// list change of the aggregate's). An upstream that was never reached offers
// nothing; one that went away keeps its tools listed, whose calls wait for it
// (ConnectTimeout) and then fail with upstream_unavailable. It is safe for
// concurrent use.
type Aggregate struct {
	srv     *server.MCPServer
	members []*Gateway
	byName  map[string]*Gateway
	rule    Conflict
	log     zerolog.Logger

	mu      sync.Mutex
	tools   map[string]route // exposed name -> its upstream's
	back    map[route]string // and back
	prompts map[string]route
	uris    map[string]*Gateway // resource URI or template -> its upstream
	tmpls   []templateRoute
	digests map[string]string // each list as last set
	// exposed are the upstreams' tools the last refresh served, each name's
	// definition (JSON); the others on the server are the core's own.
	exposed map[string]string
}

// route is a tool or prompt of an upstream.
type route struct {
	g    *Gateway
	name string // the upstream's own
}

// templateRoute is a resource template of an upstream.
type templateRoute struct {
	g *Gateway
	t *mcpgo.URITemplate
}

// Upstream is one member of an Aggregate: its name and its gateway's options.
type Upstream struct {
	Name    string
	Options Options
}

// Start starts a gateway for each upstream, in the background (Options.
// Background: one that is not there never holds back the others), and the
// Aggregate of them all, in the order given (Priority's). Close closes them.
func Start(ups []Upstream, opts *AggregateOptions) (*Aggregate, error) {
	rule := opts.Conflict
	switch rule {
	case "":
		rule = PrefixAlways
	case PrefixAlways, PrefixOnConflict, Priority:
	default:
		return nil, fmt.Errorf("gateway: conflict rule %q: want prefix, conflict or priority", rule)
	}
	log := zerolog.Nop()
	if opts.Logger != nil {
		log = *opts.Logger
	}
	a := &Aggregate{rule: rule, log: log, byName: map[string]*Gateway{}, digests: map[string]string{},
		tools: map[string]route{}, prompts: map[string]route{}, uris: map[string]*Gateway{}}
	a.srv = a.newServer(opts)
	for _, u := range ups {
		if err := CheckName(u.Name); err != nil {
			_ = a.Close()
			return nil, err
		}
		if a.byName[u.Name] != nil {
			_ = a.Close()
			return nil, fmt.Errorf("gateway: upstream %q named twice", u.Name)
		}
		o := u.Options
		o.Name, o.Background, o.OnMirrored = u.Name, true, a.refresh
		g, err := New(context.Background(), &o)
		if err != nil {
			_ = a.Close()
			return nil, fmt.Errorf("upstream %s: %w", u.Name, err)
		}
		// A member that connects at once refreshes the aggregate from its
		// own goroutine, reading the members.
		a.mu.Lock()
		a.members = append(a.members, g)
		a.byName[u.Name] = g
		a.mu.Unlock()
	}
	a.refresh() // what members mirrored before they were members
	return a, nil
}

// Ready waits until every member's first attempt to reach its upstream is
// over, or ctx ends: an upstream that answers at once is
// listed before the first client comes, one that does not holds back
// nothing past ctx. It reports whether every member was tried.
func (a *Aggregate) Ready(ctx context.Context) bool {
	for _, g := range a.members {
		select {
		case <-g.firstTried():
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// Server is the aggregate's mcp-go server, to serve with mcp.New.
func (a *Aggregate) Server() *server.MCPServer { return a.srv }

// Upstreams are the member gateways, in order: each one's Server is the
// upstream alone, under its own names.
func (a *Aggregate) Upstreams() []*Gateway { return a.members }

// Close closes every member.
func (a *Aggregate) Close() error {
	var errs []error
	for _, g := range a.members {
		errs = append(errs, g.Close())
	}
	return errors.Join(errs...)
}

// Route is the upstream of tool (an exposed name) and the tool's name there.
func (a *Aggregate) Route(tool string) (g *Gateway, name string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.tools[tool]
	return r.g, r.name, ok
}

// NameOf is the name the aggregate serves tool of upstream under now.
func (a *Aggregate) NameOf(upstream, tool string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.byName[upstream]
	if g == nil {
		return "", false
	}
	name, ok := a.back[route{g, tool}]
	return name, ok
}

// PolicyOf is the core's Options.PolicyOf for the aggregate: the policy
// policy gives the tool (its name here, its upstream's, and its name there),
// when it gives one, else p as the core resolved it; then what the upstream
// says of its tasks (Gateway.PolicyOf).
func (a *Aggregate) PolicyOf(policy func(tool, upstream, name string) (resumemcp.Policy, bool)) func(string, resumemcp.Policy) resumemcp.Policy {
	return func(tool string, p resumemcp.Policy) resumemcp.Policy {
		g, name, ok := a.Route(tool)
		if !ok {
			return p
		}
		if policy != nil {
			if q, ok := policy(tool, g.Name(), name); ok {
				p = q
			}
		}
		return g.PolicyOf(name, p)
	}
}

// LimitName is the name a tool's rate and concurrency go by (mcp.Options.
// LimitName): UPSTREAM/tool for an upstream's tool, whatever name an
// endpoint gives it, so that the aggregate and the upstream's own endpoint
// share them; the tool's own for the others (the core's).
func (a *Aggregate) LimitName(tool string) string {
	if g, name, ok := a.Route(tool); ok {
		return LimitName(g.Name(), name)
	}
	return tool
}

// LimitName is the name the tool of upstream's rate and concurrency go by.
func LimitName(upstream, tool string) string { return upstream + "/" + tool }

// newServer is the aggregate's mcp-go server: every capability, list
// changes always.
func (a *Aggregate) newServer(opts *AggregateOptions) *server.MCPServer {
	h := &server.Hooks{}
	h.AddBeforeSubscribe(func(ctx context.Context, _ any, req *mcpgo.SubscribeRequest) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			if g := a.owner(req.Params.URI); g != nil {
				g.subscribe(ctx, subscriber{a.srv, sess.SessionID()}, req.Params.URI)
			}
		}
	})
	h.AddBeforeUnsubscribe(func(ctx context.Context, _ any, req *mcpgo.UnsubscribeRequest) {
		if sess := server.ClientSessionFromContext(ctx); sess != nil {
			for _, g := range a.members {
				g.unsubscribe(ctx, subscriber{a.srv, sess.SessionID()}, req.Params.URI)
			}
		}
	})
	h.AddOnUnregisterSession(func(ctx context.Context, sess server.ClientSession) {
		for _, g := range a.members {
			g.forget(ctx, subscriber{a.srv, sess.SessionID()})
		}
	})
	name := opts.Name
	if name == "" {
		name = "mcp-resume-gateway"
	}
	return server.NewMCPServer(name, opts.Version,
		server.WithToolCapabilities(true), server.WithResourceCapabilities(true, true), server.WithPromptCapabilities(true),
		server.WithLogging(), server.WithHooks(h),
		server.WithCompletions(), server.WithPromptCompletionProvider(aggCompleter{a}), server.WithResourceCompletionProvider(aggCompleter{a}))
}

// callTool calls a tool on the upstream the aggregate routes its name to
// now: the route its policy, limits and scopes were read from (Route). A
// handler bound to an upstream when the list was set would keep it after a
// name moved to another upstream with the same definition (the lists are
// set by their definitions alone).
func (a *Aggregate) callTool(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	g, local, ok := a.Route(req.Params.Name)
	if !ok {
		return nil, fmt.Errorf("no upstream serves the tool %s", req.Params.Name)
	}
	req.Params.Name = local
	return g.callTool(ctx, req)
}

// getPrompt gets a prompt from the upstream the aggregate routes its name to
// now (see callTool).
func (a *Aggregate) getPrompt(ctx context.Context, req mcpgo.GetPromptRequest) (*mcpgo.GetPromptResult, error) {
	a.mu.Lock()
	r, ok := a.prompts[req.Params.Name]
	a.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no upstream serves the prompt %s", req.Params.Name)
	}
	req.Params.Name = r.name
	return r.g.getPrompt(ctx, req)
}

// readByOwner reads a resource, listed or through a template, from its URI's
// upstream now (see callTool; and mcp-go tries the templates in no set
// order).
func (a *Aggregate) readByOwner(ctx context.Context, req mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
	g := a.owner(req.Params.URI)
	if g == nil {
		return nil, fmt.Errorf("no upstream serves %s", req.Params.URI)
	}
	return g.readResource(ctx, req)
}

// owner is the upstream of a resource's URI (or a template's): the one that
// lists it, else the first whose template matches it.
func (a *Aggregate) owner(uri string) *Gateway {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.uris[uri]; g != nil {
		return g
	}
	for _, t := range a.tmpls {
		if t.t != nil && t.t.Template != nil && t.t.Match(uri) != nil {
			return t.g
		}
	}
	return nil
}

// refresh serves the members' lists as they are now.
func (a *Aggregate) refresh() {
	a.mu.Lock()
	defer a.mu.Unlock()
	served := make([]Served, len(a.members))
	for i, g := range a.members {
		served[i] = g.Served()
	}
	toolNames := func(s Served) []string {
		out := make([]string, len(s.Tools))
		for i, t := range s.Tools {
			out[i] = t.Tool.Name
		}
		return out
	}
	promptNames := func(s Served) []string {
		out := make([]string, len(s.Prompts))
		for i, p := range s.Prompts {
			out[i] = p.Prompt.Name
		}
		return out
	}
	toolAs := a.names(served, toolNames)
	promptAs := a.names(served, promptNames)

	tools := map[string]route{}
	var serverTools []server.ServerTool
	prompts := map[string]route{}
	var serverPrompts []server.ServerPrompt
	uris := map[string]*Gateway{}
	var resources []server.ServerResource
	var tmpls []templateRoute
	var serverTmpls []server.ServerResourceTemplate
	// The core's own tools (the await tool, which deferred answers name)
	// are never replaced by an upstream's of the same name.
	own := map[string]bool{}
	for name := range a.srv.ListTools() {
		if _, ours := a.exposed[name]; !ours {
			own[name] = true
		}
	}
	for i, g := range a.members {
		for j, st := range served[i].Tools {
			name := toolAs[i][j]
			if own[name] {
				a.log.Warn().Str("upstream", g.Name()).Str("tool", st.Tool.Name).Str("as", name).Msg("an upstream tool is left out: the gateway serves a tool of that name itself")
				continue
			}
			if _, dup := tools[name]; dup {
				a.log.Warn().Str("upstream", g.Name()).Str("tool", st.Tool.Name).Str("as", name).Msg("an upstream tool is left out: another has its name")
				continue
			}
			tools[name] = route{g, st.Tool.Name}
			t := st.Tool
			t.Name = name
			serverTools = append(serverTools, server.ServerTool{Tool: t, Handler: a.callTool})
		}
		for j, sp := range served[i].Prompts {
			name := promptAs[i][j]
			if _, dup := prompts[name]; dup {
				continue
			}
			prompts[name] = route{g, sp.Prompt.Name}
			p := sp.Prompt
			p.Name = name
			serverPrompts = append(serverPrompts, server.ServerPrompt{Prompt: p, Handler: a.getPrompt})
		}
		for _, sr := range served[i].Resources {
			if uris[sr.Resource.URI] != nil {
				a.log.Warn().Str("upstream", g.Name()).Str("uri", sr.Resource.URI).Msg("an upstream resource is left out: an upstream before it lists the same URI")
				continue
			}
			uris[sr.Resource.URI] = g
			resources = append(resources, server.ServerResource{Resource: sr.Resource, Handler: a.readByOwner})
		}
		for _, st := range served[i].Templates {
			raw := ""
			if st.Template.URITemplate != nil && st.Template.URITemplate.Template != nil {
				raw = st.Template.URITemplate.Raw()
			}
			if raw == "" || uris[raw] != nil {
				continue
			}
			uris[raw] = g
			tmpls = append(tmpls, templateRoute{g, st.Template.URITemplate})
			// mcp-go tries the templates in no set order: a read goes to
			// the upstream a subscription or a completion of its URI goes
			// to (owner).
			serverTmpls = append(serverTmpls, server.ServerResourceTemplate{Template: st.Template, Handler: a.readByOwner})
		}
	}
	a.tools, a.prompts, a.uris, a.tmpls = tools, prompts, uris, tmpls
	a.back = make(map[route]string, len(tools))
	for name, r := range tools {
		a.back[r] = name
	}
	// The tools last: a client that sees an upstream's tools finds its
	// resources and prompts too.
	prompt := func(p server.ServerPrompt) any { return p.Prompt }
	if changed(a, "prompts", serverPrompts, prompt) {
		a.srv.SetPrompts(serverPrompts...)
	}
	if changed(a, "resources", resources, func(r server.ServerResource) any { return r.Resource }) {
		a.srv.SetResources(resources...)
	}
	if changed(a, "templates", serverTmpls, func(t server.ServerResourceTemplate) any { return t.Template }) {
		a.srv.SetResourceTemplates(serverTmpls...)
	}
	a.setTools(serverTools)
}

// setTools makes the upstreams' tools on the server tools, by changes alone
// (the server's other tools, the core's await tool, are never touched: the
// core adds its own while the members may already refresh), each change a
// list change; a.mu is held.
func (a *Aggregate) setTools(tools []server.ServerTool) {
	defs := make(map[string]string, len(tools))
	var add []server.ServerTool
	for _, st := range tools {
		b, _ := json.Marshal(st.Tool)
		defs[st.Tool.Name] = string(b)
		if a.exposed[st.Tool.Name] != string(b) {
			add = append(add, st)
		}
	}
	var gone []string
	for name := range a.exposed {
		if _, ok := defs[name]; !ok {
			gone = append(gone, name)
		}
	}
	a.exposed = defs
	if len(gone) > 0 {
		a.srv.DeleteTools(gone...)
	}
	if len(add) > 0 {
		a.srv.AddTools(add...)
	}
}

// changed reports whether list's definitions (def of each item, handlers
// aside) differ from what was last set under key, and records them.
func changed[T any](a *Aggregate, key string, list []T, def func(T) any) bool {
	defs := make([]any, len(list))
	for i, item := range list {
		defs[i] = def(item)
	}
	b, err := json.Marshal(defs)
	if err != nil {
		return true
	}
	sum := sha256.Sum256(b)
	d := string(sum[:])
	if a.digests[key] == d {
		return false
	}
	a.digests[key] = d
	return true
}

// names gives each member's items (names of) the names the conflict rule
// gives them, in the members' order.
func (a *Aggregate) names(served []Served, of func(Served) []string) [][]string {
	holders := map[string]int{}
	all := make([][]string, len(served))
	for i, s := range served {
		all[i] = of(s)
		for _, n := range all[i] {
			holders[n]++
		}
	}
	taken := map[string]bool{} // Priority: plain names the first holder took
	out := make([][]string, len(served))
	for i, names := range all {
		up := a.members[i].Name()
		out[i] = make([]string, len(names))
		for j, n := range names {
			plain := false
			switch a.rule {
			case PrefixOnConflict:
				plain = holders[n] == 1
			case Priority:
				plain = !taken[n]
				taken[n] = true
			}
			if plain && len(n) <= MaxName {
				out[i][j] = n
			} else {
				out[i][j] = Exposed(up, n)
			}
		}
	}
	return out
}

// aggCompleter routes completion/complete to the upstream of its prompt or
// resource.
type aggCompleter struct{ a *Aggregate }

func (c aggCompleter) CompletePromptArgument(ctx context.Context, name string, arg mcpgo.CompleteArgument, cc mcpgo.CompleteContext) (*mcpgo.Completion, error) {
	c.a.mu.Lock()
	r, ok := c.a.prompts[name]
	c.a.mu.Unlock()
	if !ok {
		return &mcpgo.Completion{Values: []string{}}, nil
	}
	return completer{r.g}.CompletePromptArgument(ctx, r.name, arg, cc)
}

func (c aggCompleter) CompleteResourceArgument(ctx context.Context, uri string, arg mcpgo.CompleteArgument, cc mcpgo.CompleteContext) (*mcpgo.Completion, error) {
	g := c.a.owner(uri)
	if g == nil {
		return &mcpgo.Completion{Values: []string{}}, nil
	}
	return completer{g}.CompleteResourceArgument(ctx, uri, arg, cc)
}
