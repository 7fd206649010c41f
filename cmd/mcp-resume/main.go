// Command mcp-resume serves MCP tools with resumable requests (SEP-975).
//
//	mcp-resume serve [--http ADDR] [--ws ADDR] [--stdio] [flags]
//
// Run `mcp-resume serve -h` for the flags.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/metrics"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/cluster"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
	"github.com/mcp-resume/mcp-resume/transport/ws"
	"github.com/mcp-resume/mcp-resume/web"
)

// version is what `mcp-resume version` prints: the version a release build stamps
// at link time (-ldflags "-X main.version=v1.2.3", cmd/release); otherwise the
// module version go install recorded, or the VCS revision go build did. The
// linker sets only a variable without an initializer (or a constant one), so
// the fallback is taken in init.
var version string

func init() {
	if version == "" {
		version = buildVersion()
	}
}

func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return "dev-" + rev
}

func main() {
	if lim := softMemoryLimit(os.Getenv("GOMEMLIMIT"), cgroupLimit()); lim > 0 {
		debug.SetMemoryLimit(lim)
	}
	os.Exit(report(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)))
}

// report tells err on stderr when it is a failure, and returns the exit
// status.
func report(err error) int {
	code := exitCode(err)
	if code == 1 || code == 2 {
		fmt.Fprintln(os.Stderr, "mcp-resume:", err)
	}
	return code
}

// exitCode is the process's exit status for run's error (docs/cli.md lists
// them): 0 for none and for a help request, 1 for a tool that ran and
// reported an error, 130 for Ctrl-C (as a shell reports an interrupted
// command), 2 for the rest.
func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errToolFailed):
		return 1
	case errors.Is(err, errCancelled):
		return 130
	}
	return 2
}

const usage = `usage: mcp-resume <command> [flags]

commands:
  serve     serve the demo tools with resumable requests (Streamable HTTP on
            127.0.0.1:8080/mcp, WebSocket on /ws and the demo page on / by
            default; --stdio for stdin/stdout)
  gateway   serve another MCP server the same way: mcp-resume gateway [serve
            flags] -- CMD ARGS (a stdio child), or --upstream URL
  connect   serve a remote MCP server on stdin/stdout for a local client (a
            desktop app, an IDE), its calls surviving cuts, silence and the
            remote's restarts: mcp-resume connect URL
  call      call a tool with automatic resume: mcp-resume call [--url URL |
            --ws URL | --stdio CMD] TOOL key=value ... (-h for the flags)
            (--task: as a task of the server; --detach: print its id, exit)
  status    ask for a request's status by id and resume token
  task      the server's tasks: task get|result|cancel|watch ID, task list
  tools     list the server's tools
  login     log in to a server that wants OAuth: mcp-resume login URL (connect,
            call, status, task and tools use the login, and log in themselves
            when a server asks)
  logout    forget a server's login: mcp-resume logout URL
  config    check a policy file: mcp-resume config check FILE
  version   print the version

call, status, task and tools present the API key in MCP_RESUME_API_KEY (a
server started with --api-keys wants one), else the login to the server;
-h after a command for its flags.
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdin, stdout, stderr, modeServe, nil)
	case "gateway":
		return serve(args[1:], stdin, stdout, stderr, modeGateway, nil)
	case "connect":
		return connect(args[1:], stdin, stdout, stderr)
	case "call":
		return call(args[1:], stdin, stdout, stderr)
	case "status":
		return status(args[1:], stdin, stdout, stderr)
	case "task":
		return task(args[1:], stdin, stdout, stderr)
	case "tools":
		return tools(args[1:], stdout, stderr)
	case "login":
		return login(args[1:], stdout, stderr)
	case "logout":
		return logout(args[1:], stdout, stderr)
	case "config":
		return configCmd(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version)
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

type serveFlags struct {
	stdio          bool
	audit          string // --audit: a file, or - for stdout; "" off
	auditOTLP      bool
	auditArgs      string
	httpAddr       string
	wsAddr         string
	wsPing         time.Duration
	wsPingTimeout  time.Duration
	wsInitTimeout  time.Duration
	path           string
	hosts          string
	origins        string
	sessionIdle    time.Duration
	emptyIdle      time.Duration
	maxSessions    int
	maxSessionsP   int
	maxSessionsA   int
	streamIdle     time.Duration
	keepAlive      time.Duration
	userTimeout    time.Duration
	maxConns       int
	maxConnsA      int
	bodyTimeout    time.Duration
	conformance    bool
	maxWait        time.Duration
	minWait        time.Duration
	retention      time.Duration
	delivered      time.Duration
	tombstoneTTL   time.Duration
	maxLive        int
	maxRetained    int
	queueBytes     int
	progressHist   time.Duration
	queuedBytes    int64
	queuedBytesP   int64
	maxMessage     int
	config         string // --config: the policy file
	policies       string
	defaultPolicy  string
	quickCall      time.Duration
	answerWithin   time.Duration
	restartable    string
	logLevel       string
	dataDir        string
	drainGrace     time.Duration
	natsURL        string
	instance       string
	lease          time.Duration
	replicas       int
	replicasSet    bool // --replicas was given
	sync           string
	apiKeys        string
	insecureNoAuth bool
	failBurst      int
	failRefill     time.Duration
	maxConcurrentP int
	taskTTL        time.Duration
	maxTaskTTL     time.Duration
	maxLiveP       int

	// gateway only
	gateway          bool // the gateway command (or connect): no demo tools, no demo page
	connect          bool // connect: the upstream is "the remote", waited for at start-up
	upstream         string
	upstreamTokenEnv string
	upstreamHeaders  headerList
	childEnv         envList

	oauth oauthFlags
	login *loginFlags // connect's
}

// serveMode is what serve runs: the serve command, the gateway command (the
// same server in front of an upstream MCP server instead of the demo tools), or
// connect (the gateway for one local client).
type serveMode int

const (
	modeServe serveMode = iota
	modeGateway
	modeConnect
)

// serve runs the serve command, the gateway command or connect (mode; login
// is connect's OAuth client, which logs a person in to the remote when it
// asks).
func serve(args []string, stdin io.Reader, stdout, stderr io.Writer, mode serveMode, login *loginFlags) error {
	gw := mode != modeServe
	f := serveFlags{gateway: gw, connect: mode == modeConnect, login: login}
	name := "serve"
	if gw {
		name = "gateway"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		if gw {
			fmt.Fprint(stderr, gatewayUsage)
		} else {
			fmt.Fprint(stderr, "usage: mcp-resume serve [flags]\n\nServes the demo tools (or --conformance's) with resumable requests and tasks, in both\nprotocol eras.\n\nflags:\n")
		}
		fs.PrintDefaults()
	}
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) { f.replicasSet = f.replicasSet || fl.Name == "replicas" })
	if !gw && fs.NArg() > 0 {
		return fmt.Errorf("serve takes no arguments (got %q); to serve another MCP server, use mcp-resume gateway -- CMD ARGS", fs.Args())
	}
	if gw && (f.upstream != "" && fs.NArg() > 0 || f.upstream == "" && fs.NArg() == 0 && f.config == "") {
		return errors.New("gateway: give the upstream either as a command after -- or with --upstream URL (or several in --config's upstreams)")
	}
	if f.stdio && f.wsAddr != "" {
		return errors.New("--ws serves the network transports; it cannot be combined with --stdio")
	}
	if !f.stdio && f.httpAddr == "" && f.wsAddr == "" {
		return errors.New("nothing to serve: --http is empty and --ws is not set")
	}
	lvl, err := zerolog.ParseLevel(f.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := zerolog.New(logOutput(stderr)).Level(lvl).With().Timestamp().Logger()
	// Ended last: what the shutdown below ends is exported too.
	tp, stopTracing := startTracing(func(err error) { log.Warn().Err(err).Msg("tracing") })
	defer stopTracing()
	// The operation histograms: on /metrics (when it is served), and over
	// OTLP when the environment asks for it.
	om := startOpMetrics(!f.stdio && f.httpAddr != "", gw, func(err error) { log.Warn().Err(err).Msg("metrics") })
	defer om.stop()
	keys, err := loadKeys(f.apiKeys)
	if err != nil {
		return err
	}
	// Stopped after the core (whose Close ends the calls still running,
	// each an event): deferred before it is made.
	aud, err := startAudit(&f, stdout, log)
	if err != nil {
		return err
	}
	defer aud.stop()
	if aud.dropped != nil {
		om.collectors = append(om.collectors, aud.dropped)
	}
	if err := f.oauth.check(&f); err != nil {
		return err
	}

	if err := checkExposure(&f, keys != nil || len(f.oauth.issuers) > 0); err != nil {
		return err
	}
	if f.taskTTL < time.Second || f.maxTaskTTL < time.Second {
		return fmt.Errorf("--task-ttl and --max-task-ttl: at least 1s (got %v and %v)", f.taskTTL, f.maxTaskTTL)
	}
	src := newPolicySource(&f, fs)
	src.arguments = aud.rules
	pol, err := src.load()
	if err != nil {
		return err
	}
	def, tools := pol.def, pol.tools
	if gw && len(pol.upstreams) == 0 && f.upstream == "" && fs.NArg() == 0 {
		return fmt.Errorf("gateway: --config %s names no upstreams: give the upstream as a command after -- or with --upstream URL", f.config)
	}
	if err := f.oauth.addToolScopes(pol.scopes); err != nil {
		return err
	}
	pm := newPolicyMetrics()
	pm.inEffect(pol.hash)
	om.collectors = append(om.collectors, pm.collectors()...)

	// The listeners are bound first: a port in use is told before anything
	// starts (the gateway's child, the store).
	var bound *listeners
	if !f.stdio {
		if bound, err = bind(&f); err != nil {
			return err
		}
		defer bound.close()
	}
	var auth *authn
	if !f.stdio {
		names := make([]string, len(pol.upstreams))
		for i, u := range pol.upstreams {
			names[i] = u.Name
		}
		if auth, err = newAuthn(&f, bound, keys, names, log); err != nil {
			return err
		}
	}
	set, err := openStores(&f, log)
	if err != nil {
		return err
	}
	if set != nil {
		defer set.close()
	}
	multi := len(pol.upstreams) > 0
	// Without --data-dir or --nats-url there is no store: each engine keeps
	// its requests in memory itself.
	timer := metrics.NewStoreTimer() // for /metrics
	var nodes []*cluster.Node
	// storeOf opens the store of the endpoint of upstream ("" for the
	// process's own: the server, the gateway, or a gateway's aggregate), the
	// cluster's share of its HTTP sessions, and its membership of the cluster.
	storeOf := func(upstream string) (resume.Store, mcp.SessionShare, *cluster.Node, error) {
		if set == nil {
			return nil, nil, nil, nil
		}
		st, node, err := set.open(context.Background(), upstream)
		if err != nil {
			return nil, nil, nil, err
		}
		if node == nil {
			return timer.Wrap(st), nil, nil, nil
		}
		nodes = append(nodes, node)
		if f.stdio {
			return timer.Wrap(st), nil, node, nil
		}
		// A cluster's instances take up each other's HTTP sessions.
		sh, err := set.sessions(context.Background(), node, upstream)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("sharing the sessions with the cluster: %w", err)
		}
		return timer.Wrap(st), sh, node, nil
	}
	store, sessions, node, err := storeOf("")
	if err != nil {
		return err
	}
	var rates mcp.Rates // a cluster's instances share the tools' rate buckets
	if node != nil {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := node.Rates(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("sharing the tools' rates with the cluster: %w", err)
		}
		rates = clusterRates{r}
	} else if multi { // the aggregate and each upstream's endpoint share one
		rates = mcp.NewMemoryRates()
	}
	// The policies in effect (a reload changes them), for a gateway of
	// several: the aggregate's tools' policies are their upstreams'.
	var current atomic.Pointer[policies]
	current.Store(pol)
	var limits *mcp.Limits
	var srv *server.MCPServer
	var policyOf func(string, mcp.Policy) mcp.Policy
	var limitName func(string) string
	var agg *gateway.Aggregate
	switch {
	case multi:
		if f.upstream != "" || fs.NArg() > 0 || len(f.childEnv) > 0 || f.upstreamTokenEnv != "" || f.upstreamHeaders.h != nil || f.oauth.upstreamClientID != "" {
			return fmt.Errorf("--config %s names upstreams: give no --upstream, command after --, --env, --upstream-header, --upstream-token-env or --upstream-oauth-client-id (each upstream has its own in the file)", f.config)
		}
		if agg, err = startUpstreams(pol, &current, stderr, log, tp, om.client); err != nil {
			return err
		}
		defer agg.Close()
		if auth != nil {
			auth.agg.Store(agg)
		}
		// The upstreams that answer at once are listed before the first
		// client comes (a desktop app lists the tools right after its
		// initialize); one that does not holds back nothing past this.
		rctx, cancel := context.WithTimeout(context.Background(), upstreamsWait)
		if !agg.Ready(rctx) {
			log.Warn().Stringer("wait", upstreamsWait).Msg("serving before every upstream answered: the tools of those that did not are listed once they do")
		}
		cancel()
		srv, limits, limitName = agg.Server(), mcp.NewLimits(), agg.LimitName
		// A tool the file names by the aggregate's name has that policy;
		// the others their upstream's.
		policyOf = agg.PolicyOf(func(tool, upstream, name string) (mcp.Policy, bool) {
			cur := current.Load()
			if _, named := cur.tools[tool]; named {
				return mcp.Policy{}, false
			}
			return cur.ups[upstream].of(name), true
		})
	case gw:
		inEffect := func(tool string) mcp.Policy {
			if c := pm.core.Load(); c != nil {
				return c.Policy(tool)
			}
			if p, ok := tools[tool]; ok {
				return p
			}
			return def
		}
		g, err := startGateway(&f, fs.Args(), inEffect, stderr, log, tp, om.client)
		if err != nil {
			return err
		}
		defer g.Close()
		srv = g.Server()
		policyOf = g.PolicyOf
	default:
		srv = toolServer(f.conformance)
	}
	memory := newMemoryWatch(memoryLimit()) // one for every core of the process: it reads the process's figures
	newCore := func(srv *server.MCPServer, store resume.Store, sessions mcp.SessionShare, node *cluster.Node,
		def mcp.Policy, tools map[string]mcp.Policy, policyOf func(string, mcp.Policy) mcp.Policy, limitName func(string) string) (*mcp.Server, error) {
		eng := &resume.Options{
			MaxWait: f.maxWait, MinWait: f.minWait, Retention: f.retention, DeliveredRetention: f.delivered,
			TombstoneTTL: f.tombstoneTTL, MaxLive: f.maxLive, MaxRetained: f.maxRetained, QueueBytes: f.queueBytes,
			ProgressHistory: f.progressHist, MaxLivePerPrincipal: f.maxLiveP, MaxBytes: f.queuedBytes, MaxBytesPerPrincipal: f.queuedBytesP,
		}
		memory.engineOptions(eng)
		return mcp.New(srv, &mcp.Options{
			Store:         store,
			Engine:        eng,
			Cluster:       asCluster(node),
			Sessions:      sessions,
			DefaultPolicy: def,
			QuickCall:     cmp.Or(f.quickCall, -1), // the flag's 0 is "none"; the option's is the default
			AnswerWithin:  f.answerWithin,
			DetachTools:   true, // the binary registers no tool hook or middleware of mcp-go's
			Tools:         tools,
			PolicyOf:      policyOf,
			Logger:        &log,

			TokenFailureBurst:         f.failBurst,
			TokenFailureRefill:        f.failRefill,
			MaxConcurrentPerPrincipal: f.maxConcurrentP,
			Overloaded:                memory.overloaded(),
			TaskTTL:                   f.taskTTL,
			MaxTaskTTL:                f.maxTaskTTL,
			TracerProvider:            tp,
			OnOperation:               om.server,
			OnRefused:                 pm.onRefused,
			Rates:                     rates,
			Limits:                    limits,
			LimitName:                 limitName,
			Audit:                     aud.record,
		})
	}
	core, err := newCore(srv, store, sessions, node, def, tools, policyOf, limitName)
	if err != nil {
		return err
	}
	pm.core.Store(core)
	eps := []endpoint{{core: core}}
	// On an error below, and when stdio ends, the cores made are closed
	// before their stores are.
	closeCores := func() {
		for _, e := range eps {
			e.core.Close()
		}
	}
	if multi {
		// Each upstream's own endpoint: its tools under its names, its
		// store, the limits it shares with the aggregate.
		for _, g := range agg.Upstreams() {
			name := g.Name()
			st, sh, n, err := storeOf(name)
			if err != nil {
				closeCores()
				return fmt.Errorf("upstream %s: %w", name, err)
			}
			up := pol.ups[name]
			c, err := newCore(g.Server(), st, sh, n, up.def, up.tools, g.PolicyOf, func(tool string) string { return gateway.LimitName(name, tool) })
			if err != nil {
				closeCores()
				return fmt.Errorf("upstream %s: %w", name, err)
			}
			eps = append(eps, endpoint{upstream: name, core: c, gw: g})
		}
	}
	apply := func(p *policies) {
		current.Store(p)
		core.SetPolicies(p.def, p.tools)
		for _, e := range eps[1:] {
			up := p.ups[e.upstream]
			e.core.SetPolicies(up.def, up.tools)
		}
		if multi && !reflect.DeepEqual(p.upstreams, pol.upstreams) {
			log.Warn().Msg("the policy file's upstreams changed: their policies are in effect, the upstreams themselves change at a restart")
		}
	}
	sctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx := shutDownOnLeaseLoss(sctx, nodes, log)
	var watching sync.WaitGroup
	wctx, stopWatching := context.WithCancel(ctx)
	watching.Go(func() { watchPolicies(wctx, src, apply, pm, pol.hash, log) })
	defer watching.Wait()
	defer stopWatching()
	if f.stdio {
		withMemoryLimit(log.Info().Str("version", version).Str("transport", "stdio")).Stringer("maxWait", f.maxWait).Msg("mcp-resume serving")
		conn := stdio.New(stdin, stdout, &stdio.Options{MaxMessageBytes: f.maxMessage})
		served := make(chan error, 1)
		go func() { served <- core.ServeWith(ctx, conn, &mcp.SessionOptions{Transport: mcp.TransportStdio}) }()
		select {
		case err = <-served:
		case <-ctx.Done():
			// SIGINT or SIGTERM: stop now. Serve may still sit in a Read of stdin
			// that nothing interrupts (a blocking pipe the client keeps open); the
			// process ends with it.
			log.Info().Msg("shutting down")
		}
		// On stdio the connection is the whole session: when it ends there is no
		// one to resume on here, so the process ends and its requests with it
		// (with a durable store the next process recovers them).
		closeCores()
		log.Info().Msg("mcp-resume stopped")
		return cmp.Or(leaseLost(ctx), err)
	}
	err = serveHTTP(ctx, &f, bound, eps, keys, auth, log, timer, om.collectors)
	return cmp.Or(leaseLost(ctx), err)
}

// register defines serve's and gateway's flags (f.gateway: the gateway's)
// on fs, into f.
func (f *serveFlags) register(fs *flag.FlagSet) {
	if f.gateway {
		fs.StringVar(&f.upstream, "upstream", "", "the upstream's URL, instead of a command after --: Streamable HTTP (http://, https://) or WebSocket (ws://, wss://)")
		fs.StringVar(&f.upstreamTokenEnv, "upstream-token-env", "", "with --upstream: the name of an environment variable holding a bearer token sent to the upstream")
		fs.Var(&f.childEnv, "env", "with a command after --: "+envUsage)
		fs.Var(&f.upstreamHeaders, "upstream-header", "with --upstream: a header sent with every request to the upstream, `Name: value` (repeatable); ${VAR} in the value is the environment variable VAR")
	}
	fs.BoolVar(&f.stdio, "stdio", false, "serve MCP on stdin/stdout (newline-delimited JSON) instead of HTTP; logs go to stderr")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "serve Streamable HTTP (--path), WebSocket (/ws, and --path for a GET asking for an upgrade) and the demo page (/) on this address (port 0: any free port; empty: no such listener, with --ws)")
	fs.StringVar(&f.path, "path", "/mcp", "URL path of the Streamable HTTP endpoint")
	fs.StringVar(&f.wsAddr, "ws", "", "also serve WebSocket (/ws) and the demo page (/) on a listener of their own at this address (they are on the --http listener too)")
	fs.DurationVar(&f.wsPing, "ws-ping", 20*time.Second, "a WebSocket connection that carried nothing from its client this long gets a keepalive ping (negative: none)")
	fs.DurationVar(&f.wsPingTimeout, "ws-ping-timeout", 10*time.Second, "a WebSocket peer whose pong is this late is taken for dead: its connection is dropped and its requests detached")
	fs.DurationVar(&f.wsInitTimeout, "ws-init-timeout", 10*time.Second, "a WebSocket connection that has not sent initialize (or a 2026-era request) this long after its handshake is closed (1008) (negative: no bound)")
	fs.StringVar(&f.hosts, "allowed-hosts", "", "Host header values accepted, comma-separated, * for any (default: loopback names, plus the --http host when it is a name or a non-wildcard address)")
	fs.StringVar(&f.origins, "allowed-origins", "", "Origin header values accepted, comma-separated, * for any (default: http(s) origins on loopback names)")
	fs.DurationVar(&f.sessionIdle, "session-idle", 10*time.Minute, "end an HTTP session with no open stream after this long, or with only its GET stream open when its client has sent nothing for this long (its resumable requests live on)")
	fs.DurationVar(&f.emptyIdle, "empty-session-idle", time.Minute, "park an HTTP session with no open stream and no work (no call running, nothing a stream reconnect could take up) after this long: about 500 bytes and no goroutine until --session-idle, taken up again by its client's next request")
	fs.IntVar(&f.maxSessions, "max-sessions", 10000, "HTTP sessions open at once; at the bound a new one takes the place of the least recently used one without an open stream, and initialize is refused (503, too_many_sessions) when all have one (negative: no bound)")
	fs.IntVar(&f.maxSessionsP, "max-sessions-per-principal", 1000, "HTTP sessions of one principal (--api-keys; without keys, every client is one principal), the same way")
	fs.IntVar(&f.maxSessionsA, "max-sessions-per-address", 1000, "HTTP sessions initialized from one remote address, the same way")
	fs.DurationVar(&f.streamIdle, "stream-idle", 0, "close a request's event stream after this long without an event; the client reconnects with Last-Event-ID (0: never)")
	fs.DurationVar(&f.keepAlive, "keepalive", 20*time.Second, "an event stream quiet this long gets a keepalive comment (a request may ask for a shorter interval on its stream, down to 1s: mcp-resume's clients ask 5s); the interval is announced on every stream (Mcp-Resume-Keepalive), and mcp-resume's clients take a stream silent for 2.5 times it for a dead connection")
	fs.DurationVar(&f.userTimeout, "tcp-user-timeout", 30*time.Second, "a connection whose peer acknowledges nothing written for this long is dropped (TCP_USER_TIMEOUT, Linux) and its requests detached: a client that vanished without closing (a laptop that slept) is found at the next keepalive, not after the kernel's 15 minutes of retransmissions (0: the kernel's default)")
	fs.IntVar(&f.maxConns, "max-conns", transport.DefaultMaxConns(), "TCP connections open at once over the --http and --ws listeners (the default shown is this machine's: 10000, or three quarters of the open-file limit when that is lower); past it a new connection is answered 503 too_many_connections and closed (negative: no bound)")
	fs.IntVar(&f.maxConnsA, "max-conns-per-address", transport.DefaultMaxConnsPerAddress, "TCP connections open at once from one remote address (IPv6: one /64), the same way")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", 30*time.Second, "a Streamable HTTP POST whose body has not fully arrived this long after its head is answered 408 (request_timeout) and its connection closed; the event stream that follows is not bounded by it (negative: no bound)")
	if !f.gateway { // the gateway serves its upstream's
		fs.BoolVar(&f.conformance, "conformance", false, "serve the MCP conformance suite's tools, resources and prompts instead of the demo tools")
	}
	fs.DurationVar(&f.drainGrace, "drain-grace", 20*time.Second, "on SIGTERM or SIGINT, how long to drain before stopping: /readyz answers 503, a new call is refused (shutting_down: clients send it to another instance), running calls finish and their resumes are served; what still runs then is handed on (a restartable tool with --data-dir or --nats-url runs again on another instance or the next process, the others end server_stopped). A second signal stops at once; 0: no drain. Give the process a little longer than this before a kill (a pod's terminationGracePeriodSeconds)")
	fs.DurationVar(&f.maxWait, "max-wait", 10*time.Minute, "how long a detached request keeps running without a client (advertised as maxWait)")
	fs.DurationVar(&f.minWait, "min-wait", 0, "how long a client should wait after a disconnect before resuming (advertised as minWait)")
	fs.DurationVar(&f.retention, "retention", 0, "how long a result no client has received is kept (0: same as --max-wait)")
	fs.DurationVar(&f.delivered, "delivered-retention", time.Minute, "how long a result written to a live client is kept unacknowledged, for a resume after a drop")
	fs.DurationVar(&f.tombstoneTTL, "tombstone-ttl", time.Hour, "how long an ended request answers expired/cancelled instead of not_found")
	fs.IntVar(&f.maxLive, "max-live", 10000, "maximum running resumable requests; past it new calls run without a resume policy")
	fs.IntVar(&f.maxRetained, "max-retained", 100000, "maximum finished requests whose results are kept; past it the oldest is released")
	fs.IntVar(&f.queueBytes, "queue-bytes", 1<<20, "byte budget of each request's queued messages")
	fs.DurationVar(&f.progressHist, "progress-history", 10*time.Second, "how long a progress notification that a newer one of its token superseded stays queued: a client back within it gets every value, one away longer the newest, which is all a request away longer keeps (negative: every value, until --queue-bytes needs the room)")
	fs.Int64Var(&f.queuedBytes, "max-queued-bytes", defaultQueuedBytes(), "byte budget of everything kept for every request together, results included (the default shown is this machine's: a quarter of its or its cgroup's memory); at it the oldest kept results go first (answering expired, detail evicted), and new calls run without a resume policy while it stays used up (negative: no budget)")
	fs.Int64Var(&f.queuedBytesP, "max-queued-bytes-per-principal", 0, "the same budget for the requests of each principal (--api-keys) (0: a quarter of --max-queued-bytes; negative: none)")
	fs.IntVar(&f.maxMessage, "max-message-bytes", transport.DefaultMaxMessageBytes, "largest message accepted from a client")
	fs.StringVar(&f.config, "config", "", "the policy file: each tool's resume policy and limits (timeout, concurrency, rate), YAML (docs/policies.md; mcp-resume config check FILE); read again on SIGHUP and when it changes. --default-policy, --policy and --restartable, when given, override it for what they name")
	fs.StringVar(&f.policies, "policy", "", "per-tool resume policy: name=always|never|after:DURATION, comma-separated")
	fs.StringVar(&f.defaultPolicy, "default-policy", "always", "resume policy of tools not named in --policy")
	fs.DurationVar(&f.quickCall, "quick-call", mcp.DefaultQuickCall, "a call of policy always that answers within this, sending nothing before, is answered as a plain call: no resume policy (its client holds no token yet), nothing kept or stored; one that runs longer, or sends a message sooner, becomes resumable then (0: every call resumable from its start)")
	fs.DurationVar(&f.answerWithin, "answer-within", 0, "a tool call still running after this long is answered with a deferred answer (the tool runs on; the answer tells how to get its result with the "+mcp.DefaultAwaitTool+" tool), for clients that stop waiting on their own (60 s in the TypeScript SDK and the apps built on it) (0: never; connect's default is 45s)")
	fs.StringVar(&f.restartable, "restartable", "", "tools safe to run twice, comma-separated: with --data-dir or --nats-url, their calls running when the server stopped run again after a restart instead of failing with server_restarted")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error (on stderr: human-readable when it is a terminal, JSON lines otherwise)")
	fs.StringVar(&f.dataDir, "data-dir", "", "keep queued messages and results in this directory (an embedded NATS JetStream server, in-process, no port): they survive a restart")
	fs.StringVar(&f.natsURL, "nats-url", "", "keep queued messages and results in an existing NATS JetStream, shared by every instance on it: any instance serves getStatus and resume of any request")
	fs.StringVar(&f.instance, "instance", "", "with --nats-url: this instance's name in the cluster, letters, digits, - and _ (default: a random one); the same name after a restart recovers its requests")
	fs.DurationVar(&f.lease, "lease", defaultLease, "with --nats-url: the instance's lease; when one lapses (the instance died), the others end its running requests with owner_lost, or run restartable ones again")
	fs.IntVar(&f.replicas, "replicas", 0, "with --nats-url: copies of the JetStream stream and KV buckets the instances share, 1 to 5, each on another server of the NATS cluster (3 survive the loss of one server); an existing stream or bucket with another count is scaled to it (default: keep their count, 1 for new ones)")
	fs.StringVar(&f.sync, "sync", "periodic", "--data-dir disk flushes: periodic (fast; a machine crash can lose what was acknowledged since the last flush) or always (fsync before each acknowledgement; slower)")
	fs.StringVar(&f.apiKeys, "api-keys", "", "require a bearer API key on HTTP and WebSocket: a file of principal:key lines (# comments); "+envServerKeys+" adds keys in the same format (comma- or newline-separated). Each resumable request is bound to its key's principal")
	f.oauth.register(fs, f.gateway)
	fs.BoolVar(&f.insecureNoAuth, "insecure-no-auth", false, "allow --http or --ws on a non-loopback address without --api-keys or --oauth-issuer")
	fs.IntVar(&f.failBurst, "token-failure-burst", mcp.DefaultTokenFailureBurst, "failed token checks (getStatus, resume, cancel, retry or task request by token answered as unknown) allowed in a burst per session, and 100 times as many per principal (per remote IP without --api-keys); past either a session's token checks are answered rate_limited, except for requests it carries (negative: no limit)")
	fs.DurationVar(&f.failRefill, "token-failure-refill", mcp.DefaultTokenFailureRefill, "each bucket (a session's, a principal's or remote IP's) allows one failed token check again per this interval, up to its size")
	fs.DurationVar(&f.taskTTL, "task-ttl", mcp.DefaultTaskTTL, "a task's lifetime from its creation when its client asks for none: kept that long, running or ended, polled or not, then expired")
	fs.DurationVar(&f.maxTaskTTL, "max-task-ttl", mcp.DefaultMaxTaskTTL, "the longest ttl a 2025-11-25 client may ask for a task (params.task.ttl); a longer one is cut to it")
	fs.IntVar(&f.maxConcurrentP, "max-concurrent-per-principal", mcp.DefaultMaxConcurrentPerPrincipal, "requests of one principal (--api-keys) in flight at once; past it a request is answered too_many_requests (negative: no cap)")
	fs.StringVar(&f.audit, "audit", "", "write an audit trail of the tool calls to this file (appended, created 0600, opened again on SIGHUP), or to stdout for -: one JSON line per call as it ends and per call refused (docs/observability.md, \"Audit trail\") (default: off)")
	fs.BoolVar(&f.auditOTLP, "audit-otlp", false, "send the audit trail as OpenTelemetry log records to the OTLP endpoint configured for traces (OTEL_EXPORTER_OTLP_ENDPOINT, ...)")
	fs.StringVar(&f.auditArgs, "audit-arguments", "", "per-tool rule for the arguments in the audit trail: name=hash|redact|keep, comma-separated (hash: SHA-256 of their canonical JSON; redact: their keys alone; keep: as sent); a tool not named: none")
	fs.IntVar(&f.maxLiveP, "max-live-per-principal", resume.DefaultMaxLivePerPrincipal, "running resumable requests of one principal (--api-keys); past it the principal's new calls run without a resume policy (negative: no cap)")
}

// upstreamsWait bounds how long a gateway of several waits at start for its
// upstreams' first answers before it serves.
const upstreamsWait = 10 * time.Second

// endpoint is one core the process serves: the server's (or a gateway's, or
// a gateway of several's aggregate), and a gateway of several's upstreams'
// own, each at /servers/NAME/.
type endpoint struct {
	upstream string           // "" for the first
	core     *mcp.Server      //
	gw       *gateway.Gateway // an upstream's endpoint: its gateway
}

// errLeaseLost ends serve when this instance lost its lease in the cluster.
var errLeaseLost = errors.New("this instance lost its lease in the cluster (NATS unreachable for longer than --lease?) and shut down, so that the other instances alone run the requests they took over; start it again")

// asCluster is node as the server's Cluster: nil without one.
func asCluster(node *cluster.Node) mcp.Cluster {
	if node == nil {
		return nil
	}
	return node
}

// shutDownOnLeaseLoss returns ctx, also ended (cause errLeaseLost) when one of
// nodes, this instance's memberships of a cluster (one per endpoint), finds its lease lapsed or taken: the
// other instances take over this one's requests, so it must stop running them.
// The process shuts down gracefully and exits non-zero; a supervisor starts it
// again with a fresh lease.
func shutDownOnLeaseLoss(ctx context.Context, nodes []*cluster.Node, log zerolog.Logger) context.Context {
	if len(nodes) == 0 {
		return ctx
	}
	ctx, cancel := context.WithCancelCause(ctx)
	lost := make(chan struct{}, len(nodes))
	for _, node := range nodes {
		go func() {
			select {
			case <-node.Lost():
				lost <- struct{}{}
			case <-ctx.Done():
			}
		}()
	}
	go func() {
		select {
		case <-lost:
			log.Error().Msg("lost the cluster lease: shutting down (the other instances take over this one's requests)")
			cancel(errLeaseLost)
		case <-ctx.Done():
		}
	}()
	return ctx
}

// leaseLost returns errLeaseLost when that is why ctx ended, nil otherwise.
func leaseLost(ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, errLeaseLost) {
		return err
	}
	return nil
}

// listeners are serve's --http and --ws listeners, bound before anything
// starts, under one connection limit (the files are the process's).
type listeners struct {
	http, ws net.Listener // nil when not served
	limit    *transport.ConnLimit
}

// bind binds --http and --ws.
func bind(f *serveFlags) (*listeners, error) {
	l := &listeners{limit: transport.NewConnLimit(f.maxConns, f.maxConnsA)}
	for _, a := range []struct {
		flag, addr string
		ln         *net.Listener
	}{{"--http", f.httpAddr, &l.http}, {"--ws", f.wsAddr, &l.ws}} {
		if a.addr == "" {
			continue
		}
		ln, err := transport.Listen(context.Background(), a.addr, &transport.ListenOptions{UserTimeout: f.userTimeout, Limit: l.limit})
		if err != nil {
			l.close()
			return nil, fmt.Errorf("%s %s: %w", a.flag, a.addr, err)
		}
		*a.ln = ln
	}
	return l, nil
}

// close closes the listeners (again after their servers closed them: harmless).
func (l *listeners) close() {
	for _, ln := range []net.Listener{l.http, l.ws} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// orWebSocket is h, but for a request that asks for a WebSocket upgrade, which
// goes to wsh: the MCP endpoint's URL serves both transports, so that a
// WebSocket client of an OAuth-protected server reaches it at its resource
// (a ws:// URL's resource is its http:// form, RFC 9728 §3.3) and uses the
// same login as a Streamable HTTP client.
func orWebSocket(h, wsh http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			wsh.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serveHTTP serves the network transports on bound until ctx ends (SIGINT,
// SIGTERM), then shuts down: new requests get 503, open streams and WebSocket
// connections close, running requests end. The --http listener has Streamable
// HTTP (--path), WebSocket (/ws, and --path: orWebSocket) and the demo page
// (/); a --ws listener WebSocket (/ws) and the page.
func serveHTTP(ctx context.Context, f *serveFlags, bound *listeners, eps []endpoint, keys *transport.KeySet, auth *authn, log zerolog.Logger, timer *metrics.StoreTimer, ops []prometheus.Collector) error {
	if keys != nil {
		defer reloadOnHUP(ctx, f.apiKeys, keys, log)()
	}
	defer auth.watch(ctx, log)()
	switch {
	case auth.rs != nil:
		log.Info().Bool("auth", true).Strs("issuers", f.oauth.issuers).Str("resource", auth.rs.Resource()).Int("keys", keys.Len()).
			Msg("authentication on: HTTP and WebSocket require an OAuth access token for the resource (or an API key)")
	case keys != nil:
		log.Info().Bool("auth", true).Int("keys", keys.Len()).Msg("authentication on: HTTP and WebSocket require a bearer API key (SIGHUP reloads the keys)")
	default:
		log.Warn().Bool("auth", false).Msg("authentication off: anyone who can reach the listeners can call tools (give --api-keys or --oauth-issuer)")
	}
	hs := make([]*httptransport.Handler, len(eps))
	wshs := make([]*ws.Handler, len(eps))
	for i, e := range eps {
		hs[i] = httptransport.NewHandler(e.core, &httptransport.Options{
			Auth:                    auth.of(e.upstream),
			AllowedHosts:            allowedHosts(f.hosts, f.httpAddr),
			AllowedOrigins:          splitList(f.origins),
			MaxMessageBytes:         f.maxMessage,
			BodyTimeout:             f.bodyTimeout,
			SessionIdle:             f.sessionIdle,
			EmptySessionIdle:        f.emptyIdle,
			MaxSessions:             f.maxSessions,
			MaxSessionsPerPrincipal: f.maxSessionsP,
			MaxSessionsPerAddress:   f.maxSessionsA,
			StreamIdle:              f.streamIdle,
			KeepAlive:               f.keepAlive,
			Logger:                  &log,
		})
		wshs[i] = ws.NewHandler(e.core, &ws.AcceptOptions{
			Options: ws.Options{
				MaxMessageBytes: f.maxMessage,
				PingInterval:    f.wsPing,
				PingTimeout:     f.wsPingTimeout,
			},
			InitTimeout:    f.wsInitTimeout,
			AllowedHosts:   slices.Concat(allowedHosts(f.hosts, f.httpAddr), allowedHosts(f.hosts, f.wsAddr)),
			Auth:           auth.of(e.upstream),
			AllowedOrigins: splitList(f.origins),
			Logger:         &log,
		})
	}
	page := web.Handler()
	if f.gateway {
		// The demo page calls the demo tools, which a gateway does not have.
		page = gatewayPage(f.path, eps)
	}
	pr := probes{eps: eps}
	// mountWS mounts the WebSocket endpoints: the first's at /ws, each
	// upstream's at /servers/NAME/ws.
	mountWS := func(mux *http.ServeMux) {
		mux.Handle("/ws", wshs[0])
		for i, e := range eps[1:] {
			mux.Handle(serversPath+e.upstream+"/ws", wshs[i+1])
		}
	}

	type listener struct {
		ln  net.Listener
		srv *http.Server
	}
	var lns []listener
	limit := bound.limit
	listen := func(ln net.Listener, mux *http.ServeMux) {
		// A request's head must come within 10 s (a WebSocket handshake's too);
		// a connection between requests is closed after 2 minutes (an idle
		// keep-alive connection counts toward --max-conns). No ReadTimeout: it
		// would cut the event streams; --body-timeout bounds a POST body.
		lns = append(lns, listener{ln, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
			ErrorLog: stdlog.New(log, "", 0)}})
	}
	if bound.http != nil {
		mux := http.NewServeMux()
		mux.Handle(f.path, orWebSocket(auth.bound(hs[0]), wshs[0]))
		for i, e := range eps[1:] {
			mux.Handle(serversPath+e.upstream+"/mcp", orWebSocket(auth.bound(hs[i+1]), wshs[i+1]))
		}
		mountWS(mux)
		mux.Handle("/", page)
		auth.register(mux)
		pr.register(mux)
		sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcp_resume_http_sessions", Help: "Streamable HTTP sessions open"},
			func() float64 {
				n := 0
				for _, h := range hs {
					n += h.Sessions()
				}
				return float64(n)
			})
		cs := append([]prometheus.Collector{timer, sessions}, connMetrics(limit, wshs)...)
		cs = append(cs, ops...)
		cs = append(cs, auth.refusals)
		collector := metrics.NewCollector(eps[0].core.Engine())
		if len(eps) > 1 {
			engs := make([]metrics.Endpoint, len(eps))
			for i, e := range eps {
				engs[i] = metrics.Endpoint{Upstream: e.upstream, Engine: e.core.Engine()}
			}
			collector = metrics.NewEndpointsCollector(engs)
			cs = append(cs, upstreamsUp(eps))
		}
		mux.Handle("GET /metrics", auth.require(metrics.HandlerOf(collector, cs...)))
		listen(bound.http, mux)
	}
	if bound.ws != nil {
		mux := http.NewServeMux()
		mountWS(mux)
		mux.Handle("/", page)
		auth.register(mux)
		listen(bound.ws, mux)
	}
	errc := make(chan error, len(lns))
	for _, l := range lns {
		go func() { errc <- l.srv.Serve(l.ln) }()
	}
	for i, l := range lns {
		addr := l.ln.Addr().String()
		ev := withMemoryLimit(log.Info().Str("version", version).Int("pid", os.Getpid()))
		if i == 0 && f.httpAddr != "" {
			ev = ev.Str("transport", "http").Str("url", "http://"+addr+f.path)
		} else {
			ev = ev.Str("transport", "ws")
		}
		if len(eps) > 1 {
			ups := make([]string, 0, len(eps)-1)
			for _, e := range eps[1:] {
				ups = append(ups, e.upstream)
			}
			ev = ev.Strs("upstreams", ups).Str("servers", "http://"+addr+serversPath+"NAME/mcp")
		}
		ev.Str("ws", "ws://"+addr+"/ws").Str("page", "http://"+addr+"/").Bool("auth", auth.auth != nil).
			Stringer("maxWait", f.maxWait).Bool("conformance", f.conformance).Msg("mcp-resume serving")
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		log.Info().Msg("shutting down")
	}
	pr.shutdown()
	cores := make([]*mcp.Server, len(eps))
	for i, e := range eps {
		cores[i] = e.core
	}
	if err == nil && leaseLost(ctx) == nil {
		servers := make([]*http.Server, len(lns))
		for i, l := range lns {
			servers[i] = l.srv
		}
		drain(cores, servers, f.drainGrace, f.dataDir != "" || f.natsURL != "", log)
	}
	// Streams and WebSocket connections first: Shutdown waits for open requests,
	// and does not know hijacked connections.
	for i := range eps {
		hs[i].Close()
		wshs[i].Close()
	}
	for _, l := range lns {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if serr := l.srv.Shutdown(sctx); err == nil {
			err = serr
		}
		cancel()
	}
	for _, c := range cores {
		c.Close()
	}
	log.Info().Msg("mcp-resume stopped")
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// serversPath is where a gateway of several serves each upstream alone:
// /servers/NAME/mcp (Streamable HTTP, and WebSocket for a GET that asks for
// an upgrade) and /servers/NAME/ws.
const serversPath = "/servers/"

// upstreamsUp exports whether each upstream of a gateway of several is
// connected now.
func upstreamsUp(eps []endpoint) prometheus.Collector {
	desc := prometheus.NewDesc("mcp_resume_upstream_up", "1 while the upstream's connection is up, 0 while it is not (never reached, or being made again)", []string{"upstream"}, nil)
	return collectorFunc{desc, func(ch chan<- prometheus.Metric) {
		for _, e := range eps[1:] {
			v := 0.0
			if e.gw.Up() {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, e.upstream)
		}
	}}
}

// collectorFunc is a collector of one metric's values, collected by a func.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c collectorFunc) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// connMetrics exports limit (the connections open, and those refused at each
// bound) and the WebSocket connections wsh closed for not initializing.
func connMetrics(limit *transport.ConnLimit, wshs []*ws.Handler) []prometheus.Collector {
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcp_resume_connections", Help: "TCP connections open on the --http and --ws listeners"},
		func() float64 { return float64(limit.Conns()) })
	refused := func(bound string, n func(total, perAddress uint64) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcp_resume_connections_refused_total",
			Help:        "TCP connections refused at --max-conns (bound=total) or --max-conns-per-address (bound=address)",
			ConstLabels: prometheus.Labels{"bound": bound}},
			func() float64 { return float64(n(limit.Refused())) })
	}
	return []prometheus.Collector{open,
		refused("total", func(total, _ uint64) uint64 { return total }),
		refused("address", func(_, perAddress uint64) uint64 { return perAddress }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcp_resume_ws_init_timeouts_total",
			Help: "WebSocket connections closed for sending no initialize within --ws-init-timeout"},
			func() float64 {
				var n uint64
				for _, wsh := range wshs {
					n += wsh.InitTimeouts()
				}
				return float64(n)
			})}
}

// allowedHosts is --allowed-hosts, or by default the loopback names plus the
// listening host when it names one host (not a wildcard address).
func allowedHosts(flagVal, addr string) []string {
	if l := splitList(flagVal); len(l) > 0 {
		return l
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
		if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// toolServer returns the MCP server whose tools are served: the demo tools, or the
// conformance suite's fixture set.
func toolServer(conformance bool) *server.MCPServer {
	if conformance {
		return conformanceServer(version)
	}
	return demo.Server(version)
}

// logOutput is where the logs go: zerolog's human-readable console format when w
// is a terminal (a character device), JSON lines otherwise.
func logOutput(w io.Writer) io.Writer {
	if isTerminal(w) {
		return zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	return w
}

// gatewayPage is what a gateway serves at /: where its endpoints are (the demo
// page calls tools only `serve` has).
func gatewayPage(path string, eps []endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "mcp-resume gateway %s: Streamable HTTP at %s, WebSocket at /ws (the demo page is mcp-resume serve's)\n", version, path)
		for _, e := range eps[1:] {
			fmt.Fprintf(w, "upstream %s alone: Streamable HTTP at %s%s/mcp, WebSocket at %s%s/ws\n", e.upstream, serversPath, e.upstream, serversPath, e.upstream)
		}
	})
}
