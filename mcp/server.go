package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/internal/warngate"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
)

// Cluster is what a Server needs of the cluster it is an instance of
// (Options.Cluster; package cluster's Node): the engine's side, and the
// routing of a client's answer to the instance that sent the server-to-client
// request it answers (ids of those requests name their instance).
type Cluster interface {
	resume.Cluster
	// Forward sends answer to instance, whose OnAnswer function takes it.
	Forward(ctx context.Context, instance string, answer []byte) error
	// OnAnswer sets the receiver of the answers other instances forward here.
	OnAnswer(fn func(answer []byte) error)
}

// Options configure a Server. Nil means defaults.
type Options struct {
	// Store holds queued messages and results. Default: none, and the engine keeps
	// them in memory itself (see resume.New).
	Store resume.Store
	// Engine configures the resume engine (maxWait, retention, budgets, caps).
	Engine *resume.Options
	// Cluster, when set, makes the server one instance of several sharing
	// Store: it is the engine's Cluster (in place of Engine.Cluster), and
	// routes clients' answers between the instances. Nil: a single instance.
	Cluster Cluster
	// Sessions, when set, shares the sessions with the cluster's other
	// instances: each is written there as it answers initialize, and a
	// transport takes up one another instance started (Shared, Unpark). Nil:
	// a session is this instance's alone.
	Sessions SessionShare
	// DefaultPolicy applies to tools not named in Tools. The zero value is Always.
	DefaultPolicy Policy
	// QuickCall is how long a call of Mode Always runs as a plain call before
	// it becomes resumable, unless it sends a message (a notification, a
	// request to its client) sooner, which makes it resumable first. A call
	// that answers within it is answered as a plain MCP server answers (no
	// resume policy, no event stream, nothing kept or stored): its client
	// could not have resumed it, holding no token for it yet (the HTTP
	// transport holds a stream's first events about as long, FirstFlush, to
	// send them with the answer). A call the client named with a key (its
	// token) and a task become resumable at once. 0 means DefaultQuickCall;
	// negative: every call of Mode Always is resumable from its start.
	QuickCall time.Duration
	// AnswerWithin, when positive, is how long a tools/call may run before it
	// is answered with a deferred answer: a normal tool result that says the
	// tool is still running, what it last reported, and how to get its result,
	// by calling the await tool (DefaultAwaitTool, which New adds to the
	// server's tools) with the handle it gives. The call runs on, detached,
	// for the await tool; a client that waits for no longer than it (the
	// TypeScript SDK's 60 s, and the clients built on it) gets its result
	// however long it runs. Tasks, and tools of policy Never, are not
	// deferred. 0: never.
	AnswerWithin time.Duration
	// DetachTools makes a request that has no client cost its tool's own
	// goroutine and little else: the tool of a call that is, or may become,
	// a request runs on a goroutine of its own, and the goroutine that
	// dispatched the call through mcp-go (whose frames hold 16 KB of stack)
	// leaves once the request has no client (its client went; a task; a run
	// after a restart). When the tool returns, the call passes through
	// mcp-go's dispatch again, where the core answers with the tool's result
	// instead of running it: mcp-go's after-hooks, output validation, multi
	// round-trip fulfilment and the tool middlewares registered before New
	// see the result as for any call, but such a middleware, and mcp-go's
	// before-hooks, see that call start twice. What they get of a tools/call
	// is a context that does not end with the call (a cancelled call
	// reaches its tool, whose context, and its wait for a rate or a place,
	// are the call's): mcp-go's context for it, if it could end, would stay
	// registered in the call's while the tool runs. (A task tool of mcp-go's
	// own, AddTaskTool, which no middleware sees, runs on that context: with
	// DetachTools it is not cancelled with its call.) Off: every tool runs under
	// mcp-go's dispatch, on the goroutine that dispatched its call. The
	// binary's serve and gateway turn it on (they register no such hook or
	// middleware).
	DetachTools bool
	// Tools sets a Policy per tool name.
	Tools map[string]Policy
	// PolicyOf, when set, adjusts the policy Tools or DefaultPolicy gives a
	// tool to the tool as it is now (the gateway's upstream's task support,
	// which its tool list says and may change). It is called for every
	// tools/call and tools/list.
	PolicyOf func(tool string, p Policy) Policy
	// Rates keeps the buckets of the policies' Rate; nil: in memory
	// (NewMemoryRates). A cluster's instances share one.
	Rates Rates
	// Limits holds the places of the policies' Concurrency; nil: the
	// server's own. Servers that serve the same tools under other names (a
	// gateway's aggregated endpoint and its upstream's own) share one, with
	// LimitName.
	Limits *Limits
	// LimitName is the name a tool's rate bucket and concurrency places go by
	// in Rates and Limits; nil: the tool's own.
	LimitName func(tool string) string
	// OnRefused, when set, is told of every tools/call refused for a limit
	// (reason rate_limited or concurrency_limit, its tool's; too_many_requests,
	// MaxConcurrentPerPrincipal; overloaded, Overloaded), with its tool ("" for
	// a name the server has no tool of), and whether its session had a
	// principal: for a metric. It must be quick.
	OnRefused func(tool string, authenticated bool, reason spec.Reason)
	// Logger receives the core's logs. Nil means none. Tokens are never logged.
	Logger *zerolog.Logger
	// TokenFailureBurst and TokenFailureRefill limit failed token checks
	// (brute-force protection): a getStatus, resume, cancel, retry or task
	// request by token answered not_found spends one failure from the bucket of
	// its session, which holds TokenFailureBurst failures, and one from the bucket
	// of the session's principal, or, for a session without one (no
	// authentication), of its remote address (SessionOptions.Remote), which holds
	// 100 times as many. Each bucket regains one failure every TokenFailureRefill.
	// While either bucket of a session is empty, its token checks are not made:
	// getStatus, resume and the rest are answered rate_limited (retryable, with
	// error.data.retryAfter in seconds) and cancels by token are ignored, except
	// for a request the session carries (started there and still running, or
	// attached there), which it is never refused. So a session that guesses is
	// limited on its own; others behind its address are limited only once the
	// address's whole allowance is gone (a new session per guess), and never for
	// their own requests. Authenticated sessions are not limited by address, so
	// that one principal's failures never hold back another's. 0 means the
	// defaults (DefaultTokenFailureBurst, DefaultTokenFailureRefill); a negative
	// value turns the limit off.
	TokenFailureBurst  int
	TokenFailureRefill time.Duration
	// MaxConcurrentPerPrincipal caps the requests of each principal in flight
	// (received and not yet answered by their handler, resumable or not, attached
	// or detached), across all its sessions. Past it a request is answered at
	// once with -32023 too_many_requests (retryable, SEP-3304's shape) and not run. Sessions
	// without a principal are not counted. 0 means
	// DefaultMaxConcurrentPerPrincipal; negative: no cap. (Options.Engine's
	// MaxLivePerPrincipal caps the resumable ones among them.)
	MaxConcurrentPerPrincipal int
	// Overloaded, when set, reports whether the process is too short of
	// memory to take new calls: while it is, a new tools/call is answered at
	// once with -32023 overloaded (retryable after OverloadedRetry, SEP-3304's
	// shape) and not run; the calls running go on, and every other request
	// (getStatus, resume, cancel, the await tool) is served. Past the engine's
	// MemoryShort new calls only lose their resume policy; a call that runs
	// plain still holds what it runs with until it ends. Called at every new
	// tools/call: it must be cheap.
	Overloaded func() bool
	// TaskTTL is a task's lifetime from its creation when its client asks for
	// none (a 2026-07-28 task always; a 2025-11-25 one without params.task.ttl):
	// it is kept that long, running or ended, polled or not, then expires. 0
	// means DefaultTaskTTL. MaxTaskTTL caps what a 2025-11-25 client may ask
	// for (0: DefaultMaxTaskTTL); a task's ttl is reported, the same on every
	// read, as its task object's ttl (ttlMs).
	TaskTTL, MaxTaskTTL time.Duration
	// TracerProvider, when set, traces every request the server receives (a
	// SERVER span per request, one trace per resumable request across its
	// resumes, other instances and restarts: see docs/observability.md). Nil
	// means no tracing at all: no span is made, nothing is read for one.
	TracerProvider trace.TracerProvider
	// OnOperation, when set, is told of every request the server received
	// once it is over, measured as the semantic conventions' histogram
	// mcp.server.operation.duration measures it (Operation): for a resumable
	// request or a task, as long as its span lasts. It runs on the request's
	// goroutine, or the engine's: it must be quick (an observation of a
	// histogram). Nil: nothing is measured.
	OnOperation func(Operation)
	// Audit, when set, is told of every tools/call the server received, once,
	// when it is over (answered, failed, cancelled, lost; a resumable
	// request or a task when its span ends), and of every one it refused
	// (audit.Event; docs/observability.md, "Audit trail"). Only tools/call is
	// audited. It runs on the call's goroutine, or the engine's: it must not
	// block (audit.Trail's Record does not). Nil: nothing is audited, nothing
	// is read for it.
	// What an event carries of a call's arguments is its tool's policy's
	// (Policy.Arguments).
	Audit func(audit.Event)
}

// DefaultTaskTTL and DefaultMaxTaskTTL are the defaults of Options.TaskTTL and
// Options.MaxTaskTTL.
const (
	DefaultTaskTTL    = time.Hour
	DefaultMaxTaskTTL = 24 * time.Hour
)

// DefaultQuickCall is the default of Options.QuickCall.
const DefaultQuickCall = time.Millisecond

// DefaultMaxConcurrentPerPrincipal is the default of
// Options.MaxConcurrentPerPrincipal.
const DefaultMaxConcurrentPerPrincipal = 1000

// Server serves an mcp-go MCPServer with resumable requests on any number of
// connections. It is safe for concurrent use. Close cancels the resumable
// requests and waits for every call's handler, but a plain call (policy Never)
// ends only with its connection, which Close leaves to whoever serves it: close
// the transports first (their Close), or Close waits for such a call's tool.
type Server struct {
	srv  *server.MCPServer
	eng  *resume.Engine
	opts Options
	log  zerolog.Logger
	caps spec.ServerCapability
	// tracer makes the requests' spans (Options.TracerProvider); nil when
	// the server does not trace.
	tracer trace.Tracer
	onOp   func(Operation)   // Options.OnOperation
	audit  func(audit.Event) // Options.Audit

	idPrefix string        // for server-to-client request ids, unique per process
	cluster  Cluster       // the other instances (Options.Cluster); nil for none
	nextID   atomic.Uint64 // for server-to-client request ids
	// nextSession numbers stateless sessions (SessionOptions.Stateless).
	nextSession atomic.Uint64
	answers     answers // server-to-client requests waiting for their answers
	// headerTools caches whether a tool's schema binds Mcp-Param-* headers
	// (schemaKey -> bool; see headerBound).
	headerTools sync.Map

	wg    sync.WaitGroup // handler goroutines, which may outlive their connection
	pool  *workers       // the goroutines calls run on
	tools *workers       // the goroutines the tools of calls that may become requests run on (call_tool.go)
	calls atomic.Int64   // calls being handled (Calls)
	fail  *failLimiter   // failed token checks; nil: no limit

	admission admission                   // requests in flight by principal
	table     atomic.Pointer[policyTable] // the policies in effect (SetPolicies)
	rates     Rates                       // Options.Rates
	slots     *Limits                     // the calls of each tool running (Policy.Concurrency)
	keys      keyHolds                    // keyed calls in flight that are not requests yet
	// notStarted spaces the log of calls the engine made no request of, by
	// why (call.notStartedLocked).
	notStarted [notStartedKinds]warngate.Gate

	reruns reruns // restartable requests run again here
	closed atomic.Bool
	// draining: Drain was called; a new tools/call is refused (shutting_down).
	draining atomic.Bool
	// awaiting counts the await tool's calls being handled, which a drain
	// does not wait for (Running).
	awaiting atomic.Int64
	tasks    bool // some tool may become a task (Options.tasksOffered)
	// awaitTool is the await tool's name (Options.AnswerWithin); "" without.
	awaitTool string
	taskList  taskIndex // the 2025-11-25 tasks created here, for tasks/list
}

// New returns a Server around srv. srv's tools, resources and prompts are served
// unchanged; their calls become resumable by Options.DefaultPolicy and Options.Tools,
// through a tool middleware New adds to srv (srv.Use). Serve srv only through one
// Server. New recovers the requests a durable Store holds (resume.New); its
// error is resume.New's: a Store that cannot be read, an Options.Cluster whose
// Store the instances cannot share (not a resume.Lister and a resume.Claimer).
func New(srv *server.MCPServer, opts *Options) (*Server, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.QuickCall == 0 {
		o.QuickCall = DefaultQuickCall
	}
	log := zerolog.Nop()
	if o.Logger != nil {
		log = *o.Logger
	}
	eo := resume.Options{}
	if o.Engine != nil {
		eo = *o.Engine
	}
	eo.Logger = &log
	if eo.Ended == nil {
		eo.Ended = endedResponse
	}
	s := &Server{}
	if o.TracerProvider != nil {
		if f := eo.OnLost; f != nil {
			eo.OnLost = func(rec resume.Record, cause error) { s.reruns.lost(rec, cause); f(rec, cause) }
		} else {
			eo.OnLost = s.reruns.lost
		}
	}
	if o.Audit != nil {
		if f := eo.OnLost; f != nil {
			eo.OnLost = func(rec resume.Record, cause error) { s.auditLost(rec, cause); f(rec, cause) }
		} else {
			eo.OnLost = s.auditLost
		}
	}
	var p [6]byte
	_, _ = rand.Read(p[:])
	*s = Server{
		srv: srv, opts: o, log: log,
		idPrefix:  "mr-" + hex.EncodeToString(p[:]) + "-",
		pool:      newWorkers(),
		tools:     newWorkers(),
		fail:      newFailLimiter(o.TokenFailureBurst, o.TokenFailureRefill),
		admission: admission{inflight: make(map[string]int)},
		keys:      keyHolds{m: make(map[string]*keyHold)},
		rates:     o.Rates,
		slots:     o.Limits,
	}
	if s.slots == nil {
		s.slots = NewLimits()
	}
	if s.rates == nil {
		s.rates = NewMemoryRates()
	}
	s.SetPolicies(o.DefaultPolicy, o.Tools)
	s.answers.s, s.reruns.s = s, s
	if o.TracerProvider != nil {
		s.tracer = o.TracerProvider.Tracer(instrumentation)
	}
	s.onOp, s.audit = o.OnOperation, o.Audit
	if cl := o.Cluster; cl != nil {
		// One instance of a cluster: its server-to-client request ids name it, so
		// that another instance forwards the client's answers here.
		eo.Cluster = cl
		s.cluster = cl
		s.idPrefix = "mr-" + cl.Self() + "-"
		eo.OnRestartable = s.reruns.all
	}
	// A tool written for the 2025 era asks its client through mcp-go's
	// RequestElicitation, RequestSampling and ListRoots; for a 2026-era request
	// the core turns those into input_required rounds (MRTR, call_mrtr.go).
	server.WithLegacyServerInitiatedRequests()(srv)
	eng, err := resume.New(context.Background(), o.Store, &eo)
	if err != nil {
		return nil, err
	}
	s.eng = eng
	if cl := o.Cluster; cl != nil {
		cl.OnAnswer(s.answers.fromPeer)
	}
	eff := s.eng.Options()
	s.caps = spec.ServerCapability{
		MaxWait:    int64(eff.MaxWait / time.Second),
		MinWait:    int64(eff.MinWait / time.Second),
		Extensions: []string{spec.ExtensionSeq, spec.ExtensionAck, spec.ExtensionKey},
	}
	if o.AnswerWithin > 0 {
		s.addAwaitTool(srv)
	}
	s.tasks = s.opts.tasksOffered()
	if s.opts.MaxConcurrentPerPrincipal == 0 {
		s.opts.MaxConcurrentPerPrincipal = DefaultMaxConcurrentPerPrincipal
	}
	s.admission.limit = s.opts.MaxConcurrentPerPrincipal
	srv.Use(s.middleware)
	s.reruns.all()
	return s, nil
}

// Engine returns the resume engine, for inspection.
func (s *Server) Engine() *resume.Engine { return s.eng }

// Calls returns the number of calls being handled: their handler runs, or its
// answer is being queued or written. It drops when the answer is out (or, for a
// cancelled call, when its handler has returned and nothing was sent).
func (s *Server) Calls() int { return int(s.calls.Load()) }

// Drain begins a shutdown that loses no call: from now on a tools/call that
// would start a new call is refused with shutting_down (-32603), which tells a
// client to send it again elsewhere (mcp-resume's clients do, on a new
// connection), while everything that reaches a call already here is served as
// before: resumes, getStatus, a keyed call sent again, MRTR retries, awaits,
// cancels, tasks/*. Running says when the calls are done; Abandon ends those
// that outlive the drain.
func (s *Server) Drain() { s.draining.Store(true) }

// Running returns the number of calls whose handlers still run (a detached or
// deferred request's too), but the await tool's: what a drain waits for.
func (s *Server) Running() int { return int(s.calls.Load() - s.awaiting.Load()) }

// Abandon ends the requests still running at the end of a drain with the
// server_stopped error, stored for their clients to resume, but those that run
// again elsewhere when keep is true (restartable tools, with a durable or shared
// store: the next process, or the other instances of a cluster once this one
// has left). Close follows it. It returns how many it ended and how many it
// left to run again.
func (s *Server) Abandon(keep bool) (ended, left int) { return s.eng.Abandon(keep) }

// Close stops the server: every running request's context is cancelled, and Close
// waits for their handlers to return. Connections are closed by whoever owns them
// (Serve returns when its connection closes); a plain call (not a request of
// the engine: policy Never, or answered before it became one) ends with its
// connection, so close the connections first (end Serve's ctx), or Close waits
// for such calls' tools too.
func (s *Server) Close() {
	s.closed.Store(true)
	s.eng.Close()
	s.wg.Wait()
	s.reruns.mu.Lock()
	restarted := s.reruns.restarted
	s.reruns.mu.Unlock()
	if restarted != nil {
		restarted.shutdown(false)
	}
	s.pool.stop()
	s.tools.stop()
}

// SessionOptions configure one session (a connection served by ServeWith, or a
// NewSession). Nil means defaults.
type SessionOptions struct {
	// Principal is who the session's client authenticated as; "" when the
	// transport has no authentication. Every resumable request the session starts
	// is bound to it: getStatus, resume and cancel by token from a session of
	// another principal get exactly the answer an unknown request gets.
	Principal string
	// Remote is where the session's client connects from, for the limit on
	// failed token checks of sessions without a principal: the remote IP address
	// on HTTP and WebSocket. Empty means this process's own client (stdio,
	// in-process): all such sessions share one bucket.
	Remote string
	// Transport names the transport the session's client came on
	// (TransportStdio, TransportHTTP, TransportWebSocket), for its requests'
	// spans; "" for another.
	Transport string
	// Stateless: the session carries requests of the 2026-07-28 era only, which
	// need no session (a Streamable HTTP POST of that era is one such session):
	// it costs no goroutine, and a 2025-era request on it is refused.
	Stateless bool
	// ToolRefusal, when set, is asked before each tools/call of the session:
	// a non-nil refusal refuses the call with its JSON-RPC error (the
	// credentials the session's connection was opened with lack the tool's
	// scope: insufficient_scope). A stream's own credentials (GatedStream)
	// are asked first.
	ToolRefusal func(tool string) *transport.Refusal

	// ID is the session's id: its transport's name for it (Streamable HTTP's
	// Mcp-Session-Id), by which the cluster's other instances find it when it
	// is shared (Options.Sessions, Server.Shared). Default: a new random one.
	ID string
}

// Serve serves one connection until it closes or ctx ends, then closes it. Requests
// made resumable on it stay alive, detached, for the engine's maxWait; the others
// are cancelled.
func (s *Server) Serve(ctx context.Context, conn transport.Conn) error {
	return s.ServeWith(ctx, conn, nil)
}

// ServeWith is Serve for a session with options (its principal).
//
// It is the one-stream case of a Session: the connection is the session's only
// stream, and every answer goes to it.
func (s *Server) ServeWith(ctx context.Context, conn transport.Conn, opts *SessionOptions) error {
	st := newConnStream(conn)
	ss := &Session{c: newConnState(s, st, false, opts)}
	defer func() {
		_ = conn.Close()
		ss.Close(false)
		st.release()
	}()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	for {
		raw, err := conn.Read(ctx)
		if err != nil {
			var tl *transport.TooLargeError
			if errors.As(err, &tl) {
				ss.c.logger().Warn().Int("limit", tl.Limit).Msg("message too large; skipped")
				ss.c.replyError(st, nil, spec.NewError(spec.CodeInvalidRequest, spec.ReasonMessageTooLarge, tl.Error()))
				continue
			}
			if errors.Is(err, io.EOF) || errors.Is(err, transport.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		m, derr := spec.Decode(raw)
		if derr != nil {
			ss.c.debug().Str("error", derr.Message).Msg("bad message")
			ss.c.replyError(st, derr.ID, derr)
			continue
		}
		ss.Handle(m, raw, st)
	}
}

// connStream is a whole connection as one Stream (stdio, WebSocket). Once the
// session ended it lets its connection go (release): the calls that outlive
// their connection (detached requests) keep the stream they came on, and
// through it would keep the connection's transport state (a WebSocket's
// buffers, 8 KB and more) for as long as they run.
type connStream struct {
	conn atomic.Pointer[transport.Conn] // nil once released
	// notified: a notification was written since the last response (see
	// transport.Drainer).
	notified atomic.Bool
	// respond serializes responses that may wait for a drain: a response
	// written while another one waits would follow notifications written
	// since, unread, without waiting itself.
	respond sync.Mutex
}

// drainMax bounds the wait for a client to read notifications before a response:
// long enough for a client on a loaded machine (20 ms lost the last progress
// notification when the machine was busy with a build), short enough that a
// client that does not read costs its response little more than it costs
// itself.
const drainMax = 100 * time.Millisecond

// The flag is set once a notification is written, not before, and responses
// take it one at a time: a response written meanwhile (another call's) that
// took the flag and found nothing to wait for, or that waits, would otherwise
// leave a notification's own response free to follow it into the client's
// same read.
func newConnStream(conn transport.Conn) *connStream {
	s := &connStream{}
	s.conn.Store(&conn)
	return s
}

// release lets the connection go: writes from now on fail, as they would to
// the closed connection.
func (s *connStream) release() { s.conn.Store(nil) }

func (s *connStream) Write(ctx context.Context, m Message) error {
	p := s.conn.Load()
	if p == nil {
		return transport.ErrClosed
	}
	conn := *p
	if d, ok := conn.(transport.Drainer); ok && m.Kind == KindResponse {
		s.respond.Lock()
		defer s.respond.Unlock()
		if s.notified.Swap(false) {
			d.Drain(ctx, drainMax)
		}
	}
	err := conn.Write(ctx, m.Data)
	if m.Kind != KindResponse {
		s.notified.Store(true)
	}
	return err
}
