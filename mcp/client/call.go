package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/internal/token"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// CallOptions configure one call. Nil means none. The call reads them until
// it returns (Go: until done gets its answer): they must not change meanwhile.
type CallOptions struct {
	// Progress receives the call's progress notifications, each exactly once and in
	// order across any number of resumes, and those of the awaits of a deferred
	// answer it follows. It runs on the connection's reader goroutine: it must
	// not block for long.
	Progress func(Progress)
	// Policy is called when the server makes the call resumable (and again if a
	// later policy replaces the token).
	Policy func(Policy)
	// Resumed is called each time a resume of the call is sent on a new
	// connection, before what the server kept for it arrives; the server may
	// still refuse it (a *ResumeError).
	Resumed func()
	// ResumeAccepted is called once the server has taken up a resume of the call:
	// when the first message of the call arrives on the new connection (a
	// progress notification, or its final response when that is not a
	// *ResumeError), before it is handled. A call resumed while its tool sends
	// nothing is confirmed only by its response. Never called for a resume the
	// server refuses.
	ResumeAccepted func()
	// Idempotent says the call may run twice on the server: when its connection is
	// lost before the server made it resumable, it is sent again (same id) on the
	// next connection instead of failing with ErrNotResumable. For read-only tools.
	// A plain server's progress then starts again from the beginning.
	// (Unneeded with a server that takes call keys: see Resent.)
	Idempotent bool
	// Resent is called when the call is sent again because its connection,
	// or its stream, was lost before its policy came: a tools/call with a key,
	// an Idempotent call, or one the server never got (its write failed, or
	// the server refused it for a session it no longer knows; at most 3
	// times). The client names every tools/call with a random key when the
	// server takes keys (io.mcp-resume/key): such a call is sent again with
	// its key, and the server attaches it to the call it already runs (or runs
	// it, if the first never arrived) instead of running the tool twice.
	Resent func()

	// OnRequest answers the server's requests that belong to this call, and
	// the input requests of its input_required answers and of its task,
	// instead of the Options' handlers: params and result as they are on the
	// wire (Options.OnRequest). It runs on a goroutine of its own, with a
	// context that ends with the call or Close and carries ctx's values.
	OnRequest func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	// OnLog receives the log messages (notifications/message) that belong to
	// this call, each once, instead of Options.OnLog.
	OnLog func(mcpgo.LoggingMessageNotificationParams)
	// ReturnInputRequired, when set, is asked when the server answers the
	// call input_required (multi round-trip requests, 2026-07-28): true
	// returns that answer as it is (its caller answers the questions and
	// sends the call again itself: a gateway whose own client takes such
	// answers), false has the handlers answer them, as without it.
	ReturnInputRequired func() bool

	// Envelope sends the request in the 2026-07-28 era with that envelope,
	// where the server speaks the era (Modern): on a client of that era, and
	// on one whose session is of the 2025 era (Options.Discover), where the
	// request then goes without the session (over Streamable HTTP, with the
	// headers that mirror it) and is resumed in the same era. Nil: the
	// request goes in the client's era.
	Envelope *Envelope
	// AsTask makes a tools/call a task of the server's, which outlives its
	// connection, and follows it to its end: the call asks for one (2025-11-25:
	// params.task; in the 2026-07-28 era the request declares the Tasks
	// extension, and the server decides), and Call returns the task's result
	// when the server made it one. Meanwhile the task's progress goes to
	// Progress, its questions to the handlers (a 2026 task's are answered
	// with tasks/update), and a call whose ctx ends cancels it
	// (tasks/cancel). A request that does not ask for a task never declares
	// the extension: a task the client does not follow is none it can use.
	AsTask bool
	// OnTask is told the task's id when the server made the call a task
	// (AsTask), before the client follows it.
	OnTask func(id string)

	// KeepDeferred returns a deferred answer (a server's answer that the tool
	// runs on, naming the tool to call for its result: DeferredOf) as it is,
	// for a caller that hands it on to a client that cannot wait either.
	// Without it, Call follows the answer itself, as this package's doc
	// says, and returns the call's own result.
	KeepDeferred bool
	// OnDeferred is told each deferred answer Call follows, before it calls
	// the tool the answer names.
	OnDeferred func(Deferred)

	// await: the request is an await of a deferred answer, a wait: sent
	// without a key, and sent again as it is when its connection is lost
	// (with Idempotent).
	await bool
}

// Envelope is the 2026-07-28 envelope of one request (CallOptions.Envelope):
// what its _meta declares besides the protocol version and the client's
// info, which are the client's.
type Envelope struct {
	// Capabilities is the clientCapabilities the request declares, a JSON
	// object; nil for the client's own. The client adds SEP-975 as the era's
	// extension (unless Options.NoResumable), and the Tasks extension exactly
	// when the call is AsTask.
	Capabilities json.RawMessage
	// LogLevel names the level from which the server sends the request's log
	// messages (io.modelcontextprotocol/logLevel); "" for none: a request of
	// the era that names none gets none.
	LogLevel string
}

// Progress is one notifications/progress of a call.
type Progress struct {
	Progress float64
	Total    float64 // 0 when the server gave none
	Message  string
	Seq      uint64 // io.mcp-resume/seq, 0 from a plain server
}

// Policy is what notifications/requests/resumePolicy said about a call.
type Policy struct {
	RequestID spec.ID
	Token     string // a secret: whoever holds it can resume or cancel the request
	MinWait   time.Duration
	MaxWait   time.Duration // 0 when the server named none
}

// operation is one Call: every request it sends (a round that its
// input_required answers ask for again, the requests that follow the task it
// became) is a call of the client's, and the server's messages that belong
// to it go to its handlers.
type operation struct {
	ctx  context.Context // the Call's: its handlers' values
	opts *CallOptions    // the Call's
	// seen keys the server's requests of the Call's that its handlers
	// answered: a request sent again after a resume is answered once, and
	// one of another Call with the same id (servers that number their
	// requests per session, on a new session) is a request of its own.
	seen string
	// Guarded by Client.st: the task it became ("" for none), and the last
	// sequence number of the task's progress under its first request's token.
	task    string
	lastSeq uint64
}

// handles reports whether op has handlers of its own for the server's
// messages that belong to it.
func (op *operation) handles() bool {
	return op != nil && (op.opts.OnRequest != nil || op.opts.OnLog != nil)
}

// call is one request of this client in flight.
type call struct {
	id       spec.ID
	key      string // string(id)
	method   string
	opts     *CallOptions // never nil; shared with its Call (the caller's, not copied)
	internal bool         // initialize: belongs to one link, not resumed
	op       *operation   // the Call it is a request of; nil for the client's own

	// done and resend are the channels of a call a goroutine waits for (run,
	// exchange: made there; nil for a waiter's): done is closed by finish,
	// resend (capacity 1) gets a value when an Idempotent or keyed call lost
	// before its policy is to be sent again. A waiter's call is told of both
	// by wake, under Client.st, and resendDue says which.
	done, resend chan struct{}
	wake         func()
	resendDue    bool        // guarded by Client.st
	callKey      string      // the call's io.mcp-resume/key, "" for none
	header       http.Header // HTTP headers of its own (Mcp-Param-*), nil for none
	// env is the 2026-07-28 envelope it was sent with (its resumes and its
	// cancel carry it too); nil for a request of the session's era.
	env    map[string]json.RawMessage
	plain  bool // progress came before any policy: the server runs it plainly (guarded by Client.st)
	result json.RawMessage
	err    error

	// Guarded by Client.st.
	finished bool
	sent     bool    // written on some link
	link     *link   // the link it was last sent or resumed on; nil while waiting to resume
	resuming bool    // its current link carries requests/resume, not the original
	retries  int     // times its resume on link was sent again (retryLater)
	policy   *Policy // nil until the server makes it resumable
	lastSeq  uint64  // highest sequence number received
	// callbacks: its progress callbacks under way (each counted under mu
	// with the sequence number it delivers): the call returns only once
	// they are done, so that a caller that passes its progress on (the
	// gateway) has passed every value on before its result, even when the
	// value came on a connection the result did not.
	callbacks int
	heard     time.Time // when the server last showed this request alive, for maxWait
	// unsent: its last write failed before the server could have it, or the
	// server refused it (a session it forgot); resends counts the times it
	// was sent again for that. empty counts the take-ups in a row of its
	// event stream that delivered nothing.
	unsent  bool
	resends int
	empty   int

	// unconfirmed: the resume on link has had no message of the call back yet
	// (ResumeAccepted is due). Guarded by Client.st.
	unconfirmed bool

	// span is the call's CLIENT span (nil when the client does not trace),
	// traceparent and tracestate its W3C trace context, sent with the call
	// and its resumes. began is when the call started, target what it names
	// (a tool, a prompt, a resource) and version the protocol version it went
	// in, for its span and its Operation (began is zero when the client
	// neither traces nor measures). Set before the call is sent.
	span                    trace.Span
	traceparent, tracestate string
	began                   time.Time
	target, version         string
}

func (c *Client) newCall(method string, opts *CallOptions) *call {
	id := spec.ID(strconv.Quote(c.prefix + strconv.FormatUint(c.nextID.Add(1), 10)))
	if opts == nil {
		opts = &noOptions
	}
	return &call{id: id, key: string(id), method: method, opts: opts}
}

// settle waits until cl's progress callbacks under way are done (see
// call.callbacks).
func (c *Client) settle(cl *call) {
	c.update(func(*state) {
		for cl.callbacks > 0 {
			c.quiet.Wait() // releases the lock while it waits
		}
	})
}

// forget removes cl from the calls in flight.
func (c *Client) forget(cl *call) {
	c.update(func(st *state) { st.forget(cl) })
}

// CallTool calls a tool and returns its result, whatever happens to the
// connection in between: a call the server made resumable is resumed on a new
// connection after every loss until it ends or its maxWait passes, and a
// deferred answer is followed to the result (CallOptions.KeepDeferred returns
// it as it is). A tool that fails returns a result with IsError set, not an
// error. Cancelling ctx sends notifications/cancelled (with the resume token,
// which reaches the request even while it is detached; a deferred call is
// stopped with its await tool) and returns ctx's error.
func (c *Client) CallTool(ctx context.Context, name string, args any, opts *CallOptions) (*mcpgo.CallToolResult, error) {
	params := map[string]json.RawMessage{"name": quote(name)}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("client: tools/call %s arguments: %w", name, err)
		}
		params["arguments"] = b
	}
	raw, err := c.Call(ctx, spec.MethodToolsCall, params, opts)
	return toolResult(spec.MethodToolsCall, raw, err)
}

// toolResult reads raw, a tool's result that a request of method answered
// (err: its error).
func toolResult(method string, raw json.RawMessage, err error) (*mcpgo.CallToolResult, error) {
	if err != nil {
		return nil, err
	}
	res, err := mcpgo.ParseCallToolResult(&raw)
	if err != nil {
		return nil, &ProtocolError{Problem: method + " result: " + err.Error(), Raw: raw}
	}
	return res, nil
}

// Call sends a request and returns its result (raw JSON) or its error (a
// *spec.Error for a JSON-RPC error, a *ResumeError when a resume was refused, or
// one matching ErrNotResumable, ErrGaveUp, ErrClosed). params must encode as a
// JSON object or be nil. A tools/call, and any call with CallOptions.Progress,
// carries a progress token of its own. With Options.TracerProvider, the call
// is a CLIENT span below the span ctx carries, sent in its _meta; with
// Options.OnOperation, an Operation once it is over.
//
// A tools/call, prompts/get or resources/read that the server answers
// input_required (multi round-trip requests, 2026-07-28) has its questions
// answered by the handlers and is sent again, as a new request with the
// answers and the server's requestState, until the server answers otherwise
// (or CallOptions.ReturnInputRequired says to return it): Call returns that
// answer. A tools/call answered with a deferred answer is followed (the tool
// it names is called until it answers otherwise; its input_required answers
// are answered by the handlers) unless CallOptions.KeepDeferred: Call
// returns the call's own result. A tools/call in the 2026-07-28 era carries, over Streamable HTTP,
// the Mcp-Param-* headers its tool's x-mcp-header annotations name, for a
// tool ListTools listed; a tool that ListTools left out for its invalid
// annotations is not called (an error matching ErrInvalidTool).
//
// The server's requests and log messages that belong to the call go to its
// own handlers (CallOptions.OnRequest, OnLog) when it has them. One belongs
// to a call when the connection says which request's stream carried it
// (Streamable HTTP), when it names the call's task
// (_meta["io.modelcontextprotocol/related-task"]), or, on a connection that
// says neither (stdio, WebSocket, a session's GET stream), when the call is
// the only one in flight with handlers of its own. The others go to the
// Options' handlers.
func (c *Client) Call(ctx context.Context, method string, params any, opts *CallOptions) (json.RawMessage, error) {
	x, err := c.begin(ctx, method, params, opts)
	if err != nil {
		return nil, err
	}
	defer x.close()
	return x.rounds(ctx, nil)
}

// Go is Call with no goroutine waiting for the answer: it sends the request
// (waiting, as Call does, for a connection to send it on) and returns, and
// done gets what Call would have returned once the answer came, on a
// goroutine of its own (on Go's caller's when the request could not be
// sent). What comes after a first answer that is not the last (a deferred
// answer followed, input_required answered, a task followed) runs on that
// goroutine as Call runs it. A gateway's call to its upstream thus holds no
// goroutine while it waits.
func (c *Client) Go(ctx context.Context, method string, params any, opts *CallOptions, done func(json.RawMessage, error)) {
	x, err := c.begin(ctx, method, params, opts)
	if err != nil {
		done(nil, err)
		return
	}
	// While the call waits its params are held encoded, not as the map the
	// request was made of: the rounds that may follow take them up again.
	fields := x.fields
	x.fields = nil
	if x.held, err = json.Marshal(fields); err != nil {
		x.close()
		done(nil, fmt.Errorf("client: %s params: %w", method, err))
		return
	}
	c.requestAsync(ctx, x, fields, func(res json.RawMessage, first *call, err error) {
		raw, err := x.rounds(ctx, &reply{res, first, err})
		x.close()
		done(raw, err)
	})
}

// callRun is one Call's request as it goes out, from begin to its close.
type callRun struct {
	c      *Client
	op     *operation
	method string
	fields map[string]json.RawMessage
	held   json.RawMessage // fields encoded, in their place while a Go call waits
	tool   *mcpgo.Tool
	env    map[string]json.RawMessage
	asTask bool
}

// reply is the outcome of one request of a Call: its result, the request,
// its error.
type reply struct {
	res   json.RawMessage
	first *call
	err   error
}

// begin makes a Call's request ready to send: its params, its envelope, its
// tool, and its operation registered for the server's messages that belong
// to it (until close).
func (c *Client) begin(ctx context.Context, method string, params any, opts *CallOptions) (*callRun, error) {
	fields, err := paramFields(params)
	if err != nil {
		return nil, fmt.Errorf("client: %s params: %w", method, err)
	}
	op := &operation{ctx: ctx, opts: opts}
	if opts == nil {
		op.opts = &noOptions
	}
	if op.handles() {
		op.seen = "op" + strconv.FormatUint(c.nextOp.Add(1), 10) + ":"
	}
	if e := op.opts.Envelope; e != nil && e.Capabilities != nil && !json.Valid(e.Capabilities) {
		return nil, errNotJSON
	}
	asTask := op.opts.AsTask && method == spec.MethodToolsCall
	env := c.envelopeOf(op.opts.Envelope, asTask)
	var tool *mcpgo.Tool
	if method == spec.MethodToolsCall && env != nil && c.era.modern {
		if tool, err = c.listedTool(fields); err != nil {
			return nil, err
		}
	}
	if asTask && env == nil {
		// [2025-11-25 tasks] a request becomes a task when it carries
		// params.task.
		if _, ok := fields["task"]; !ok {
			fields = maps.Clone(fields)
			if fields == nil {
				fields = map[string]json.RawMessage{}
			}
			fields["task"] = json.RawMessage("{}")
		}
	}
	if op.handles() {
		c.update(func(st *state) { st.reg.ops[op] = struct{}{} })
	}
	return &callRun{c: c, op: op, method: method, fields: fields, tool: tool, env: env, asTask: asTask}, nil
}

// close lets go of the Call's operation.
func (x *callRun) close() {
	if x.op.handles() {
		x.c.update(func(st *state) { delete(st.reg.ops, x.op) })
	}
}

// rounds sends the Call's requests, from its first (pre, when it was sent
// and answered already: Go) to the one whose answer is the Call's.
func (x *callRun) rounds(ctx context.Context, pre *reply) (json.RawMessage, error) {
	c, op, method, fields, tool, env, asTask := x.c, x.op, x.method, x.fields, x.tool, x.env, x.asTask
	var err error
	// taken takes up the fields held encoded (Go) before a round needs them.
	taken := func() {
		if x.held != nil {
			fields = nil
			_ = json.Unmarshal(x.held, &fields) // encoded from a map: it decodes
			x.held = nil
		}
	}
	// awaiting is the deferred answer being followed (nil before one came):
	// fields and tool are its await call's then.
	var awaiting *Deferred
	// An await is a wait: made again when its connection is lost.
	awaitOpts := new(*op.opts)
	awaitOpts.Idempotent, awaitOpts.await = true, true
	// held is the deferred call's last message this client has (by the
	// call's sequence numbers, which the awaits' messages carry): each await
	// acknowledges it, so that what an await's stream lost on the way comes
	// with the next, and what came twice is passed on once.
	var held atomic.Uint64
	if f := op.opts.Progress; f != nil {
		awaitOpts.Progress = func(p Progress) {
			if p.Seq > 0 {
				for {
					h := held.Load()
					if p.Seq <= h {
						return // sent again: passed on already
					}
					if held.CompareAndSwap(h, p.Seq) {
						break
					}
				}
			}
			f(p)
		}
	}
	var sent time.Time // when the last await was sent
	failures := 0      // awaits in a row that failed without an answer
	for round := 1; ; round++ {
		if awaiting != nil {
			if wait := minAwait - time.Since(sent); wait > 0 && !backoff.Sleep(ctx, wait) {
				c.abandon(ctx, op, *awaiting, env)
				return nil, ctx.Err()
			}
			sent = time.Now()
		}
		opts := op.opts
		if awaiting != nil {
			opts = awaitOpts
			taken()
			fields = maps.Clone(fields)
			fields["_meta"], _ = json.Marshal(map[string]uint64{spec.MetaAck: held.Load()})
		}
		var res json.RawMessage
		var first *call
		if pre != nil {
			res, first, err = pre.res, pre.first, pre.err
			pre = nil
		} else {
			taken()
			res, first, err = c.request(ctx, op, method, fields, tool, opts, env)
		}
		if err == nil && asTask {
			if id, modern := createdTask(res); id != "" {
				res, err = c.followTask(ctx, op, first, id, modern, env)
			}
		}
		if err != nil && awaiting != nil {
			switch {
			case ctx.Err() != nil:
				c.abandon(ctx, op, *awaiting, env)
				return nil, ctx.Err()
			case awaitAgain(err) && failures < maxAwaitFailures:
				failures++
				round = 0
				if !backoff.Sleep(ctx, awaitPause) {
					c.abandon(ctx, op, *awaiting, env)
					return nil, ctx.Err()
				}
				continue
			}
			return nil, fmt.Errorf("client: %s %s, awaiting a deferred answer: %w", method, awaiting.Tool, err)
		}
		if err != nil || !spec.RetriesInput(method) {
			return res, err
		}
		in, asked := spec.AskedInput(res)
		if !asked {
			if method != spec.MethodToolsCall || op.opts.KeepDeferred {
				return res, nil
			}
			d, found, err := deferredOf(res)
			switch {
			case err != nil:
				return nil, err
			case !found:
				return res, nil
			}
			// The call runs on: its result comes from the await tool.
			if f := op.opts.OnDeferred; f != nil {
				f(d)
			}
			awaiting, failures, round = &d, 0, 0
			c.update(func(*state) { held.Store(max(held.Load(), first.lastSeq)) }) // what the call's own stream brought
			fields, x.held = d.fields(false), nil
			if tool, err = c.awaitTool(fields, env); err != nil {
				return nil, err
			}
			continue
		}
		// A question of the call while it is awaited is answered here: its
		// await is no request the caller could send again.
		if f := op.opts.ReturnInputRequired; f != nil && awaiting == nil && f() {
			return res, nil
		}
		if round == maxInputRounds {
			return nil, fmt.Errorf("client: %s: the server asked for input %d times in a row", method, round)
		}
		answers, err := c.fulfil(ctx, op, in)
		switch {
		case ctx.Err() != nil:
			if awaiting != nil {
				c.abandon(ctx, op, *awaiting, env)
			}
			return nil, ctx.Err()
		case err != nil:
			return nil, fmt.Errorf("client: %s: %w", method, err)
		}
		// [2026-07-28 MRTR] The retry carries the answers and the
		// requestState exactly as the server sent it; one that sent none gets
		// none back.
		taken()
		fields = maps.Clone(fields)
		if fields == nil {
			fields = map[string]json.RawMessage{}
		}
		fields["inputResponses"], _ = json.Marshal(answers)
		delete(fields, "requestState")
		if state, found := member(res, "requestState"); found && string(state) != "null" {
			fields["requestState"] = bytes.Clone(state)
		}
	}
}

// noOptions are the options of a Call given none; never changed.
var noOptions CallOptions

// maxInputRounds bounds the rounds of one call that the server answers
// input_required.
const maxInputRounds = 32

// request sends one request of op, of method with params fields (a round of
// Call, or a request that follows its task) in the envelope env (nil: the
// session's era), and returns its result and the request; tool, when not
// nil, is the tool a tools/call names, whose x-mcp-header annotations name
// its Mcp-Param-* headers.
func (c *Client) request(ctx context.Context, op *operation, method string, fields map[string]json.RawMessage, tool *mcpgo.Tool, opts *CallOptions, env map[string]json.RawMessage) (json.RawMessage, *call, error) {
	cl, msg, err := c.newRequest(ctx, op, method, fields, tool, opts, env)
	if err != nil {
		return nil, cl, err
	}
	res, err := c.run(ctx, cl, msg)
	c.obs.end(cl, res, err)
	return res, cl, err
}

// newRequest makes request's call and its message.
func (c *Client) newRequest(ctx context.Context, op *operation, method string, fields map[string]json.RawMessage, tool *mcpgo.Tool, opts *CallOptions, env map[string]json.RawMessage) (*call, []byte, error) {
	cl := c.newCall(method, opts)
	cl.op, cl.env = op, env
	if method == spec.MethodToolsCall && !opts.await && c.takesKeys() {
		cl.callKey = newCallKey()
	}
	if c.obs != nil {
		c.obs.start(ctx, cl, target(method, fields), c.versionOf(env))
	}
	if cl.span == nil && c.opts.PassTraceContext {
		if sp := trace.SpanFromContext(ctx); sp.SpanContext().IsValid() {
			cl.traceparent, cl.tracestate = mcptrace.Context(sp)
		}
	}
	p, msg, err := cl.encode(fields)
	if err != nil {
		err = fmt.Errorf("client: %s params: %w", method, err)
		c.obs.end(cl, nil, err)
		return cl, nil, err
	}
	if tool != nil {
		cl.header = paramHeaders(tool, p)
	}
	return cl, msg, nil
}

// encode returns cl's params, made of fields in its envelope, and its
// request.
func (cl *call) encode(fields map[string]json.RawMessage) (json.RawMessage, []byte, error) {
	p, err := encodeParams(fields, cl, cl.method == spec.MethodToolsCall || cl.opts.Progress != nil, cl.env)
	if err != nil {
		return nil, nil, err
	}
	return p, spec.EncodeRequest(cl.id, cl.method, p), nil
}

// requestAsync is request, for Go's first request (x's, of fields), with no
// goroutine waiting for the answer: then gets what request returns, on a
// goroutine of its own (on the caller's when the request could not be sent).
// The request is made again of x.held, fields encoded, when it is to be sent
// again, not kept meanwhile.
func (c *Client) requestAsync(ctx context.Context, x *callRun, fields map[string]json.RawMessage, then func(json.RawMessage, *call, error)) {
	cl, msg, err := c.newRequest(ctx, x.op, x.method, fields, x.tool, x.op.opts, x.env)
	if err != nil {
		then(nil, cl, err)
		return
	}
	w := &waiter{c: c, cl: cl, held: x.held, ctx: ctx, then: then}
	var added bool
	c.update(func(st *state) {
		if added = st.add(cl); added {
			cl.wake = w.wake
		}
	})
	if !added {
		c.obs.end(cl, nil, ErrClosed)
		then(nil, cl, ErrClosed)
		return
	}
	w.mu.Lock()
	w.stop = context.AfterFunc(ctx, w.cancelled)
	if err := c.send(ctx, cl, msg); err != nil {
		w.endLocked(nil, err)
		return
	}
	w.mu.Unlock()
}

// waiter waits for a call sent by requestAsync, with no goroutine: its call
// wakes it (call.wake) when it finished or is to be sent again, and its
// context's end cancels it, as run's loop does.
type waiter struct {
	c    *Client
	cl   *call
	held json.RawMessage // the request's params' fields, encoded
	ctx  context.Context
	then func(json.RawMessage, *call, error)
	stop func() bool // the AfterFunc of ctx

	mu   sync.Mutex // held for each step: one at a time, in order
	over bool       // guarded by mu: ended
}

// wake is called, under the client's lock, when the call finished or is to
// be sent again: the step runs on a goroutine of its own, counted (added under
// the lock) among those Close waits for.
func (w *waiter) wake() { w.c.wg.Go(w.step) }

// step takes up what woke the waiter: the call's end, or its sending again.
func (w *waiter) step() {
	w.mu.Lock()
	if w.over {
		w.mu.Unlock()
		return
	}
	if w.answeredLocked() {
		return
	}
	var resend bool
	w.c.update(func(*state) { resend, w.cl.resendDue = w.cl.resendDue, false })
	if resend {
		if w.cl.span != nil {
			w.cl.span.AddEvent(mcptrace.EventResent)
		}
		if err := w.c.send(w.ctx, w.cl, w.request()); err != nil {
			w.endLocked(nil, err)
			return
		}
	}
	w.mu.Unlock()
}

// request is the waiter's request, made again of what it was made of: its
// params' fields (held), its call's id, key, trace context and envelope.
func (w *waiter) request() []byte {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(w.held, &fields) // encoded from a map: it decodes
	_, msg, _ := w.cl.encode(fields)    // encoded once already: it encodes
	return msg
}

// cancelled: the call's context ended before its answer, which is then
// abandoned, as run abandons it.
func (w *waiter) cancelled() {
	w.mu.Lock()
	if w.over {
		w.mu.Unlock()
		return
	}
	if w.answeredLocked() { // meanwhile
		return
	}
	w.c.cancelCall(w.cl, context.Cause(w.ctx))
	w.endLocked(nil, w.ctx.Err())
}

// answeredLocked ends the wait with the call's answer, and reports true,
// when the call finished; w.mu is then unlocked.
func (w *waiter) answeredLocked() bool {
	var finished bool
	w.c.update(func(*state) { finished = w.cl.finished })
	if !finished {
		return false
	}
	w.c.settle(w.cl)
	w.endLocked(w.cl.result, w.cl.err)
	return true
}

// endLocked ends the wait with res and err, unlocks w.mu, and hands them on.
func (w *waiter) endLocked(res json.RawMessage, err error) {
	w.over = true
	w.mu.Unlock()
	if w.stop != nil {
		w.stop()
	}
	w.c.forget(w.cl)
	w.c.obs.end(w.cl, res, err)
	w.then(res, w.cl, err)
}

// run sends cl's request msg (again, when it must be) and waits for its end.
func (c *Client) run(ctx context.Context, cl *call, msg []byte) (json.RawMessage, error) {
	cl.done, cl.resend = make(chan struct{}), make(chan struct{}, 1)
	var added bool
	if c.update(func(st *state) { added = st.add(cl) }); !added {
		return nil, ErrClosed
	}
	defer c.forget(cl)
	for {
		if err := c.send(ctx, cl, msg); err != nil {
			return nil, err
		}
		select {
		case <-cl.done:
			c.settle(cl)
			return cl.result, cl.err
		case <-cl.resend:
			if cl.span != nil {
				cl.span.AddEvent(mcptrace.EventResent)
			}
		case <-ctx.Done():
			c.cancelCall(cl, context.Cause(ctx))
			return nil, ctx.Err()
		}
	}
}

// send writes a call's request on the current link, waiting for one if
// needed. A failed write drops the link, whose loss settles the call
// (call.strand): the server may have it, so it is not sent again unless the
// server cannot have it, or the call has a key or is Idempotent.
func (c *Client) send(ctx context.Context, cl *call, msg []byte) error {
	for {
		l, err := c.current(ctx)
		if err != nil {
			return err
		}
		_, post := l.conn.(headerWriter)
		var finished, moved bool
		c.update(func(st *state) {
			if finished, moved = cl.finished, st.conn.link != l; finished || moved {
				return
			}
			cl.sent, cl.link = true, l
			if post {
				// A POST may last as long as its request (a server that
				// answers with a JSON body at the end): the call waits for its
				// answer, or for its ctx, meanwhile. Added under the lock:
				// Close waits for it.
				c.wg.Add(1)
			}
		})
		switch {
		case finished:
			return nil
		case moved:
			continue // lost meanwhile
		case !post:
			c.transmit(l, cl, msg)
			return nil
		}
		go func() {
			defer c.wg.Done()
			c.transmit(l, cl, msg)
		}()
		return nil
	}
}

// transmit writes cl's request msg on l. A failed write drops l; when it
// failed before the server could have the request, the call is marked so,
// and l's loss sends it again.
func (c *Client) transmit(l *link, cl *call, msg []byte) {
	err := l.send(msg, cl.header)
	if err == nil {
		return
	}
	if !errors.Is(err, transport.ErrMaybeSent) {
		c.update(func(*state) {
			if cl.link == l {
				cl.unsent = true
			}
		})
	}
	_ = l.conn.Close()
}

// takesKeys reports whether the server advertised call keys.
func (c *Client) takesKeys() (keys bool) {
	c.update(func(st *state) {
		keys = st.server.caps != nil && slices.Contains(st.server.caps.Extensions, spec.ExtensionKey)
	})
	return keys
}

// newCallKey returns a random call key (token.New: 256 bits, never beginning
// with '-'). The key becomes the call's resume token, which `mcp-resume call
// -v` prints for `mcp-resume status ID TOKEN`.
func newCallKey() string { return token.New() }

// aborter is a connection that cancels a request of the 2026-07-28 era by
// closing its stream (Streamable HTTP).
type aborter interface {
	Abort(id []byte)
}

// cancelCall tells the server a call is abandoned, best effort: with its resume
// token when it has one, so that it reaches the request wherever it is attached.
// A call of the 2026-07-28 era over Streamable HTTP is cancelled by closing its
// stream, and told with notifications/cancelled only when it has a token (a
// server of that era that does not resume requests has no session to tell).
func (c *Client) cancelCall(cl *call, cause error) {
	var sent bool
	var l, on *link
	var token string
	c.update(func(st *state) {
		sent, l, on = cl.sent, st.conn.link, cl.link
		token = cl.callKey // a key is its call's token from the start
		if cl.policy != nil {
			token = cl.policy.Token
		}
	})
	if !sent {
		return
	}
	if cl.env != nil && on != nil {
		if a, ok := on.conn.(aborter); ok {
			// [2026-07-28 transports] closing a request's stream cancels it.
			a.Abort(cl.id)
			if token == "" {
				return
			}
		}
	}
	if l == nil {
		if token == "" {
			return // nobody can reach it: its connection is gone and it was not resumable
		}
		ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
		defer cancel()
		var err error
		if l, err = c.current(ctx); err != nil {
			return
		}
	}
	reason := "cancelled by the client"
	if cause != nil {
		reason = cause.Error()
	}
	b, _ := json.Marshal(spec.CancelledParams{RequestID: cl.id, Reason: reason, ResumeToken: token})
	// In the client's era: on a session of the 2025 era, where a request of
	// the 2026-07-28 era sent beside it is named by its token too.
	l.write(spec.EncodeRequest(nil, spec.MethodCancelled, withEnvelope(b, c.era.envelope)))
}

// Status asks the server for the state of a request by its id and resume token
// (requests/getStatus). The request may be another client's, or one left behind
// by an earlier process.
func (c *Client) Status(ctx context.Context, id spec.ID, token string) (*spec.GetStatusResult, error) {
	raw, err := c.Call(ctx, spec.MethodGetStatus, spec.GetStatusParams{RequestID: id, ResumeToken: token}, nil)
	if err != nil {
		return nil, err
	}
	var res spec.GetStatusResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, &ProtocolError{Problem: "getStatus result: " + err.Error(), Raw: raw}
	}
	return &res, nil
}

// Cancel cancels a request by its id and resume token (notifications/cancelled
// with the token, this project's extension), wherever it is attached: for
// example one a crashed process left running.
func (c *Client) Cancel(ctx context.Context, id spec.ID, token, reason string) error {
	l, err := c.current(ctx)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(spec.CancelledParams{RequestID: id, Reason: reason, ResumeToken: token})
	if err := l.conn.Write(ctx, spec.EncodeRequest(nil, spec.MethodCancelled, withEnvelope(b, c.era.envelope))); err != nil {
		return fmt.Errorf("client: cancel %s: %w", id, err)
	}
	return nil
}
