package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/oauth"
	"github.com/mcp-resume/mcp-resume/transport/dial"
)

// envOAuthDir names the directory of the stored logins instead of the user's
// configuration directory's mcp-resume/oauth.
const envOAuthDir = "MCP_RESUME_OAUTH_DIR"

// loginFlags are the flags of an OAuth client that logs a person in: login,
// connect (and call, tools, status, task through the logins stored).
type loginFlags struct {
	clientID, clientSecretEnv, clientIssuer, clientMetadataURL string

	// Set by the command, not by flags: how long a login in the browser may
	// take (0: oauth's default), and a line told before one starts.
	loginTimeout time.Duration
	hint         string
}

func (l *loginFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.clientID, "client-id", "", "log in as this client, registered beforehand at the server's authorization server (default: the client registers itself where the server lets it)")
	fs.StringVar(&l.clientSecretEnv, "client-secret-env", "", "with --client-id and --client-issuer: the name of an environment variable holding its secret (a public client has none)")
	fs.StringVar(&l.clientIssuer, "client-issuer", "", "with --client-id: the issuer of the authorization server the client is registered at; the client (and its secret) is used there only, and a server naming other authorization servers is refused (required with --client-secret-env)")
	fs.StringVar(&l.clientMetadataURL, "client-metadata-url", "", "the URL of this client's Client ID Metadata Document, its client id where the authorization server supports them")
}

// oauthStore is the store of the logins: $MCP_RESUME_OAUTH_DIR, else the
// user's configuration directory's mcp-resume/oauth.
func oauthStore() (*oauth.FileStore, error) {
	if d := os.Getenv(envOAuthDir); d != "" {
		return &oauth.FileStore{Dir: d}, nil
	}
	d, err := oauth.DefaultDir()
	if err != nil {
		return nil, fmt.Errorf("the directory of stored logins: %w (set %s)", err, envOAuthDir)
	}
	return &oauth.FileStore{Dir: d}, nil
}

// session returns the OAuth client of the server at serverURL: its logins stored,
// a new one in the browser (the URL printed on tell too) when the server
// wants one.
func (l *loginFlags) session(serverURL string, tell io.Writer, log *zerolog.Logger) (*oauth.Session, error) {
	store, err := oauthStore()
	if err != nil {
		return nil, err
	}
	authorize := oauth.Loopback(oauth.OpenBrowser, tell)
	if l.hint != "" && tell != nil {
		loopback := authorize
		authorize = func(ctx context.Context, prev string, start func(string) (string, error)) (url.Values, error) {
			fmt.Fprintln(tell, l.hint)
			return loopback(ctx, prev, start)
		}
	}
	opts := &oauth.ClientOptions{
		Store: store, Authorize: authorize, LoginTimeout: l.loginTimeout,
		ClientID: l.clientID, ClientIssuer: l.clientIssuer, ClientMetadataURL: l.clientMetadataURL, Logger: log,
	}
	if l.clientIssuer != "" {
		if l.clientID == "" {
			return nil, errors.New("--client-issuer goes with --client-id")
		}
		if err := oauth.CheckIssuer(l.clientIssuer); err != nil {
			return nil, fmt.Errorf("--client-issuer: %w", err)
		}
	}
	if l.clientSecretEnv != "" {
		if l.clientID == "" || l.clientIssuer == "" {
			return nil, errors.New("--client-secret-env goes with --client-id and --client-issuer (the issuer the client is registered at: its secret goes there and nowhere else)")
		}
		if opts.ClientSecret = os.Getenv(l.clientSecretEnv); opts.ClientSecret == "" {
			return nil, fmt.Errorf("--client-secret-env: %s is not set or empty", l.clientSecretEnv)
		}
	}
	return oauth.NewSession(serverURL, opts), nil
}

// wrap is the round tripper wrapper of s (for ws.DialOptions.Wrap and the
// gateway).
func wrap(s *oauth.Session) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return &oauth.Transport{Session: s, Base: rt} }
}

// loginWait bounds a login in the browser that a command (call, tools,
// status, task) starts before it connects.
const loginWait = 5 * time.Minute

// probed is what one request to a server tells of it.
type probed struct {
	asked bool // it asked for a token (401, 403), or one was held
	// answer is why what answered is not an MCP endpoint (nil: it is): it
	// cannot be reached, refuses a WebSocket handshake, or answers the ping
	// with no JSON-RPC message (a page, 404, 405).
	answer error
}

// probe sends one request to url through s, so that a server that wants a
// login gets it now: a ping POSTed to an HTTP endpoint, a WebSocket
// handshake. The error is a login's that failed; what the request tells of
// the server is in probed.
func probe(ctx context.Context, url string, s *oauth.Session) (probed, error) {
	var p probed
	ep, err := dial.Parse(url)
	if err != nil {
		return p, err
	}
	tok, err := s.Token(ctx)
	if err != nil {
		return p, err
	}
	p.asked = tok != ""
	seen := func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
				p.asked = true
			}
			return resp, err
		})
	}
	o := &dial.Options{Wrap: func(rt http.RoundTripper) http.RoundTripper { return wrap(s)(seen(rt)) }}
	if ep.Kind() == dial.WebSocket {
		c, err := ep.Dial(ctx, o)
		switch {
		case err == nil:
			_ = c.Close()
		case loginError(err) != nil:
			return p, err
		default:
			p.answer = fmt.Errorf("the WebSocket handshake with %s failed: %w", url, err)
		}
		return p, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":"login","method":"ping"}`))
	if err != nil {
		return p, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := o.HTTPClient().Do(req)
	if err != nil {
		if loginError(err) != nil {
			return p, err
		}
		p.answer = fmt.Errorf("%s cannot be reached: %w", url, err)
		return p, nil
	}
	defer resp.Body.Close()
	p.answer = mcpAnswer(url, resp)
	return p, nil
}

// mcpAnswer is nil when resp answers a JSON-RPC request as an MCP endpoint
// does (a JSON-RPC message, or an event stream), else why it does not.
func mcpAnswer(url string, resp *http.Response) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		return nil
	}
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if (mt == "application/json" || strings.HasSuffix(mt, "+json")) && json.Unmarshal(b, &msg) == nil && msg.JSONRPC == "2.0" {
		return nil
	}
	return fmt.Errorf("%s answers %s (%s), not as an MCP endpoint", url, resp.Status, cmp.Or(mt, "no content type"))
}

// loginError is err when it is a login's (not the network's).
func loginError(err error) error {
	if err != nil && strings.Contains(err.Error(), "oauth:") {
		return err
	}
	return nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

const loginUsage = `usage: mcp-resume login [flags] URL

Logs in to the MCP server at URL (http(s):// or ws(s)://) the way the MCP
authorization spec describes: its protected resource metadata names its
authorization server, where this client registers itself (or uses --client-id)
and you log in in your browser (the URL is printed too, for a machine without
one). The tokens are kept, owner-only, in the user's configuration directory
(` + "`" + `mcp-resume/oauth` + "`" + `, or $MCP_RESUME_OAUTH_DIR), for connect, call, tools, status and
task, which renew them and log in again themselves when the server asks.

flags:
`

// login is `mcp-resume login`.
func login(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, loginUsage); fs.PrintDefaults() }
	var l loginFlags
	l.register(fs)
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the login in the browser")
	url, err := parseServerURL(fs, args)
	if err != nil {
		return err
	}
	if _, err := checkURL("login", url, dial.HTTP, dial.WebSocket); err != nil {
		return err
	}
	s, err := l.session(url, stderr, nil)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	p, err := probe(ctx, url, s)
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		return errors.New("login: interrupted: the login was not finished")
	case err != nil:
		return fmt.Errorf("login: %w", err)
	}
	g := s.Current()
	switch {
	case g != nil:
		fmt.Fprintf(stdout, "logged in to %s (authorization server %s)\n", url, g.Issuer)
	case p.asked:
		return fmt.Errorf("login: %s refused the request, and names no authorization server to log in at (an API key in %s?)", url, envClientKey)
	case p.answer != nil:
		return fmt.Errorf("login: %w: is the URL the server's MCP endpoint? (mcp-resume serve's is /mcp, its WebSocket /ws)", p.answer)
	default:
		fmt.Fprintf(stdout, "%s wants no login\n", url)
	}
	return nil
}

// parseServerURL parses args with fs, flags anywhere, and returns the one
// argument left: the URL of the server of login or logout (fs's name).
func parseServerURL(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseAnywhere(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return "", fmt.Errorf("%s: want the server's URL (got %q)", fs.Name(), fs.Args())
	}
	return fs.Arg(0), nil
}

// logout is `mcp-resume logout`.
func logout(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("logout", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: mcp-resume logout URL\n\nForgets the login to the MCP server at URL (its tokens, revoked at the authorization\nserver when it has a revocation endpoint); the client's registration there stays.\n")
	}
	url, err := parseServerURL(fs, args)
	if err != nil {
		return err
	}
	var l loginFlags
	s, err := l.session(url, stderr, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	had, err := s.Logout(ctx)
	if err != nil {
		return err
	}
	if had {
		fmt.Fprintf(stdout, "logged out of %s\n", url)
	} else {
		fmt.Fprintf(stdout, "not logged in to %s\n", url)
	}
	return nil
}
