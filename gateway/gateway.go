// Package gateway puts the resume core in front of any MCP server: it is an MCP
// client of an upstream server (a stdio child, Streamable HTTP or WebSocket) and
// serves the upstream's tools, resources, prompts and completions as an mcp-go
// server that mcp.New wraps like any other. A tools/call runs on the upstream
// while the gateway's own client is gone: the upstream's progress, logs and
// questions (sampling, elicitation, roots) of the call become the call's
// messages in the core, with everything that gives (sequence numbers, resumes
// on any transport, tasks, both protocol eras, durable results, clusters).
//
// Its upstream side is the project's Go client, mcp/client, the one `mcp-resume
// call` uses: the upstream calls' resumes, keys, acks, silences, reconnections
// and upstream tasks are the client's. The gateway keeps what is its own: the
// mirror of the upstream's lists and subscriptions, and the relay of each call
// to its own client (calls.go).
//
// The gateway speaks the 2025-11-25 revision to its upstream, the one every
// server of the day speaks, and calls an upstream that also speaks 2026-07-28
// in that era; its own clients get both eras.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	resumemcp "github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/dial"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// Reasons (error.data.reason) of calls the upstream could not finish.
const (
	// ReasonUpstreamLost: the upstream went away (its child exited, its HTTP
	// stream broke beyond repair) while it ran the call.
	ReasonUpstreamLost spec.Reason = "upstream_lost"
	// ReasonUpstreamUnavailable: no upstream connection could be made in time.
	ReasonUpstreamUnavailable spec.Reason = "upstream_unavailable"
	// ReasonUnattributed: the upstream asked a question (sampling, elicitation,
	// roots) that the gateway could not tie to one call.
	ReasonUnattributed spec.Reason = "unattributed_request"
)

// StartError is the error of an upstream connection that could not be made or
// initialized (New's, when the upstream is not there yet or refuses the
// gateway).
type StartError struct{ Err error }

func (e *StartError) Error() string { return "gateway: initializing the upstream: " + e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Protocol is the revision the gateway asks its upstream for.
const Protocol = "2025-11-25"

// Options configure a Gateway. Either Command or URL is set.
type Options struct {
	// Command starts the upstream as a stdio child: the program and its
	// arguments. Its environment is stdio.Environ(Env): the variables a program
	// needs (stdio.BaseEnv) and those Env names (NAME: this process's, or
	// NAME=value), never the rest of this process's (its API keys, tokens and
	// credentials); Dir is its working directory; its stderr goes to Stderr
	// (nil: discarded).
	Command []string
	Env     []string
	Dir     string
	Stderr  io.Writer

	// URL is a Streamable HTTP upstream (http://, https://) or a WebSocket one
	// (ws://, wss://); Header is sent with every request, or with the
	// WebSocket's handshake (Authorization for an upstream that needs a
	// token); Client makes the HTTP requests (default: http.DefaultClient).
	// Header, and what Client's and Wrap's round trippers add, go to URL's
	// origin only: a redirect elsewhere is not followed
	// (transport.CheckRedirect).
	URL    string
	Header http.Header
	Client *http.Client
	// Wrap, when set, wraps the round tripper of every HTTP request to the
	// upstream, a WebSocket's handshake included, over Header: an OAuth
	// client (oauth.Transport) that logs in, renews its token on a 401 and
	// sends the request again. The gateway's own credentials: a client's
	// are never sent upstream.
	Wrap func(http.RoundTripper) http.RoundTripper
	// WSPing is how long a WebSocket upstream's connection may carry nothing
	// before a keepalive ping; a pong half as late takes the connection for
	// dead. Default ws.ClientPing (8 s: a silent upstream noticed within 12 s).
	WSPing time.Duration

	// Restartable says whether a tool is safe to run twice: its call is sent again
	// to the next upstream when the one running it went away, instead of failing
	// with upstream_lost.
	Restartable func(tool string) bool

	// StreamIdle is how long an HTTP upstream's event stream, taken up with
	// Last-Event-ID after it broke, may carry nothing before it is closed and
	// taken up again (which also replays what the upstream stored but did not
	// send). Default 30s.
	StreamIdle time.Duration
	// Silence bounds how long an HTTP upstream's stream (or a request waiting
	// for its answer) may carry no byte before it is taken for lost: 0 means
	// the transport's default, 2.5 times the keepalive the upstream announces
	// on the stream (the gateway asks httptransport.ClientKeepAlive on its
	// calls' streams: 12.5 s), else httptransport.DefaultSilence. A call the
	// upstream made resumable is then resumed; a laptop that slept or a NAT
	// that forgot the flow never leaves a call hanging, nor turns into a
	// deferred answer.
	Silence time.Duration

	// ConnectTimeout bounds starting and initializing one upstream connection,
	// and how long a call waits for one. Default 30s.
	ConnectTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts to start the
	// upstream again (doubling). Defaults 100ms and 5s.
	MinBackoff, MaxBackoff time.Duration

	// Version is the gateway's version, in its clientInfo upstream.
	Version string
	Logger  *zerolog.Logger

	// Name names the upstream among others (a gateway of several, Aggregate):
	// in the logs, and the server's name until the upstream says its own.
	Name string
	// Background makes New return at once, the first connection made (and
	// tried again, MinBackoff to MaxBackoff apart) in the background: until
	// it is, the gateway's server offers every capability and no tools,
	// resources or prompts, Up is false, and its lists appear (with a list
	// change) once the upstream answers. A gateway of several upstreams
	// starts each so: one that is not there never holds back the others.
	Background bool
	// OnMirrored, when set, is told each time the gateway's lists changed
	// (the upstream's tools, resources, templates or prompts): an Aggregate
	// follows them. It runs on the gateway's own goroutine.
	OnMirrored func()

	// TracerProvider, when not nil, makes each request sent upstream a
	// CLIENT span, whose trace context the upstream request carries in its
	// _meta: below the core's span of the client's request it serves (a
	// tools/call, resources/read, prompts/get, ..., and the tasks/* that
	// follow an upstream task), a root for the gateway's own (initialize,
	// the lists it mirrors). Nil: the trace context of the core's span, when
	// there is one, is passed on as it is.
	TracerProvider trace.TracerProvider
	// OnOperation, when set, is told of each request sent upstream once it
	// is over, as the semantic conventions' mcp.client.operation.duration
	// measures it (metrics.ClientOperations, metrics.OTelClientOperations).
	// It runs on the goroutine that sent the request: it must not block.
	OnOperation func(client.Operation)
}

func (o *Options) withDefaults() Options {
	r := *o
	if r.ConnectTimeout <= 0 {
		r.ConnectTimeout = 30 * time.Second
	}
	if r.StreamIdle <= 0 {
		r.StreamIdle = 30 * time.Second
	}
	if r.WSPing <= 0 {
		r.WSPing = ws.ClientPing
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 100 * time.Millisecond
	}
	if r.MaxBackoff < r.MinBackoff {
		r.MaxBackoff = max(5*time.Second, r.MinBackoff)
	}
	if r.Version == "" {
		r.Version = "dev"
	}
	if r.Restartable == nil {
		r.Restartable = func(string) bool { return false }
	}
	return r
}

// Gateway is one upstream server served through an mcp-go server. It is safe
// for concurrent use; Close ends the upstream connection, which fails the
// requests in flight upstream (shutting_down), and waits for the gateway's own
// goroutine.
type Gateway struct {
	opts Options
	log  zerolog.Logger
	srv  *server.MCPServer
	// link is the gateway's client of the upstream (its calls, their
	// resumes, keys, acks and silences, its connections) and the first
	// connection's initialize result; nil until that connection is made
	// (Options.Background).
	link     atomic.Pointer[link]
	upstream dial.Endpoint // Options.URL or Options.Command
	// connected: the upstream's connection is up (false while the client
	// makes a new one).
	connectedNow atomic.Bool
	// tried is closed once the first attempt to reach the upstream is over,
	// made (and its lists mirrored) or failed (firstTried).
	tried     chan struct{}
	triedOnce sync.Once

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the supervisor

	mirrorQ chan struct{} // capacity 1: the lists changed upstream
	connQ   chan struct{} // capacity 1: a new upstream connection was made

	mu    sync.Mutex
	lists map[string]string // a digest of each list as last mirrored
	// taskSupport: each upstream tool's execution.taskSupport, as last
	// mirrored, when the upstream does tasks itself (nil when it does not).
	taskSupport map[string]mcpgo.TaskSupport
	// mirrored names the tools the last mirror of the upstream's list set;
	// the others (the core's own) stay when it changes.
	mirrored map[string]bool
	subs     subscriptions
	// served is what the last mirror served of each list (the gateway's own
	// tools aside), for an Aggregate.
	served Served
}

// link is a gateway's upstream client, once it connected.
type link struct {
	up   *client.Client
	init *mcpgo.InitializeResult
}

// client is the gateway's client of its upstream; nil before the first
// connection.
func (g *Gateway) client() *client.Client {
	if l := g.link.Load(); l != nil {
		return l.up
	}
	return nil
}

// errNotYet is the error of a request to an upstream that was never reached.
var errNotYet = fmt.Errorf("%w: the upstream has not been reached yet", client.ErrNoConnection)

// New starts the upstream, initializes it and mirrors its lists. An error here
// is the first connection's: a command that does not start, a URL that does not
// answer, an initialize that fails (with Options.Background, those are logged
// and tried again, and New fails only on options it cannot use).
func New(ctx context.Context, opts *Options) (*Gateway, error) {
	o := opts.withDefaults()
	if (len(o.Command) == 0) == (o.URL == "") {
		return nil, errors.New("gateway: give an upstream command or a URL, not both")
	}
	upstream, err := upstreamOf(&o)
	if err != nil {
		return nil, err
	}
	log := zerolog.Nop()
	if o.Logger != nil {
		log = *o.Logger
	}
	if o.Name != "" {
		log = log.With().Str("upstream", o.Name).Logger()
	}
	g := &Gateway{opts: o, upstream: upstream, log: log, mirrorQ: make(chan struct{}, 1), connQ: make(chan struct{}, 1), lists: map[string]string{}, subs: subscriptions{byURI: map[string]map[subscriber]struct{}{}}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.tried = make(chan struct{})
	if o.Background {
		g.srv = g.newServer(nil)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			if g.reach() {
				g.supervise()
			}
		}()
		return g, nil
	}
	up, err := client.Connect(ctx, g.dial, g.clientOptions())
	if err != nil {
		g.cancel()
		return nil, &StartError{err}
	}
	g.linked(up)
	g.srv = g.newServer(up.InitializeResult())
	if err := g.mirror(ctx); err != nil {
		_ = up.Close()
		g.cancel()
		return nil, err
	}
	g.wasTried()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.supervise()
	}()
	return g, nil
}

// firstTried is closed once the first attempt to reach the upstream is over:
// the connection made and its lists mirrored, or the attempt failed (a
// gateway started in the background tries again meanwhile).
func (g *Gateway) firstTried() <-chan struct{} { return g.tried }

func (g *Gateway) wasTried() { g.triedOnce.Do(func() { close(g.tried) }) }

// reach makes the first connection of a gateway started in the background,
// trying again until it is made or the gateway is closed, and mirrors the
// upstream. It reports whether it connected.
func (g *Gateway) reach() bool {
	defer g.wasTried()
	l := backoff.Start(g.opts.MinBackoff, g.opts.MaxBackoff, 0, 0)
	for said := false; ; {
		ctx, cancel := context.WithTimeout(g.ctx, g.opts.ConnectTimeout)
		up, err := client.Connect(ctx, g.dial, g.clientOptions())
		cancel()
		if err == nil {
			g.linked(up)
			if said {
				g.log.Info().Msg("the upstream is reachable now")
			}
			g.resubscribe(g.ctx) // what its clients subscribed to meanwhile
			if err := g.mirror(g.ctx); err != nil && g.ctx.Err() == nil {
				g.log.Warn().Err(err).Msg("following the upstream's lists; trying again")
				select { // supervise lists again
				case g.mirrorQ <- struct{}{}:
				default:
				}
			}
			return true
		}
		if g.ctx.Err() != nil {
			return false
		}
		g.wasTried()
		if !said {
			g.log.Warn().Str("error", err.Error()).Msg("the upstream is not reachable; trying again (its tools are not served until it is)")
			said = true
		}
		if !l.Pause(g.ctx) {
			return false
		}
	}
}

// linked records the upstream's client once its first connection is made.
func (g *Gateway) linked(up *client.Client) {
	g.link.Store(&link{up: up, init: up.InitializeResult()})
	g.connectedNow.Store(true)
	g.connected()
}

// upstreamOf is the endpoint o names: its URL, else its command.
func upstreamOf(o *Options) (dial.Endpoint, error) {
	if o.URL == "" {
		return dial.Command(o.Command...)
	}
	ep, err := dial.Parse(o.URL)
	if err != nil {
		return dial.Endpoint{}, fmt.Errorf("gateway: the upstream: %w", err)
	}
	return ep, nil
}

// clientOptions are the options of the gateway's client of its upstream. It
// declares what its own clients may answer (sampling, elicitation, roots):
// servers that offer tools only to capable clients offer them all. An HTTP
// or WebSocket upstream that offers SEP-975 makes each call resumable (with
// the ack extension: it keeps what it sent until a resume acknowledges it);
// a stdio child, whose every connection is a new process, is asked for
// none. A stdio child or an HTTP upstream that also speaks 2026-07-28 gets
// tools/call and prompts/get in that era (callTool); over WebSocket calls
// stay in the session's era. The client connects again whenever the
// upstream goes, so that its list changes and resource updates are heard.
func (g *Gateway) clientOptions() *client.Options {
	o := &g.opts
	kind := g.upstream.Kind()
	var attrs []attribute.KeyValue
	if o.Name != "" {
		attrs = []attribute.KeyValue{mcptrace.Upstream.String(o.Name)}
	}
	return &client.Options{
		SpanAttributes:  attrs,
		ClientInfo:      mcpgo.Implementation{Name: "mcp-resume-gateway", Version: o.Version},
		ProtocolVersion: Protocol,
		Capabilities: map[string]any{
			"sampling":    map[string]any{},
			"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
			"roots":       map[string]any{"listChanged": true},
		},
		OnRequest: g.unattributed,
		OnLog: func(p mcpgo.LoggingMessageNotificationParams) {
			g.log.Debug().Any("params", p).Msg("upstream log message of no call")
		},
		OnNotification: g.notification,
		NoResumable:    kind == dial.Stdio,
		Discover:       kind != dial.WebSocket,
		KeepConnected:  true,
		OnReconnected: func() {
			g.connectedNow.Store(true)
			select {
			case g.connQ <- struct{}{}:
			default:
			}
		},
		OnConnectionLost: func(err error) {
			g.connectedNow.Store(false)
			g.log.Warn().AnErr("error", err).Msg("upstream connection ended; starting it again")
		},
		MinBackoff:       o.MinBackoff,
		MaxBackoff:       o.MaxBackoff,
		ReconnectTimeout: o.ConnectTimeout,
		StreamIdle:       o.StreamIdle,
		TracerProvider:   o.TracerProvider,
		OnOperation:      o.OnOperation,
		PassTraceContext: true,
		Transport:        kind.Transport(),
	}
}

// Server is the mcp-go server to serve with mcp.New.
func (g *Gateway) Server() *server.MCPServer { return g.srv }

// TaskSupport says whether the upstream does tasks itself (it declares the
// tasks capability, or a tool with execution.taskSupport) and, if so, the
// task support of tool ("forbidden" for a tool that says none). The gateway
// may make any call of an upstream that does not a task of its own; one that
// does has said which of its tools may be, and must be.
func (g *Gateway) TaskSupport(tool string) (support mcpgo.TaskSupport, declared bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.taskSupport == nil {
		return "", false
	}
	if s, ok := g.taskSupport[tool]; ok && s != "" {
		return s, true
	}
	return mcpgo.TaskSupportForbidden, true
}

// PolicyOf is the core's Options.PolicyOf for the gateway's tools: an upstream
// that does tasks itself decides which of its tools may be tasks (optional),
// must be (required) or may not (forbidden, or none said); the gateway's own
// policy p decides the rest, and everything for an upstream that does no
// tasks, any call of which may become a task of the gateway's.
func (g *Gateway) PolicyOf(tool string, p resumemcp.Policy) resumemcp.Policy {
	support, declared := g.TaskSupport(tool)
	if !declared {
		return p
	}
	switch support {
	case mcpgo.TaskSupportRequired:
		p.Task = resumemcp.TaskRequired
		if up := g.client(); p.Mode == resumemcp.Always && up != nil && up.Modern() {
			// The upstream makes the call its task when it chooses, and the
			// gateway's call becomes its task then (Promote): before, the
			// call's questions may be its input_required answer (SEP-2663). A
			// call the upstream holds longer than escalateAfter without a
			// word becomes a task anyway.
			p.Mode, p.After = resumemcp.After, escalateAfter
		}
	case mcpgo.TaskSupportOptional:
		p.Task = resumemcp.AsTask
	default:
		p.Task = resumemcp.NoTask
	}
	return p
}

// escalateAfter bounds how long a 2026 client's call of a task-required tool
// runs before it is a task of the gateway's, when its upstream of the
// 2026-07-28 era has not made it one yet.
const escalateAfter = 100 * time.Millisecond

// ServerInfo is the upstream's name and version (Options.Name before the
// first connection of a gateway started in the background).
func (g *Gateway) ServerInfo() mcpgo.Implementation {
	if l := g.link.Load(); l != nil {
		return l.init.ServerInfo
	}
	return mcpgo.Implementation{Name: g.opts.Name}
}

// Up reports whether the upstream is connected now.
func (g *Gateway) Up() bool { return g.link.Load() != nil && g.connectedNow.Load() }

// Name is Options.Name.
func (g *Gateway) Name() string { return g.opts.Name }

// Connections is how many upstream connections were made (1 + restarts; 0
// before the first).
func (g *Gateway) Connections() uint64 {
	up := g.client()
	if up == nil {
		return 0
	}
	return 1 + uint64(up.Reconnects())
}

// Close ends the upstream connection (a child is stopped) and waits for the
// gateway's goroutines.
func (g *Gateway) Close() error {
	g.cancel()
	g.wg.Wait()
	if up := g.client(); up != nil {
		return up.Close()
	}
	return nil
}

// dial opens a transport connection to the upstream: a WebSocket is one
// session, whose loss (a close, a ping unanswered for half the ping
// interval, which is how a silent connection shows) ends the connection;
// over Streamable HTTP a lost or silent stream costs its request alone
// (ReportStreamLoss); a stdio child is started again.
func (g *Gateway) dial(ctx context.Context) (transport.Conn, error) {
	o := &g.opts
	return g.upstream.Dial(ctx, &dial.Options{Header: o.Header, Client: o.Client, Wrap: o.Wrap,
		Protocol: Protocol, ReportStreamLoss: true, Silence: o.Silence, WSPing: o.WSPing,
		Env: o.Env, Dir: o.Dir, Stderr: o.Stderr})
}

// connected logs the upstream connection just made.
func (g *Gateway) connected() {
	up := g.client()
	if init := up.InitializeResult(); init != nil {
		g.log.Info().Str("upstreamServer", init.ServerInfo.Name).Str("upstreamVersion", init.ServerInfo.Version).
			Str("protocol", init.ProtocolVersion).Bool("modern", up.Modern()).Msg("upstream connected")
	}
}

// supervise follows the upstream until Close: it lists again when the
// upstream says its lists changed, and after each new connection (a child
// started again, a server that restarted may serve other lists), where it
// also subscribes to the resources the gateway's clients want.
func (g *Gateway) supervise() {
	// A listing that failed (a timeout, an error of the upstream's) is
	// tried again, MinBackoff to MaxBackoff apart (jittered, as every retry
	// loop's pause), until one succeeds: the
	// upstream's lists are not left unserved until its next list change.
	pauses := backoff.Start(g.opts.MinBackoff, g.opts.MaxBackoff, 0, 0)
	var again <-chan time.Time
	for {
		select {
		case <-g.mirrorQ:
		case <-again:
		case <-g.connQ:
			g.connected()
			g.resubscribe(g.ctx)
		case <-g.ctx.Done():
			return
		}
		again = nil
		if err := g.mirror(g.ctx); err != nil && g.ctx.Err() == nil {
			g.log.Warn().Err(err).Msg("following the upstream's lists; trying again")
			again = time.After(pauses.Next())
		} else {
			pauses = backoff.Start(g.opts.MinBackoff, g.opts.MaxBackoff, 0, 0)
		}
	}
}

// request sends a request of a client (tools aside) to the upstream.
func (g *Gateway) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	up := g.client()
	if up == nil {
		return nil, upstreamErr(errNotYet)
	}
	raw, err := up.Call(ctx, method, params, nil)
	return raw, upstreamErr(err)
}

// upstreamErr is what a client gets when the upstream answered err, or could
// not answer: the upstream's own error (mcp-go answers a handler's error of
// anything but a tool with -32603 and the error's text: the upstream's
// message, not our rendering of it), upstream_lost when it went away before
// it answered, upstream_unavailable when there was no upstream to ask.
func upstreamErr(err error) error {
	var e *spec.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return errors.New(e.Message)
	}
	return lostErr(err)
}

// lostErr is the error of a request the upstream did not answer (err: the
// client's), with a reason.
func lostErr(err error) error {
	switch {
	case errors.Is(err, client.ErrClosed):
		return spec.ShuttingDown()
	case errors.Is(err, client.ErrNoConnection):
		return spec.NewError(spec.CodeInternalError, ReasonUpstreamUnavailable, "the upstream server is not running, and could not be reached: "+err.Error())
	case errors.Is(err, client.ErrNotResumable), errors.Is(err, client.ErrGaveUp):
		return spec.NewError(spec.CodeInternalError, ReasonUpstreamLost, "the upstream server went away before it answered: "+err.Error())
	}
	return err
}
