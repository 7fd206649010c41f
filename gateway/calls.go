package gateway

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	resumemcp "github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/spec"
)

// maxUnsent bounds how often a call the upstream never received is sent to a
// next connection.
const maxUnsent = 3

// callTool is the handler of every mirrored tool: it runs the call on the
// upstream, with a progress token of the gateway's own (the upstream request's
// id) whatever the client sent, and passes what the upstream sends for it on to
// the call. A call that an HTTP upstream made resumable (SEP-975) survives the
// loss of its stream or connection (a silent one included: the transport's
// Silence window): it is resumed, under its id, with its token and an ack of
// what was passed on, on the next connection, for the call's maxWait. Any other
// call whose upstream went away fails with upstream_lost, or runs again on the
// next upstream when its tool is restartable. With Options.TracerProvider,
// each upstream request is a CLIENT span (trace.go).
func (g *Gateway) callTool(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
	sp := g.upstreamSpan(ctx, req.Params.Name)
	res, err := g.runCall(ctx, req, sp)
	sp.end(res, err)
	return res, err
}

// runCall is callTool's work; sp keeps the span of its upstream request.
func (g *Gateway) runCall(ctx context.Context, req mcpgo.CallToolRequest, sp *upSpan) (*mcpgo.CallToolResult, error) {
	uc := &upcall{ctx: ctx}
	if req.Params.Meta != nil {
		uc.token = req.Params.Meta.ProgressToken
	}
	unsent := 0
	var (
		id       spec.ID         // the upstream call's, kept across resumes
		first    json.RawMessage // its params, as first sent
		resuming time.Time       // since when the call is being resumed (zero: not)
		// The answers to the upstream's questions and its state, for a retry
		// (MRTR): the client's, or those the gateway asked for it.
		answers, state = retryOf(req.Params.MultiRoundTripParams)
		// envelope: the 2026-07-28 _meta members of a call sent in that era,
		// which its resume carries too.
		envelope map[string]any
		// why the previous upstream request of the call ended without an
		// answer, for its span (an error.type), when the call is sent anew.
		why string
	)
	for {
		p, err := g.current(ctx)
		if err != nil {
			return nil, err
		}
		method, params := "tools/call", json.RawMessage(nil)
		g.mu.Lock()
		token, ack, keyed, policySeen, heard := uc.resumeToken, uc.seq, uc.keyed, uc.policySeen, uc.heard
		g.mu.Unlock()
		switch {
		case resuming.IsZero():
			id = p.newID()
			sp.start(id, p.modern, why)
			why = ""
			meta := map[string]any{"progressToken": json.RawMessage(id)}
			sp.inject(ctx, meta)
			if g.keys {
				// A key of the call's own (its resume token upstream): the call
				// sent again with it is joined to the one running, never run twice.
				key := newKey()
				meta[spec.MetaKey] = key
				g.mu.Lock()
				uc.resumeToken, uc.keyed = key, true
				g.mu.Unlock()
				keyed = true // a write that fails may have reached the upstream
			}
			call := map[string]any{"name": req.Params.Name, "_meta": meta}
			if req.Params.Arguments != nil {
				call["arguments"] = req.Params.Arguments
			}
			support, _ := g.TaskSupport(req.Params.Name)
			upTask := support == mcpgo.TaskSupportRequired
			if upTask && !p.modern {
				// A task of the upstream's (2025-11-25): it outlives the
				// connection it was made on, and its questions say which
				// task they are for. Only when the tool must be one: a
				// task's progress waits in its queue until tasks/result
				// takes it, where a newer one replaces an older one (a
				// burst loses most of its steps), and progress delivered to
				// a connection that died is not sent again.
				call["task"] = map[string]any{}
			}
			envelope = nil
			if p.modern {
				// An upstream of the 2026-07-28 era makes a task-required
				// call its task when it chooses (its questions may come
				// first, as the call's input_required answer: SEP-2663).
				g.modernCall(ctx, req.Params.Meta, call, meta, answers, state, upTask)
				envelope = map[string]any{}
				for _, k := range []string{spec.MetaProtocolVersion, spec.MetaClientCapabilities, spec.MetaClientInfo} {
					envelope[k] = meta[k]
				}
			}
			if params, err = json.Marshal(call); err != nil {
				return nil, err
			}
			first = params
		case keyed && !policySeen:
			// Lost before its policy came: sent again with its key, the upstream
			// joins it to the call it runs (or has the result of), or runs it if
			// it never got it. Once the policy came, the upstream had it: a
			// resume, which an upstream that forgot it (restarted without its
			// data) refuses rather than run it again.
			params = first
			sp.event(mcptrace.EventResent)
		default:
			// SEP-975: the same id, the token, and what was passed on already.
			method = spec.MethodResume
			rm := map[string]any{spec.MetaAck: ack}
			sp.inject(ctx, rm)
			sp.event(mcptrace.EventResumeSent, trace.WithAttributes(mcptrace.Ack.Int64(int64(ack))))
			maps.Copy(rm, envelope) // a call of the 2026 era is resumed in it
			params, _ = json.Marshal(map[string]any{"resumeToken": token, "_meta": rm})
		}
		g.mu.Lock()
		g.calls[string(id)] = uc
		g.mu.Unlock()
		raw, err := p.send(ctx, id, method, params, true) // traced by sp
		g.mu.Lock()
		delete(g.calls, string(id))
		token, wait, reached := uc.resumeToken, uc.maxWait, uc.heard != heard
		g.mu.Unlock()
		var serr *spec.Error
		gone := errors.As(err, &serr) && serr.Reason == spec.ReasonUnknownSession // a restarted upstream
		if gone {
			p.close() // the supervisor opens a new session
		}
		// A write that failed may have reached the upstream (its answer's
		// headers never came): a keyed call is sent again with its key, never
		// as a new call.
		lostHere := gone || errors.Is(err, errLost) || errors.Is(err, errStreamLost) ||
			(errors.Is(err, errNotSent) && (!resuming.IsZero() || keyed))
		switch {
		case ctx.Err() != nil:
		case lostHere && token != "":
			sp.event(mcptrace.EventConnectionLost)
			if resuming.IsZero() {
				g.log.Warn().Str("tool", req.Params.Name).Msg("upstream connection lost during a call; resuming it")
			}
			// The call's maxWait runs from its latest loss: an attempt that
			// reached the upstream (a message of the call came) starts it again.
			if resuming.IsZero() || reached {
				resuming = time.Now()
			}
			if time.Since(resuming) > cmp.Or(wait, g.opts.ConnectTimeout) {
				return nil, spec.NewError(spec.CodeInternalError, ReasonUpstreamLost, "the upstream could not be reached to resume the call within its maxWait")
			}
			if errors.Is(err, errStreamLost) {
				backoff.Sleep(ctx, takeUpDelay) // the same connection may serve the resume
			} else {
				g.replaced(ctx, p)
			}
			continue
		case (errors.Is(err, errNotSent) || gone) && unsent < maxUnsent:
			// The upstream never saw the call: send it to the next connection,
			// once this one is out of service (a child that died may still have
			// taken the write into its pipe).
			unsent++
			why = "not_sent"
			p.close()
			g.replaced(ctx, p)
			continue
		case (errors.Is(err, errLost) || errors.Is(err, errStreamLost)) && g.opts.Restartable(req.Params.Name):
			g.log.Info().Str("tool", req.Params.Name).Msg("upstream lost during a restartable call; running it again")
			why = string(ReasonUpstreamLost)
			if errors.Is(err, errLost) { // the connection, not one stream of it
				g.replaced(ctx, p)
			}
			continue
		}
		if err != nil {
			return nil, upstreamErr(err)
		}
		if task := createdTask(raw); task != "" {
			if raw, err = g.awaitTask(ctx, uc, id, task); err != nil {
				return nil, err
			}
		} else if task := modernTask(raw); task != "" {
			// The upstream's call became its task: the client's becomes the
			// gateway's (a 2026 client of the extension is answered with its
			// CreateTaskResult now), which ends with the upstream's.
			resumemcp.Promote(ctx)
			if raw, err = g.awaitModernTask(ctx, uc, id, task); err != nil {
				return nil, err
			}
		}
		if in, ok := spec.AskedInput(raw); ok && !resumemcp.TakesInputRequired(ctx) {
			// Asked here, then sent again as a new call with the answers.
			if answers, err = fulfil(ctx, in); err != nil {
				return nil, err
			}
			state, resuming, unsent = in.RequestState, time.Time{}, 0
			g.mu.Lock()
			uc.resumeToken, uc.keyed, uc.policySeen, uc.seq, uc.maxWait = "", false, false, 0, 0
			g.mu.Unlock()
			continue
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
}

// modernCall makes call, the params of an upstream tools/call with their
// _meta, a request of the 2026-07-28 era: it declares the capabilities of the
// call's own client (the upstream asks only what that client can answer), and
// carries the answers and the state of a retry (MRTR). A question of the
// upstream then comes back as the call's input_required result, which goes to
// the client as it is; the client's retry comes here and goes to the upstream
// with the upstream's state, untouched.
func (g *Gateway) modernCall(ctx context.Context, asked *mcpgo.Meta, call, meta map[string]any, answers any, state string, tasks bool) {
	cs := server.ClientSessionFromContext(ctx)
	caps := json.RawMessage("{}")
	if ci, ok := cs.(server.SessionWithClientInfo); ok {
		if b, err := json.Marshal(ci.GetClientCapabilities()); err == nil {
			caps = b
		}
	}
	// The 2026 era sends a request's log messages only at a level it names:
	// a 2026 client's own, a 2025 client's session's.
	if level, ok := clientMeta(asked, spec.MetaLogLevel); ok {
		meta[spec.MetaLogLevel] = level
	} else if _, modern := clientMeta(asked, spec.MetaProtocolVersion); !modern {
		if ls, ok := cs.(server.SessionWithLogging); ok && ls.GetLogLevel() != "" {
			meta[spec.MetaLogLevel] = ls.GetLogLevel()
		}
	}
	// The gateway's client gets a task of the gateway's, which outlives the
	// upstream call: the tasks extension is passed on only for a tool that
	// runs only as a task, whose task the gateway follows, whatever its
	// client declared. A call to an HTTP upstream is resumable, as the
	// session's calls are. Decoded only when there is something to change:
	// most calls pass their client's as it is.
	if resumable := g.opts.URL != ""; resumable || tasks || bytes.Contains(caps, []byte(spec.ExtensionTasks)) {
		var m map[string]any
		if json.Unmarshal(caps, &m) == nil {
			ext, _ := m["extensions"].(map[string]any)
			switch {
			case tasks && ext == nil:
				m["extensions"] = map[string]any{spec.ExtensionTasks: map[string]any{}}
			case tasks:
				ext[spec.ExtensionTasks] = map[string]any{}
			case ext != nil:
				delete(ext, spec.ExtensionTasks)
			}
			if resumable {
				exp, _ := m["experimental"].(map[string]any)
				if exp == nil {
					exp = map[string]any{}
				}
				exp[spec.CapabilityName] = resumableCap
				m["experimental"] = exp
			}
			caps, _ = json.Marshal(m)
		}
	}
	meta[spec.MetaProtocolVersion] = spec.Version2026
	meta[spec.MetaClientCapabilities] = caps
	meta[spec.MetaClientInfo] = g.clientInfo()
	if answers != nil {
		call["inputResponses"] = answers
	}
	if state != "" {
		call["requestState"] = state
	}
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

// retryOf is what a client's retry (MRTR) carries for the upstream: its
// answers (nil for none) and the upstream's state.
func retryOf(mr mcpgo.MultiRoundTripParams) (answers any, state string) {
	if len(mr.InputResponses) > 0 {
		answers = mr.InputResponses
	}
	return answers, upstreamState(mr.RequestState)
}

// clientState is the requestState handed to the client for the upstream's s.
func clientState(s string) string {
	return stateTag + base64.RawURLEncoding.EncodeToString([]byte(s))
}

// upstreamState is the upstream's requestState in one the gateway handed out
// (a state of another form is passed on as it is: the upstream judges it).
func upstreamState(s string) string {
	if rest, ok := strings.CutPrefix(s, stateTag); ok {
		if b, err := base64.RawURLEncoding.DecodeString(rest); err == nil {
			return string(b)
		}
	}
	return s
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

// fulfil asks the call's client the upstream's questions, all at once, and
// returns the answers by their keys: for a call whose client does not take an
// input_required answer itself (a task of the gateway's, where the questions
// make the task input_required, or a 2025-era client, asked with requests).
func fulfil(ctx context.Context, in spec.InputRequired) (map[string]json.RawMessage, error) {
	answers := make(map[string]json.RawMessage, len(in.InputRequests))
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for key, q := range in.InputRequests {
		wg.Go(func() {
			res, err := resumemcp.Ask(ctx, q.Method, q.Params)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				first = cmp.Or(first, err)
				return
			}
			answers[key] = res
		})
	}
	wg.Wait()
	return answers, first
}

// takesKeys reports whether an upstream that initialized with init takes call
// keys (io.mcp-resume/key in its resumableRequests capability).
func takesKeys(init initResult) bool {
	raw, ok := init.Capabilities.Experimental[spec.CapabilityName]
	if !ok {
		return false
	}
	b, _ := json.Marshal(raw)
	var c spec.ServerCapability
	return json.Unmarshal(b, &c) == nil && slices.Contains(c.Extensions, spec.ExtensionKey)
}

// newKey returns a random call key: 32 bytes, base64url.
func newKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// callOf is the call a message from the upstream belongs to: the one whose
// stream carried it (HTTP), else the one whose upstream task it names
// (_meta io.modelcontextprotocol/related-task), else the only call running.
// With several calls running on a stdio upstream, a message that names none of
// them belongs to none: the stdio transport does not say which request a
// server request is for.
//
// It also returns how many calls run.
func (g *Gateway) callOf(via []byte, params json.RawMessage) (*upcall, int) {
	task := relatedTask(params)
	g.mu.Lock()
	defer g.mu.Unlock()
	if via != nil {
		return g.calls[string(via)], len(g.calls)
	}
	if task != "" {
		for _, uc := range g.calls {
			if uc.upTask == task {
				return uc, len(g.calls)
			}
		}
	}
	if len(g.calls) == 1 {
		for _, uc := range g.calls {
			return uc, 1
		}
	}
	return nil, len(g.calls)
}

// serverRequest answers a request of the upstream: its questions to a client
// go to the call's client, through the core (queued while the client is away,
// sent again on a resume, an input_required round for a 2026 client).
func (g *Gateway) serverRequest(p *peer, m *spec.Message, via []byte) {
	switch m.Method {
	case "ping":
		p.respond(m.ID, json.RawMessage("{}"), nil)
		return
	case string(mcpgo.MethodSamplingCreateMessage), string(mcpgo.MethodElicitationCreate), string(mcpgo.MethodListRoots):
	default:
		p.respond(m.ID, nil, spec.NewError(spec.CodeMethodNotFound, "", "method not found: "+m.Method))
		return
	}
	uc, running := g.callOf(via, m.Params)
	switch {
	case m.Method == string(mcpgo.MethodListRoots) && (uc == nil || !hasRoots(uc.ctx)):
		// Asked outside any call (servers ask at start-up, and when told the
		// roots changed), or in the call of a client without roots: the
		// gateway's own roots, of which it has none.
		p.respond(m.ID, json.RawMessage(`{"roots":[]}`), nil)
		return
	case uc == nil:
		g.log.Warn().Str("method", m.Method).Int("running", running).Msg("an upstream request of no call the gateway can tell: none or several run, and the transport does not say which it is for")
		p.respond(m.ID, nil, spec.NewError(spec.CodeInternalError, ReasonUnattributed,
			"the gateway cannot tell which of its calls this request belongs to"))
		return
	}
	// A question the upstream sends again after a resume (same id) is asked
	// once: the answer, when it comes, goes to each copy.
	g.mu.Lock()
	if uc.asked == nil {
		uc.asked = map[string]*question{}
	}
	q, again := uc.asked[string(m.ID)]
	if !again {
		q = &question{done: make(chan struct{})}
		uc.asked[string(m.ID)] = q
	}
	g.mu.Unlock()
	if !again {
		q.res, q.err = resumemcp.Ask(uc.ctx, m.Method, m.Params)
		close(q.done)
	}
	<-q.done
	g.respondUp(p, m.ID, q.res, q.err)
}

// question is an upstream request of a call being answered by its client.
type question struct {
	done chan struct{} // closed once res and err are set
	res  json.RawMessage
	err  error
}

// respondUp answers the upstream's request id on the live connection: the
// one it came on (p) may have been replaced while the client thought (a call
// resumed on a new connection keeps its question waiting there).
func (g *Gateway) respondUp(p *peer, id spec.ID, res json.RawMessage, err error) {
	g.mu.Lock()
	if g.up != nil {
		p = g.up
	}
	g.mu.Unlock()
	p.respond(id, res, err)
}

// notification passes a notification of the upstream on: progress and logs of a
// call to the call's client; list changes make the gateway list again.
func (g *Gateway) notification(p *peer, m *spec.Message, via []byte) {
	switch m.Method {
	case spec.MethodResumePolicy:
		var pol spec.ResumePolicyParams
		if json.Unmarshal(m.Params, &pol) != nil || pol.ResumeToken == "" {
			return
		}
		g.mu.Lock()
		if uc := g.calls[string(pol.RequestID)]; uc != nil {
			uc.resumeToken, uc.policySeen = pol.ResumeToken, true
			uc.heard++
			if pol.MaxWait != nil {
				uc.maxWait = time.Duration(*pol.MaxWait) * time.Second
			}
		}
		g.mu.Unlock()
	case "notifications/progress":
		tok, found, _ := spec.Member(m.Params, "progressToken")
		if !found {
			return
		}
		var params map[string]any
		if json.Unmarshal(m.Params, &params) != nil {
			return
		}
		value, _ := params["progress"].(float64)
		seq := spec.ReadSeq(m.Params)
		g.mu.Lock()
		uc := g.calls[string(tok)]
		again := uc != nil && uc.progressed && value <= uc.progress
		if uc != nil && !again {
			uc.progress, uc.progressed = value, true
		}
		if uc != nil {
			uc.seq = max(uc.seq, seq)
			uc.heard++
		}
		g.mu.Unlock()
		if uc == nil || uc.token == nil || again {
			return
		}
		params["progressToken"] = uc.token
		g.send(uc, m.Method, params)
	case "notifications/message":
		uc, _ := g.callOf(via, m.Params)
		if uc == nil {
			g.log.Debug().RawJSON("params", m.Params).Msg("upstream log message of no call")
			return
		}
		var params map[string]any
		if json.Unmarshal(m.Params, &params) != nil {
			return
		}
		seq := spec.ReadSeq(m.Params)
		g.mu.Lock()
		again := seq != 0 && seq <= uc.seq // sent again after a resume
		uc.seq = max(uc.seq, seq)
		uc.heard++
		g.mu.Unlock()
		if !again {
			g.send(uc, m.Method, params)
		}
	case "notifications/resources/updated":
		var params map[string]any
		if json.Unmarshal(m.Params, &params) == nil {
			g.updated(params)
		}
	case "notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed":
		select {
		case g.mirrorQ <- struct{}{}:
		default:
		}
	default:
		g.log.Debug().Str("method", m.Method).Msg("upstream notification not passed on")
	}
}

func (g *Gateway) send(uc *upcall, method string, params map[string]any) {
	if srv := server.ServerFromContext(uc.ctx); srv != nil {
		if err := srv.SendNotificationToClient(uc.ctx, method, params); err != nil {
			g.log.Debug().Err(err).Str("method", method).Msg("passing an upstream notification on")
		}
	}
}

// hasRoots reports whether the client of the call running on ctx declared the
// roots capability.
func hasRoots(ctx context.Context) bool {
	cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	return ok && cs.GetClientCapabilities().Roots != nil
}

// createdTask is the task id of a CreateTaskResult of 2025-11-25 ({"task":
// {"taskId": ...}}), or "" for any other result.
func createdTask(raw json.RawMessage) string {
	if _, found, scanned := spec.Member(raw, "task"); scanned && !found {
		return ""
	}
	var r struct {
		Task *struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if json.Unmarshal(raw, &r) != nil || r.Task == nil {
		return ""
	}
	return r.Task.TaskID
}

// relatedTask is the task a message's params name in
// _meta["io.modelcontextprotocol/related-task"], or "".
func relatedTask(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var rt struct {
		TaskID string `json:"taskId"`
	}
	if raw, ok := p.Meta[spec.MetaRelatedTask]; !ok || json.Unmarshal(raw, &rt) != nil {
		return ""
	}
	return rt.TaskID
}

// awaitTask waits for the upstream task of call id (its progress token) and
// returns its result: tasks/result blocks until the task ends, carrying its
// questions and progress meanwhile. The task outlives the upstream connection:
// when that is lost (or the upstream restarted and forgot the session),
// tasks/result is asked again on the next, for as long as ConnectTimeout
// passes without a message of the call. A call whose context ends cancels the
// task (tasks/cancel).
func (g *Gateway) awaitTask(ctx context.Context, uc *upcall, id spec.ID, task string) (json.RawMessage, error) {
	g.mu.Lock()
	uc.upTask = task
	g.calls[string(id)] = uc // its progress, under the call's token
	g.mu.Unlock()
	defer g.forgetCall(id)
	params, _ := json.Marshal(map[string]string{"taskId": task})
	var lost time.Time // since when the task is being asked for again (zero: not)
	for {
		p, err := g.current(ctx)
		if err != nil {
			return nil, g.endTask(ctx, params, err)
		}
		rid := p.newID()
		g.mu.Lock()
		g.calls[string(rid)] = uc // what its stream carries (HTTP)
		heard := uc.heard
		g.mu.Unlock()
		raw, err := p.callID(ctx, rid, methodTasksResult, params)
		g.forgetCall(rid)
		if err == nil {
			return raw, nil
		}
		var serr *spec.Error
		gone := errors.As(err, &serr) && serr.Reason == spec.ReasonUnknownSession
		if ctx.Err() != nil || !(gone || errors.Is(err, errLost) || errors.Is(err, errStreamLost) || errors.Is(err, errNotSent)) {
			return nil, g.endTask(ctx, params, err)
		}
		g.mu.Lock()
		reached := uc.heard != heard
		g.mu.Unlock()
		if lost.IsZero() {
			g.log.Warn().Msg("upstream connection lost while its task ran; asking for the result again")
		}
		if lost.IsZero() || reached {
			lost = time.Now()
		}
		if time.Since(lost) > g.opts.ConnectTimeout {
			return nil, g.endTask(ctx, params, err)
		}
		switch {
		case errors.Is(err, errStreamLost):
			backoff.Sleep(ctx, takeUpDelay) // the same connection may answer
		case gone:
			p.close() // the supervisor opens a new session
			g.replaced(ctx, p)
		default:
			g.replaced(ctx, p)
		}
	}
}

// forgetCall takes the upstream request id out of the calls.
func (g *Gateway) forgetCall(id spec.ID) {
	g.mu.Lock()
	delete(g.calls, string(id))
	g.mu.Unlock()
}

// endTask is the error a call waiting for an upstream task ends with: its
// context's, after cancelling the task upstream (tasks/cancel with params, of
// either era), or err as the client sees it.
func (g *Gateway) endTask(ctx context.Context, params json.RawMessage, err error) error {
	if ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.opts.ConnectTimeout)
		defer cancel()
		if p, perr := g.current(cctx); perr == nil {
			_, _ = p.call(cctx, methodTasksCancel, params)
		}
		return ctx.Err()
	}
	var serr *spec.Error
	if errors.As(err, &serr) {
		return serr
	}
	return upstreamErr(err)
}

// The task methods of 2025-11-25 the gateway asks an upstream.
const (
	methodTasksResult = "tasks/result"
	methodTasksCancel = "tasks/cancel"
)
