package dial

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/mcptrace"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// Kind is the transport an endpoint is reached by.
type Kind uint8

const (
	// HTTP is Streamable HTTP: an http:// or https:// URL.
	HTTP Kind = iota + 1
	// WebSocket is a ws:// or wss:// URL.
	WebSocket
	// Stdio is a child process's stdin and stdout.
	Stdio
)

// Schemes are the URL schemes of k, in the order a person is told them
// ("http", "https"); none for Stdio.
func (k Kind) Schemes() []string {
	switch k {
	case HTTP:
		return []string{"http", "https"}
	case WebSocket:
		return []string{"ws", "wss"}
	}
	return nil
}

// Transport names k as a client's span has it in network.transport (one of
// mcptrace's Transport constants).
func (k Kind) Transport() string {
	switch k {
	case WebSocket:
		return mcptrace.TransportWebSocket
	case Stdio:
		return mcptrace.TransportStdio
	}
	return mcptrace.TransportHTTP
}

func (k Kind) String() string {
	switch k {
	case HTTP:
		return "Streamable HTTP"
	case WebSocket:
		return "WebSocket"
	case Stdio:
		return "stdio"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// kindOf maps a URL scheme (lower case, as url.Parse leaves it) to its Kind.
var kindOf = map[string]Kind{"http": HTTP, "https": HTTP, "ws": WebSocket, "wss": WebSocket}

// ErrNotURL is matched (errors.Is) by Parse's error for an address that is
// not an absolute URL with a host ("localhost:8080", "//host/mcp", "mailto:x").
var ErrNotURL = errors.New("not an absolute URL with a host")

// SchemeError is Parse's error for a URL whose scheme is none of an MCP
// transport's.
type SchemeError struct {
	URL    string
	Scheme string // lower case
}

func (e *SchemeError) Error() string {
	return fmt.Sprintf("dial: %q: the scheme %s:// is none of MCP's (http://, https://, ws://, wss://)", e.URL, e.Scheme)
}

// Endpoint is an MCP server to connect to: a URL (HTTP, WebSocket) or a
// command (Stdio). Parse and Command make one; the zero Endpoint is none,
// and dialing it is an error. An Endpoint is a value: safe for concurrent
// use.
type Endpoint struct {
	kind   Kind
	scheme string
	url    string   // as given: the OAuth resource and what messages name
	argv   []string // Stdio
}

// Parse returns the endpoint at raw, by its scheme: http:// and https:// are
// Streamable HTTP, ws:// and wss:// WebSocket, in any case (RFC 3986 §3.1).
// An address that is not an absolute URL with a host is an error matching
// ErrNotURL; one of another scheme a *SchemeError.
func Parse(raw string) (Endpoint, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return Endpoint{}, fmt.Errorf("dial: %q: %w: %w", raw, ErrNotURL, err)
	case u.Scheme == "" || u.Host == "" || u.Opaque != "":
		return Endpoint{}, fmt.Errorf("dial: %q: %w", raw, ErrNotURL)
	}
	k, ok := kindOf[u.Scheme]
	if !ok {
		return Endpoint{}, &SchemeError{URL: raw, Scheme: u.Scheme}
	}
	return Endpoint{kind: k, scheme: u.Scheme, url: raw}, nil
}

// Command returns the endpoint of a child started as argv: the program and
// its arguments.
func Command(argv ...string) (Endpoint, error) {
	if len(argv) == 0 || argv[0] == "" {
		return Endpoint{}, errors.New("dial: no command to start")
	}
	return Endpoint{kind: Stdio, argv: append([]string(nil), argv...)}, nil
}

// Kind is the transport e is reached by; 0 for the zero Endpoint.
func (e Endpoint) Kind() Kind { return e.kind }

// Scheme is e's URL scheme in lower case ("https"); "" for a command.
func (e Endpoint) Scheme() string { return e.scheme }

// URL is e's URL as it was given to Parse; "" for a command.
func (e Endpoint) URL() string { return e.url }

// String is e's URL, or its command line.
func (e Endpoint) String() string {
	if e.kind == Stdio {
		return strings.Join(e.argv, " ")
	}
	return e.url
}

// Options say how to connect to an endpoint: the credentials, then what each
// transport takes. Nil means defaults; a field says which transports read it.
type Options struct {
	// Header is sent with every Streamable HTTP request and with the
	// WebSocket handshake (an API key's Authorization, a proxy's headers).
	Header http.Header
	// Client makes the Streamable HTTP requests. Default http.DefaultClient.
	// Its redirects are followed within the endpoint's origin only
	// (transport.SameOriginClient).
	Client *http.Client
	// Wrap, when set, wraps the round tripper of every HTTP request, the
	// WebSocket handshake included, over Header: an OAuth client
	// (oauth.Transport) that adds its token and renews it on a 401.
	Wrap func(http.RoundTripper) http.RoundTripper

	// Streamable HTTP: the httptransport.ClientOptions of the same names.
	Protocol         string
	Keep             *httptransport.KeptSession
	FailOnStreamLoss bool
	ReportStreamLoss bool
	Silence          time.Duration

	// WSPing is the interval of a WebSocket's keepalive pings; a pong half
	// as late takes the connection for dead. 0: ws.Options' defaults.
	WSPing time.Duration

	// Stdio: the child's environment is stdio.Environ(Env) (stdio.BaseEnv
	// and the variables Env names, never the rest of this process's), Dir
	// its working directory, and its stderr goes to Stderr (nil: discarded).
	Env    []string
	Dir    string
	Stderr io.Writer
}

// HTTPClient is the client of o's HTTP requests to an endpoint: Client
// (default http.DefaultClient) with its round tripper wrapped by Wrap,
// following redirects within the first request's origin only
// (transport.SameOriginClient). Header is not in it: the Streamable HTTP
// connection adds it to each request.
func (o *Options) HTTPClient() *http.Client {
	return transport.SameOriginClient(o.wrapped())
}

// wrapped is Client with its round tripper wrapped by Wrap (a copy when
// there is a Wrap).
func (o *Options) wrapped() *http.Client {
	if o == nil {
		return nil
	}
	if o.Wrap == nil {
		return o.Client
	}
	c := *cmp.Or(o.Client, http.DefaultClient)
	c.Transport = o.Wrap(cmp.Or(c.Transport, http.DefaultTransport))
	return &c
}

// Dial opens a connection to e. A Streamable HTTP connection makes no
// request before its first Write (its errors come then); a WebSocket's
// handshake is made on ctx; a child is started, and lives past ctx until the
// connection is closed.
func (e Endpoint) Dial(ctx context.Context, opts *Options) (transport.Conn, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch e.kind {
	case HTTP:
		return httptransport.Dial(e.url, &httptransport.ClientOptions{
			Client: o.wrapped(), Header: o.Header, Protocol: o.Protocol, Keep: o.Keep,
			FailOnStreamLoss: o.FailOnStreamLoss, ReportStreamLoss: o.ReportStreamLoss, Silence: o.Silence,
		}), nil
	case WebSocket:
		return ws.Dial(ctx, e.url, &ws.DialOptions{Header: o.Header, Wrap: o.Wrap,
			Options: ws.Options{PingInterval: o.WSPing, PingTimeout: o.WSPing / 2}})
	case Stdio:
		env, err := stdio.Environ(o.Env)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(e.argv[0], e.argv[1:]...)
		cmd.Env = env
		cmd.Dir = o.Dir
		cmd.Stderr = o.Stderr
		return stdio.Command(cmd, nil)
	}
	return nil, errors.New("dial: no endpoint (the zero Endpoint)")
}

// Dialer returns a function that dials e with opts as they are now, for
// mcp/client.Connect (a client.Dialer), which calls it for every
// connection.
func (e Endpoint) Dialer(opts *Options) func(context.Context) (transport.Conn, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	return func(ctx context.Context) (transport.Conn, error) { return e.Dial(ctx, &o) }
}
