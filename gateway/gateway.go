// Package gateway puts the resume core in front of any MCP server: it is an MCP
// client of an upstream server (a stdio child, or Streamable HTTP) and serves the
// upstream's tools, resources, prompts and completions as an mcp-go server that
// mcp.New wraps like any other. A tools/call runs on the upstream while the
// gateway's own client is gone: the upstream's progress, logs and questions
// (sampling, elicitation, roots) of the call become the call's messages in the
// core, with everything that gives (sequence numbers, resumes on any transport,
// tasks, both protocol eras, durable results, clusters).
//
// The gateway speaks the 2025-11-25 revision to its upstream, the one every
// server of the day speaks; its own clients get both eras.
package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/internal/backoff"
	resumemcp "github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
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

// writeTimeout bounds a notification or an answer written to the upstream.
const writeTimeout = 10 * time.Second

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
	URL    string
	Header http.Header
	Client *http.Client
	// Authorization, when set, gives the Authorization header of each
	// request to an HTTP upstream and of each WebSocket handshake, asked
	// every time (a token source that refreshes: oauth.ClientCredentials),
	// over Header's. The gateway's own credentials: a client's are never
	// sent upstream.
	Authorization func(ctx context.Context) (string, error)
	// Wrap, when set, wraps the round tripper of every HTTP request to the
	// upstream, a WebSocket's handshake included: an OAuth client
	// (oauth.Transport) that logs in, renews its token on a 401 and sends
	// the request again.
	Wrap func(http.RoundTripper) http.RoundTripper
	// WSPing is the interval of a WebSocket upstream's keepalive pings; a pong
	// half as late takes the connection for dead. Default 20s.
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
	// the transport's default (2.5 times the keepalive the upstream announces,
	// else httptransport.DefaultSilence). A call the upstream made resumable is
	// then resumed; a laptop that slept or a NAT that forgot the flow never
	// leaves a call hanging.
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
		r.WSPing = 20 * time.Second
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

// Gateway is one upstream server served through an mcp-go server.
type Gateway struct {
	opts Options
	log  zerolog.Logger
	obs  *observer // nil: upstream requests neither traced nor measured
	srv  *server.MCPServer
	init initResult // the first connection's
	keys bool       // the upstream takes call keys (takesKeys of init)

	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the supervisor, peer readers, upstream request handlers
	conns  atomic.Uint64  // upstream connections made

	mu      sync.Mutex
	up      *peer         // the live connection; nil while there is none
	ready   chan struct{} // closed while up is set
	calls   map[string]*upcall
	mirrorQ chan struct{}     // capacity 1: the lists changed upstream
	lists   map[string]string // a digest of each list as last mirrored
	// taskSupport: each upstream tool's execution.taskSupport, as last
	// mirrored, when the upstream does tasks itself (nil when it does not).
	taskSupport map[string]mcpgo.TaskSupport
	// mirrored names the tools the last mirror of the upstream's list set;
	// the others (the core's own) stay when it changes.
	mirrored map[string]bool
	subs     subscriptions
}

// upcall is a tools/call running on the upstream, by its upstream request id.
type upcall struct {
	ctx   context.Context     // the tool's, in the core: where its messages go
	token mcpgo.ProgressToken // the client's progress token; nil when it gave none
	// progress is the last progress value passed on (guarded by Gateway.mu):
	// progress only increases, so one the upstream sends again (a replay) is
	// dropped.
	progress   float64
	progressed bool
	// resumeToken, from the upstream's resumePolicy for the call (SEP-975, an
	// HTTP upstream that offers it), lets the call be resumed on a new
	// connection when its stream or its connection is lost; maxWait is how long
	// the upstream keeps it meanwhile; seq is the newest message of the call
	// passed on (io.mcp-resume/seq), acknowledged on a resume so that nothing
	// comes twice. Guarded by Gateway.mu.
	resumeToken string
	maxWait     time.Duration
	seq         uint64
	// keyed: resumeToken is the call's key (io.mcp-resume/key), sent with it:
	// a call lost before its policy came is sent again with it. policySeen:
	// the policy came (the upstream had the call). heard counts the call's
	// messages that arrived, so that a resume knows it reached the upstream.
	keyed, policySeen bool
	heard             uint64
	// upTask is the upstream's task running the call (2025-11-25 tasks), once
	// it made one: its questions name it (guarded by Gateway.mu).
	upTask string
	// asked holds the call's questions from the upstream, by their id: one
	// sent again after a resume is not asked twice (guarded by Gateway.mu).
	asked map[string]*question
}

type initResult struct {
	ProtocolVersion string                   `json:"protocolVersion"`
	Capabilities    mcpgo.ServerCapabilities `json:"capabilities"`
	ServerInfo      mcpgo.Implementation     `json:"serverInfo"`
	Instructions    string                   `json:"instructions"`
}

// New starts the upstream, initializes it and mirrors its lists. An error here
// is the first connection's: a command that does not start, a URL that does not
// answer, an initialize that fails.
func New(ctx context.Context, opts *Options) (*Gateway, error) {
	o := opts.withDefaults()
	if (len(o.Command) == 0) == (o.URL == "") {
		return nil, errors.New("gateway: give an upstream command or a URL, not both")
	}
	log := zerolog.Nop()
	if o.Logger != nil {
		log = *o.Logger
	}
	g := &Gateway{opts: o, log: log, ready: make(chan struct{}), calls: map[string]*upcall{}, mirrorQ: make(chan struct{}, 1), lists: map[string]string{}, subs: subscriptions{byURI: map[string]map[string]struct{}{}}}
	g.obs = newObserver(&o)
	g.ctx, g.cancel = context.WithCancel(context.Background())
	p, init, err := g.connect(ctx)
	if err != nil {
		g.cancel()
		return nil, err
	}
	g.init, g.keys = init, takesKeys(init)
	g.srv = g.newServer(init)
	if err := g.mirror(ctx, p); err != nil {
		p.close()
		g.wg.Wait()
		g.cancel()
		return nil, err
	}
	g.install(p)
	g.wg.Add(1)
	go g.supervise(p)
	return g, nil
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
// must be (required) or may not (forbidden, or none said); tools and def (the
// gateway's own policies) decide the rest of the policy, and everything for an
// upstream that does no tasks, any call of which may become a task of the
// gateway's.
func (g *Gateway) PolicyOf(tools map[string]resumemcp.Policy, def resumemcp.Policy) func(string) (resumemcp.Policy, bool) {
	return func(tool string) (resumemcp.Policy, bool) {
		support, declared := g.TaskSupport(tool)
		if !declared {
			return resumemcp.Policy{}, false
		}
		p, ok := tools[tool]
		if !ok {
			p = def
		}
		switch support {
		case mcpgo.TaskSupportRequired:
			p.Task = resumemcp.TaskRequired
			if p.Mode == resumemcp.Always && g.modernUpstream() {
				// The upstream makes the call its task when it chooses,
				// and the gateway's call becomes its task then (Promote):
				// before, the call's questions may be its input_required
				// answer (SEP-2663). A call the upstream holds longer
				// than escalateAfter without a word becomes a task anyway.
				p.Mode, p.After = resumemcp.After, escalateAfter
			}
		case mcpgo.TaskSupportOptional:
			p.Task = resumemcp.AsTask
		default:
			p.Task = resumemcp.NoTask
		}
		return p, true
	}
}

// resumableCap is the gateway's SEP-975 capability toward an HTTP upstream.
var resumableCap = map[string]any{"extensions": []string{spec.ExtensionAck}}

// escalateAfter bounds how long a 2026 client's call of a task-required tool
// runs before it is a task of the gateway's, when its upstream of the
// 2026-07-28 era has not made it one yet.
const escalateAfter = 100 * time.Millisecond

// modernUpstream reports whether the live upstream connection speaks the
// 2026-07-28 era.
func (g *Gateway) modernUpstream() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.up != nil && g.up.modern
}

// ServerInfo is the upstream's name and version.
func (g *Gateway) ServerInfo() mcpgo.Implementation { return g.init.ServerInfo }

// Connections is how many upstream connections were made (1 + restarts).
func (g *Gateway) Connections() uint64 { return g.conns.Load() }

// Close ends the upstream connection (a child is stopped) and waits for the
// gateway's goroutines.
func (g *Gateway) Close() error {
	g.cancel()
	g.mu.Lock()
	p := g.up
	g.mu.Unlock()
	if p != nil {
		p.close()
	}
	g.wg.Wait()
	return nil
}

// dial opens a transport connection to the upstream.
func (g *Gateway) dial(ctx context.Context) (transport.Conn, error) {
	if isWebSocket(g.opts.URL) {
		// A WebSocket is one session: its loss (a close, a ping unanswered
		// for PingTimeout, which is how a silent connection shows) ends the
		// peer, and calls the upstream made resumable are resumed on the next.
		h := g.opts.Header
		if g.opts.Authorization != nil {
			a, err := g.opts.Authorization(ctx)
			if err != nil {
				return nil, err
			}
			h = h.Clone()
			if h == nil {
				h = http.Header{}
			}
			h.Set("Authorization", a)
		}
		return ws.Dial(ctx, g.opts.URL, &ws.DialOptions{Header: h, Wrap: g.opts.Wrap, Options: ws.Options{PingInterval: g.opts.WSPing, PingTimeout: g.opts.WSPing / 2}})
	}
	if g.opts.URL != "" {
		client := g.opts.Client
		if client == nil {
			client = http.DefaultClient
		}
		if len(g.opts.Header) > 0 || g.opts.Authorization != nil || g.opts.Wrap != nil {
			c := *client
			var rt http.RoundTripper = headerTransport{base: client.Transport, header: g.opts.Header, auth: g.opts.Authorization}
			if g.opts.Wrap != nil {
				base := client.Transport
				if base == nil {
					base = http.DefaultTransport
				}
				if len(g.opts.Header) > 0 || g.opts.Authorization != nil {
					base = rt
				}
				rt = g.opts.Wrap(base)
			}
			c.Transport = rt
			client = &c
		}
		return httptransport.Dial(g.opts.URL, &httptransport.ClientOptions{Client: client, Protocol: Protocol, ReportStreamLoss: true, Silence: g.opts.Silence}), nil
	}
	env, err := stdio.Environ(g.opts.Env)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	cmd := exec.Command(g.opts.Command[0], g.opts.Command[1:]...)
	cmd.Env = env
	cmd.Dir = g.opts.Dir
	cmd.Stderr = g.opts.Stderr
	return stdio.Command(cmd, &stdio.Options{MaxMessageBytes: transport.DefaultMaxMessageBytes})
}

// isWebSocket reports whether url names a WebSocket upstream.
func isWebSocket(url string) bool {
	return strings.HasPrefix(url, "ws://") || strings.HasPrefix(url, "wss://")
}

// connect makes one upstream connection and initializes it.
func (g *Gateway) connect(ctx context.Context) (*peer, initResult, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.ConnectTimeout)
	defer cancel()
	conn, err := g.dial(ctx)
	if err != nil {
		return nil, initResult{}, &StartError{err}
	}
	n := g.conns.Add(1)
	p := newPeer(g, conn, "gw"+strconv.FormatUint(n, 10)+"-")
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		p.read(g.ctx)
	}()
	caps := map[string]any{
		"sampling":    map[string]any{},
		"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
		"roots":       map[string]any{"listChanged": true},
	}
	if g.opts.URL != "" {
		// An HTTP upstream that offers SEP-975 makes each call resumable: a call
		// whose stream or connection is lost is resumed on the next one. With
		// the ack extension, it keeps what it sent until the gateway's resume
		// acknowledges it, so that what a dying connection lost is sent again.
		caps[spec.CapabilityName] = resumableCap
	}
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": Protocol,
		"capabilities":    caps,
		"clientInfo":      g.clientInfo(),
	})
	raw, err := p.call(ctx, "initialize", params)
	var init initResult
	if err == nil {
		err = json.Unmarshal(raw, &init)
	}
	if err != nil {
		p.close()
		if errors.Is(err, errLost) || errors.Is(err, errNotSent) {
			<-p.done
			if p.err != nil && !errors.Is(p.err, transport.ErrClosed) {
				err = fmt.Errorf("%w (%w)", err, p.err)
			}
		}
		return nil, initResult{}, &StartError{err}
	}
	p.version = init.ProtocolVersion
	p.notify("notifications/initialized", nil)
	if g.opts.URL == "" || p.http != nil {
		// A child on stdio, or a server over Streamable HTTP (where a 2026
		// request goes without the session, with headers of its own, and is
		// cancelled by closing its stream). Over WebSocket calls stay in the
		// session's era.
		p.modern = speaksModern(ctx, p)
	}
	if p.http != nil {
		// Notifications of no request (list changes) come on the session's GET
		// stream, where the upstream offers one.
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			if status, err := p.http.Get(""); err != nil {
				g.log.Debug().Int("status", status).Err(err).Msg("the upstream has no GET stream")
			}
		}()
	}
	g.log.Info().Str("upstream", init.ServerInfo.Name).Str("upstreamVersion", init.ServerInfo.Version).Str("protocol", init.ProtocolVersion).Bool("modern", p.modern).Msg("upstream connected")
	return p, init, nil
}

// speaksModern asks the upstream's server/discover whether it speaks the
// 2026-07-28 era as well. An upstream of the 2025 era answers method not found.
func speaksModern(ctx context.Context, p *peer) bool {
	params, _ := json.Marshal(map[string]any{"_meta": map[string]any{
		spec.MetaProtocolVersion:    spec.Version2026,
		spec.MetaClientCapabilities: map[string]any{},
		spec.MetaClientInfo:         p.g.clientInfo(),
	}})
	raw, err := p.probe(ctx, spec.MethodServerDiscover, params)
	if err != nil {
		return false
	}
	var d struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	return json.Unmarshal(raw, &d) == nil && slices.Contains(d.SupportedVersions, spec.Version2026)
}

// clientInfo is how the gateway names itself to its upstream.
func (g *Gateway) clientInfo() map[string]any {
	return map[string]any{"name": "mcp-resume-gateway", "version": g.opts.Version}
}

// install makes p the live connection.
func (g *Gateway) install(p *peer) {
	g.mu.Lock()
	g.up = p
	close(g.ready)
	g.mu.Unlock()
}

// lost takes p out of service, if it is the live connection: calls wait for
// the next one from now on.
func (g *Gateway) lost(p *peer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.up == p {
		g.up = nil
		g.ready = make(chan struct{})
	}
}

// replaced waits until p is no longer the live connection (the supervisor
// took it out of service), up to ConnectTimeout.
func (g *Gateway) replaced(ctx context.Context, p *peer) {
	t := time.NewTimer(g.opts.ConnectTimeout)
	defer t.Stop()
	select {
	case <-p.done:
	case <-ctx.Done():
	case <-g.ctx.Done():
	case <-t.C:
	}
	g.lost(p)
}

// supervise starts the upstream again whenever its connection ends, until Close.
// The connection it made last is closed as it returns: Close may have found
// none installed while a new one was being made.
func (g *Gateway) supervise(p *peer) {
	defer g.wg.Done()
	defer func() { p.close() }()
	for {
		select {
		case <-p.done:
		case <-g.mirrorQ:
			if err := g.mirror(g.ctx, p); err != nil && g.ctx.Err() == nil {
				g.log.Warn().Err(err).Msg("following the upstream's list changes")
			}
			continue
		case <-g.ctx.Done():
			return
		}
		g.lost(p)
		p.close()
		if g.ctx.Err() != nil {
			return
		}
		g.log.Warn().AnErr("error", p.err).Msg("upstream connection ended; starting it again")
		for attempt := 0; ; attempt++ {
			if !backoff.Sleep(g.ctx, backoff.Delay(g.opts.MinBackoff, g.opts.MaxBackoff, attempt)) {
				return
			}
			np, _, err := g.connect(g.ctx)
			if err == nil {
				if err = g.mirror(g.ctx, np); err != nil {
					np.close()
				} else {
					g.resubscribe(g.ctx, np)
				}
			}
			if err == nil {
				p = np
				g.install(p)
				break
			}
			if g.ctx.Err() != nil {
				return
			}
			g.log.Warn().Err(err).Int("attempt", attempt+1).Msg("starting the upstream again")
		}
	}
}

// current returns the live connection, waiting up to ConnectTimeout for one.
func (g *Gateway) current(ctx context.Context) (*peer, error) {
	t := time.NewTimer(g.opts.ConnectTimeout)
	defer t.Stop()
	for {
		g.mu.Lock()
		p, ready := g.up, g.ready
		g.mu.Unlock()
		if p != nil {
			return p, nil
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-g.ctx.Done():
			return nil, spec.ShuttingDown()
		case <-t.C:
			return nil, spec.NewError(spec.CodeInternalError, ReasonUpstreamUnavailable, "the upstream server is not running, and could not be started in "+g.opts.ConnectTimeout.String())
		}
	}
}

// request sends a request of a client (tools aside) to the upstream.
func (g *Gateway) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	p, err := g.current(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := p.call(ctx, method, b)
	if e, ok := err.(*spec.Error); ok {
		// mcp-go answers a handler's error (of anything but a tool) with -32603
		// and the error's text: the upstream's message, not our rendering of it.
		return nil, errors.New(e.Message)
	}
	return raw, upstreamErr(err)
}

// upstreamErr is what a client gets when the upstream could not answer.
func upstreamErr(err error) error {
	switch {
	case errors.Is(err, errLost), errors.Is(err, errStreamLost), errors.Is(err, errNotSent):
		return spec.NewError(spec.CodeInternalError, ReasonUpstreamLost, "the upstream server went away before it answered: "+err.Error())
	}
	return err
}

// headerTransport adds headers to every request, and the Authorization auth
// gives.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
	auth   func(context.Context) (string, error)
}

// CloseIdleConnections closes the base's idle connections (see
// oauth.Transport's).
func (t headerTransport) CloseIdleConnections() {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.header {
		r.Header[k] = vs
	}
	if t.auth != nil {
		a, err := t.auth(r.Context())
		if err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, err
		}
		r.Header.Set("Authorization", a)
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
