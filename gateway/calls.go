package gateway

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	resumemcp "github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
)

// callTool is the handler of every mirrored tool: it runs the call on the
// upstream through the gateway's client, which resumes it across lost
// streams and connections (SEP-975, with its key, acks and silences), sends
// it again when the upstream never got it, and follows the upstream's task
// when the tool runs only as one; the call's progress, log messages and
// questions go to the call's own client through the core (relay). A
// restartable tool's call is sent again to the next upstream when the one
// running it went away (client.CallOptions.Idempotent); any other call whose
// upstream went away fails with upstream_lost. With Options.TracerProvider,
// each upstream request is a CLIENT span (the client's).
//
// An upstream that answers the call with a deferred answer (it runs on, and
// names a tool to call for its result) is followed by the client to the
// call's own result: the upstream's handle never reaches the gateway's client
// as an answer. The gateway defers to its own client by its own clock (the
// core's mcp.Options.AnswerWithin: connect's 45 s), with a handle of its own,
// and the call goes on upstream meanwhile.
//
// An upstream of the 2026-07-28 era gets the call in that era, declaring the
// capabilities of the call's own client (the upstream asks only what that
// client can answer) and the log level it asked for: a question of the
// upstream is then the call's input_required answer, which goes to a 2026
// client as it is (its requestState wrapped) and whose retry comes back here
// to go to the upstream with the upstream's state; for any other client, or
// a task of the gateway's, the client asks the questions itself (relay.ask)
// and sends the call again with the answers.
func (g *Gateway) callTool(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	params, err := callParams(req.Params.Name, req.Params.Arguments, req.Params.MultiRoundTripParams)
	if err != nil {
		return nil, err
	}
	var token mcpgo.ProgressToken
	if req.Params.Meta != nil {
		token = req.Params.Meta.ProgressToken
	}
	r := &relay{ctx: ctx, token: token, g: g, tool: req.Params.Name}
	support, _ := g.TaskSupport(req.Params.Name)
	up := g.client()
	if up == nil {
		return nil, callErr(errNotYet)
	}
	opts := &client.CallOptions{
		Progress:   r.progress,
		OnLog:      r.log,
		OnRequest:  r.ask,
		Resumed:    r.resumed,
		Resent:     r.resent,
		OnDeferred: r.deferred,
		// A task of the upstream's outlives the connection it was made on,
		// and its questions say which task they are for. Only when the tool
		// must be one: a task's progress waits in its queue until it is
		// asked for, where a newer one replaces an older one (a burst loses
		// most of its steps), and progress delivered to a connection that
		// died is not sent again.
		AsTask: support == mcpgo.TaskSupportRequired,
		// The upstream's call became its task: the client's becomes the
		// gateway's (a 2026 client of the extension is answered with its
		// CreateTaskResult now), which ends with the upstream's.
		OnTask:              func(string) { resumemcp.Promote(ctx) },
		ReturnInputRequired: func() bool { return resumemcp.TakesInputRequired(ctx) },
		Envelope:            g.envelope(ctx, req.Params.Meta),
		Idempotent:          g.opts.Restartable(req.Params.Name),
	}
	// No goroutine waits for the upstream's answer where the core lets the
	// tool answer later: a detached call then holds none.
	if complete, later := resumemcp.Later(ctx); later {
		up.Go(ctx, spec.MethodToolsCall, params, opts, func(raw json.RawMessage, err error) { complete(toolResult(raw, err)) })
		return nil, nil
	}
	return toolResult(up.Call(ctx, spec.MethodToolsCall, params, opts))
}

// toolResult is the gateway's answer to its client's call, from the
// upstream's answer raw (err: its error).
func toolResult(raw json.RawMessage, err error) (*mcpgo.CallToolResult, error) {
	if err != nil {
		return nil, callErr(err)
	}
	var res mcpgo.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil || res.Content == nil && res.ResultType != mcpgo.ResultTypeInputRequired {
		return nil, spec.NewError(spec.CodeInternalError, "", "malformed tool result from the upstream: "+cmp.Or(err, errNoContent).Error())
	}
	if res.ResultType == mcpgo.ResultTypeInputRequired && res.RequestState != "" {
		res.RequestState = clientState(res.RequestState)
	}
	res.Meta = ownMeta(res.Meta)
	return &res, nil
}

// callErr is what the client of a call gets when the upstream's answer was an
// error (as it is: a tool may fail its call with a code and a reason), or
// when there was none; a resume the upstream refused because it lost the
// call is upstream_lost.
func callErr(err error) error {
	var re *client.ResumeError
	if errors.As(err, &re) {
		switch re.Reason() {
		case spec.ReasonNotFound, spec.ReasonServerRestarted, spec.ReasonOwnerLost, spec.ReasonServerStopped:
			// The upstream no longer runs the call: it restarted (without
			// a store, or the tool was not safe to run again) or stopped.
			return spec.NewError(spec.CodeInternalError, ReasonUpstreamLost, "the upstream server lost the call ("+string(re.Reason())+"): "+re.Err.Message)
		}
	}
	var e *spec.Error
	if errors.As(err, &e) {
		return e
	}
	return lostErr(err)
}

// envelope is the 2026-07-28 envelope of a call whose client's request had
// asked (its _meta), for an upstream of that era: the capabilities of the
// call's own client, and the log level it asked for (a 2026 client's own, a
// 2025 client's session's: the era sends a request's log messages only at a
// level it names). Nil while the upstream does not speak the era.
func (g *Gateway) envelope(ctx context.Context, asked *mcpgo.Meta) *client.Envelope {
	if up := g.client(); up == nil || !up.Modern() {
		return nil
	}
	cs := server.ClientSessionFromContext(ctx)
	e := &client.Envelope{Capabilities: json.RawMessage("{}")}
	if ci, ok := cs.(server.SessionWithClientInfo); ok {
		if b, err := json.Marshal(ci.GetClientCapabilities()); err == nil {
			e.Capabilities = b
		}
	}
	if level, ok := clientMeta(asked, spec.MetaLogLevel); ok {
		e.LogLevel, _ = level.(string)
	} else if _, modern := clientMeta(asked, spec.MetaProtocolVersion); !modern {
		if ls, ok := cs.(server.SessionWithLogging); ok {
			e.LogLevel = string(ls.GetLogLevel())
		}
	}
	return e
}

// relay passes what the upstream sends for one call on to the call's client,
// through the core: its progress (under the client's own progress token),
// its log messages, and its questions (sampling, elicitation, roots), which
// the core queues while the client is away, sends again after a resume, and
// makes an input_required round for a 2026 client.
type relay struct {
	ctx   context.Context     // the tool's, in the core: where its messages go
	token mcpgo.ProgressToken // the client's progress token; nil when it gave none
	g     *Gateway            // for its log
	tool  string

	mu sync.Mutex // guards last, moved and said
	// last is the last progress value passed on: the gateway serves the
	// progress of its client's call, which [MCP progress] "MUST increase
	// with each notification", so a value the upstream sends again (a call
	// run again on a new child, a stream an upstream replays) is dropped.
	last  float64
	moved bool
	said  bool // the call's loss was logged
}

// resumed logs, once per call, that the call's upstream connection or stream
// was lost and the call is being resumed.
func (r *relay) resumed() {
	r.mu.Lock()
	said := r.said
	r.said = true
	r.mu.Unlock()
	if !said {
		r.g.log.Warn().Str("tool", r.tool).Msg("upstream connection lost during a call; resuming it")
	}
}

// deferred logs that the upstream deferred its answer, which the client
// follows with the await tool it names.
func (r *relay) deferred(d client.Deferred) {
	r.g.log.Debug().Str("tool", r.tool).Str("await", d.Tool).Msg("the upstream deferred its answer; awaiting the call's result")
}

// resent logs that the call was sent again: the upstream never got it, it
// has a key, or its tool is restartable.
func (r *relay) resent() {
	r.g.log.Info().Str("tool", r.tool).Msg("a call sent to the upstream again: its connection or stream was lost before its answer")
}

func (r *relay) progress(p client.Progress) {
	r.mu.Lock()
	again := r.moved && p.Progress <= r.last
	if !again {
		r.last, r.moved = p.Progress, true
	}
	r.mu.Unlock()
	if again || r.token == nil {
		return
	}
	params := map[string]any{"progressToken": r.token, "progress": p.Progress}
	if p.Total != 0 {
		params["total"] = p.Total
	}
	if p.Message != "" {
		params["message"] = p.Message
	}
	r.send(spec.MethodProgress, params)
}

func (r *relay) log(p mcpgo.LoggingMessageNotificationParams) {
	params := map[string]any{"level": p.Level, "data": p.Data}
	if p.Logger != "" {
		params["logger"] = p.Logger
	}
	r.send("notifications/message", params)
}

func (r *relay) send(method string, params map[string]any) {
	if srv := server.ServerFromContext(r.ctx); srv != nil {
		_ = srv.SendNotificationToClient(r.ctx, method, params)
	}
}

// ask asks the call's client a question of the upstream's, as it is: a
// roots/list of a call whose client declared no roots gets the gateway's own
// roots, of which it has none. ctx, the client's for the question, carries
// the tool's values (its session in the core) and ends with the call or the
// gateway's Close.
func (r *relay) ask(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case string(mcpgo.MethodListRoots):
		if !hasRoots(ctx) {
			return json.RawMessage(`{"roots":[]}`), nil
		}
	case string(mcpgo.MethodSamplingCreateMessage), string(mcpgo.MethodElicitationCreate):
	default:
		return nil, spec.NewError(spec.CodeMethodNotFound, "", "method not found: "+method)
	}
	return resumemcp.Ask(ctx, method, params)
}

// unattributed answers a request of the upstream that belongs to no call the
// client can tell (over stdio or WebSocket, with several calls running, the
// transport does not say which request it is for; or asked outside any
// call): roots/list gets the gateway's own roots (none: servers ask at
// start-up, and when told the roots changed), a question is refused.
func (g *Gateway) unattributed(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	switch method {
	case string(mcpgo.MethodListRoots):
		return json.RawMessage(`{"roots":[]}`), nil
	case string(mcpgo.MethodSamplingCreateMessage), string(mcpgo.MethodElicitationCreate):
		g.log.Warn().Str("method", method).Msg("an upstream request of no call the gateway can tell: none or several run, and the transport does not say which it is for")
		return nil, spec.NewError(spec.CodeInternalError, ReasonUnattributed, "the gateway cannot tell which of its calls this request belongs to")
	}
	return nil, spec.NewError(spec.CodeMethodNotFound, "", "method not found: "+method)
}

// notification handles a notification of the upstream that belongs to no
// call: list changes make the gateway list again, resource updates go to the
// sessions subscribed to them.
func (g *Gateway) notification(method string, params json.RawMessage) {
	switch method {
	case "notifications/resources/updated":
		var p map[string]any
		if json.Unmarshal(params, &p) == nil {
			g.updated(p)
		}
	case "notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed":
		select {
		case g.mirrorQ <- struct{}{}:
		default:
		}
	default:
		g.log.Debug().Str("method", method).Msg("upstream notification not passed on")
	}
}

// hasRoots reports whether the client of the call running on ctx declared the
// roots capability.
func hasRoots(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	return ok && cs.GetClientCapabilities().Roots != nil
}

// stateTag starts the requestState the gateway hands its client for an
// upstream's: the upstream's own, wrapped, so that the gateway's core, which
// may make states of the same form, never takes it for one of its own.
const stateTag = "gw1."

// clientMeta is the value of key in the _meta of the client's request.
func clientMeta(m *mcpgo.Meta, key string) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m.AdditionalFields[key]
	return v, ok
}

// callParams are the params of a request to the upstream for a client's
// tools/call or prompts/get of name with args (none sent when nil: a server
// may refuse null), and what the client's retry (MRTR) carries for the
// upstream: its answers and the upstream's state.
func callParams(name string, args any, mr mcpgo.MultiRoundTripParams) (map[string]json.RawMessage, error) {
	params := make(map[string]json.RawMessage, 4)
	var err error
	params["name"], _ = json.Marshal(name)
	if args != nil {
		if params["arguments"], err = json.Marshal(args); err != nil {
			return nil, err
		}
	}
	if len(mr.InputResponses) > 0 {
		if params["inputResponses"], err = json.Marshal(mr.InputResponses); err != nil {
			return nil, err
		}
	}
	s, ok := upstreamState(mr.RequestState)
	if !ok {
		return nil, spec.NewError(spec.CodeInvalidParams, spec.ReasonInvalidState, "requestState is not one this gateway handed out")
	}
	if s != "" {
		params["requestState"], _ = json.Marshal(s)
	}
	return params, nil
}

// clientState is the requestState handed to the client for the upstream's s.
func clientState(s string) string {
	return stateTag + base64.RawURLEncoding.EncodeToString([]byte(s))
}

// upstreamState is the upstream's requestState in one the gateway handed out
// (a state of another form is passed on as it is: the upstream judges it).
// One of the gateway's form that does not decode was changed since: not ok.
//
// [2026-07-28 MRTR, SEP-2322] servers MUST reject a requestState that fails
// integrity verification; the upstream verifies its own, and the gateway
// its wrapping.
func upstreamState(s string) (string, bool) {
	rest, tagged := strings.CutPrefix(s, stateTag)
	if !tagged {
		return s, true
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// errNoContent: a tool result without content that asks for no input.
var errNoContent = errors.New("content is missing")

// ownMeta is the _meta of an upstream's result as the gateway's own result
// carries it: without the upstream's numbering (SEP-975) and the upstream's
// serverInfo (2026-07-28; the gateway's core names the gateway); nil when
// nothing is left.
func ownMeta(m *mcpgo.Meta) *mcpgo.Meta {
	if m == nil {
		return nil
	}
	delete(m.AdditionalFields, spec.MetaSeq)
	delete(m.AdditionalFields, mcpgo.MetaKeyServerInfo)
	if m.ProgressToken == nil && len(m.AdditionalFields) == 0 {
		return nil
	}
	return m
}
