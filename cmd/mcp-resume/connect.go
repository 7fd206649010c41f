package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp"
)

const connectUsage = `usage: mcp-resume connect [flags] URL

Serves a remote MCP server (Streamable HTTP at an http(s):// URL, WebSocket at a
ws(s):// one) on stdin/stdout, for the one local client that launched it: a
desktop app or an IDE that only starts local servers. Its calls survive what
breaks between here and the remote: a cut connection, a connection gone silent
(a laptop's sleep, a NAT that forgot the flow), the remote restarting on its
data. Calls the remote makes resumable (SEP-975, as mcp-resume serve and gateway
do) are resumed on a new connection, exactly once; the local client sees none of
it. Logs go to stderr: one line per loss of the remote, nothing else
(--log-level info for more).

The remote's credentials: --header, --token-env, or the API key in
MCP_RESUME_API_KEY (as mcp-resume call), sent as a bearer token; without them,
an OAuth login: run mcp-resume login URL in a terminal first, and connect uses
it (and renews its tokens as they expire; several connects share one login).
Without one, connect logs in at start-up, in your browser (the URL is in its
log too), within --login-timeout: the app stops waiting for a server that has
not started in 60 s, MFA included; past it, connect exits telling you to run
mcp-resume login URL.

example, in a desktop app's or an IDE's MCP configuration (command as an absolute
path: an app started from a dock does not get your shell's PATH):
  {"mcpServers": {"remote": {"command": "/home/me/go/bin/mcp-resume",
    "args": ["connect", "https://mcp.example.com/mcp",
             "--header", "Authorization: Bearer ${REMOTE_TOKEN}"],
    "env": {"REMOTE_TOKEN": "..."}}}}

flags:
`

// defaultConnectAnswerWithin is connect's --answer-within: under the 60 s after
// which the TypeScript SDK (and claude.ai, GitHub Copilot) give up on a call,
// with room for the answer to travel and for a client whose clock started
// before ours; progress does not reset most clients' timers.
const defaultConnectAnswerWithin = 45 * time.Second

// defaultConnectLoginTimeout is connect's --login-timeout: a login at
// start-up runs while the local app waits for this server's initialize (60 s
// in the TypeScript SDK and the apps built on it); what is left is for the
// remote's first connection and its lists.
const defaultConnectLoginTimeout = 45 * time.Second

// connect is `mcp-resume connect`: the gateway with its stdio face in front of
// URL, quiet by default.
func connect(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, connectUsage); fs.PrintDefaults() }
	tokenEnv := fs.String("token-env", "", "the name of an environment variable holding a bearer token sent to the remote")
	logLevel := fs.String("log-level", "warn", "log level on stderr: debug, info, warn, error")
	dataDir := fs.String("data-dir", "", "keep the local client's calls in this directory, so that they survive a restart of connect itself (see serve --data-dir)")
	answerWithin := fs.Duration("answer-within", defaultConnectAnswerWithin, "a tool call still running after this long is answered with a deferred answer: the tool runs on, and the local client's model gets its result by calling the "+mcp.DefaultAwaitTool+" tool (local clients stop waiting on their own: 60 s in the TypeScript SDK, claude.ai, Copilot) (0: never)")
	var headers rawHeaders
	fs.Var(&headers, "header", "a header sent with every request to the remote, `Name: value` (repeatable, as mcp-remote's); ${VAR} in the value is the environment variable VAR")
	var l loginFlags
	l.register(fs)
	fs.DurationVar(&l.loginTimeout, "login-timeout", defaultConnectLoginTimeout, "a login in the browser at start-up (no login stored, the remote wants one) must end within this, before the local app stops waiting for this server (60 s in the TypeScript SDK, claude.ai, Copilot); past it, connect exits telling you to run mcp-resume login URL")
	if err := parseAnywhere(fs, args); err != nil {
		return err
	}
	if l.loginTimeout <= 0 {
		return errors.New("connect: --login-timeout must be positive")
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("connect: want the remote's URL (got %q)", fs.Args())
	}
	url := fs.Arg(0)
	if !slices.ContainsFunc([]string{"http://", "https://", "ws://", "wss://"}, func(p string) bool { return strings.HasPrefix(url, p) }) {
		return errors.New("connect: the URL must be http(s):// (Streamable HTTP) or ws(s):// (WebSocket)")
	}
	gw := []string{"--stdio", "--upstream", url, "--log-level", *logLevel}
	for _, h := range headers {
		gw = append(gw, "--upstream-header", h)
	}
	switch {
	case *tokenEnv != "":
		gw = append(gw, "--upstream-token-env", *tokenEnv)
	case !headers.has("Authorization") && strings.TrimSpace(os.Getenv(envClientKey)) != "":
		gw = append(gw, "--upstream-token-env", envClientKey)
	}
	if *dataDir != "" {
		gw = append(gw, "--data-dir", *dataDir)
	}
	gw = append(gw, "--answer-within", answerWithin.String())
	return serve(gw, stdin, stdout, stderr, modeConnect, &l)
}

// rawHeaders collects --header values as given (checked as headerList checks
// them), for the gateway's --upstream-header.
type rawHeaders []string

func (r *rawHeaders) String() string { return "" } // values may be secrets

func (r *rawHeaders) Set(s string) error {
	var check headerList
	if err := check.Set(s); err != nil {
		return err
	}
	*r = append(*r, s)
	return nil
}

// has reports whether a header of that name was given.
func (r rawHeaders) has(name string) bool {
	return slices.ContainsFunc(r, func(h string) bool {
		n, _, _ := strings.Cut(h, ":")
		return strings.EqualFold(strings.TrimSpace(n), name)
	})
}

// connectLogin is connect's OAuth client of the remote at url, logged in now
// when the remote wants a login and none is stored: before the gateway's
// first connection (whose deadline is no person's), within l.loginTimeout
// (the local app's initialize is waiting), ended at once by SIGINT or
// SIGTERM (the app giving up on this server). A login that does not end in
// time is an error that says to log in in a terminal.
func connectLogin(l *loginFlags, url string, stderr io.Writer, log *zerolog.Logger) (func(http.RoundTripper) http.RoundTripper, error) {
	l.hint = fmt.Sprintf("mcp-resume: %s wants a login (none is stored, or the one stored was refused): log in in the browser within %s (the app waits about 60 s for this server), "+
		"or run `mcp-resume login %s` in a terminal, then restart this server in the app", url, l.loginTimeout, url)
	s, err := l.session(url, stderr, log)
	if err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_, err = probe(ctx, url, s)
	switch {
	case err == nil:
		return wrap(s), nil
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("connect: the login to %s did not end within --login-timeout %s, and the app stops waiting for this server soon after: run `mcp-resume login %s` in a terminal, then restart this server in the app", url, l.loginTimeout, url)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("connect: interrupted while logging in to %s: run `mcp-resume login %s` in a terminal, then restart this server in the app", url, url)
	}
	return nil, fmt.Errorf("connect: logging in to the remote %s: %w", url, err)
}
