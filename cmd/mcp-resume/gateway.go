package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/internal/backoff"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/dial"
)

const gatewayUsage = `usage: mcp-resume gateway [flags] -- CMD ARGS...
       mcp-resume gateway --upstream URL [flags]
       mcp-resume gateway --config FILE [flags]   (the file names the upstreams)

Serves another MCP server's tools, resources, prompts and completions with resumable
requests and tasks, in both protocol eras: the upstream runs as a stdio child (started
again when it exits) or is reached over Streamable HTTP (http://, https://) or WebSocket
(ws://, wss://). Every serve flag applies.

examples:
  mcp-resume gateway -- npx -y @modelcontextprotocol/server-everything stdio
  mcp-resume gateway --data-dir ./state -- python my_server.py
  MY_TOKEN=... mcp-resume gateway --upstream https://example.com/mcp --upstream-token-env MY_TOKEN
  mcp-resume gateway --upstream wss://example.com/ws --upstream-header 'X-Api-Key: ${MY_KEY}'
  mcp-resume gateway --config gateway.yaml   # several: all at /mcp (NAME__tool), each at /servers/NAME/mcp

flags:
`

// startGateway starts the upstream and mirrors it; its requests to the
// upstream are traced with tp and measured with onOp (nil: not).
// policyOf is the policy in effect of a tool: the core's once it is made (a
// reload changes it), the start's before.
func startGateway(f *serveFlags, command []string, policyOf func(tool string) mcp.Policy, stderr io.Writer, log zerolog.Logger,
	tp trace.TracerProvider, onOp func(client.Operation)) (*gateway.Gateway, error) {
	opts := &gateway.Options{
		TracerProvider: tp,
		OnOperation:    onOp,
		Command:        command,
		Env:            f.childEnv,
		URL:            f.upstream,
		Stderr:         stderr, // the child's logs with ours
		Version:        version,
		Logger:         &log,
		Restartable:    func(name string) bool { return policyOf(name).Restartable },
	}
	if f.upstream == "" && (f.upstreamTokenEnv != "" || f.upstreamHeaders.h != nil) {
		return nil, fmt.Errorf("--upstream-token-env and --upstream-header go with --upstream")
	}
	if f.upstream != "" && len(f.childEnv) > 0 {
		return nil, fmt.Errorf("--env goes with a command after -- (the child's environment), not with --upstream")
	}
	if f.upstream != "" {
		flag := "--upstream"
		if f.connect {
			flag = "connect"
		}
		if _, err := checkURL(flag, f.upstream, dial.HTTP, dial.WebSocket); err != nil {
			return nil, err
		}
	}
	var err error
	if opts.Header, err = withTokenFrom(f.upstreamHeaders.h, f.upstreamTokenEnv, "--upstream-token-env"); err != nil {
		return nil, err
	}
	opts.Wrap = f.oauth.upstreamWrap(f.upstream, &log)
	if f.login != nil && opts.Wrap == nil && opts.Header.Get("Authorization") == "" {
		w, err := connectLogin(f.login, f.upstream, stderr, &log)
		if err != nil {
			return nil, err
		}
		opts.Wrap = w
	}
	var g *gateway.Gateway
	if f.connect {
		g, err = startRemote(opts, log)
	} else if g, err = gateway.New(context.Background(), opts); err != nil && f.upstream != "" {
		fix := "put the upstream's token in an environment variable and name it with --upstream-token-env, or give --upstream-header"
		if f.oauth.upstreamClientID != "" {
			fix = "it refused the gateway's own token (--upstream-oauth-client-id): check what the client may ask for at its authorization server (--upstream-oauth-scope), that --upstream-oauth-issuer is the authorization server the upstream takes tokens of, and that it issues tokens for the resource the upstream's protected resource metadata names"
		}
		err = explain(err, f.upstream, fix)
	}
	if err != nil {
		return nil, err
	}
	info := g.ServerInfo()
	log.Info().Str("upstream", info.Name).Str("upstreamVersion", info.Version).Msg("gateway ready")
	return g, nil
}

// remoteWait is how long connect waits for a remote that is not there when it
// starts (a laptop waking before its network, a remote restarting): a local
// client waits about as long for its server's initialize (the TypeScript SDK's
// request timeout is 60 s).
const remoteWait = time.Minute

// startRemote is gateway.New for connect: a remote that cannot be reached is
// tried again for remoteWait, and said so once; one that refuses connect (a
// status: credentials, a wrong path) or redirects it elsewhere is not. Errors
// speak of the remote.
func startRemote(opts *gateway.Options, log zerolog.Logger) (*gateway.Gateway, error) {
	creds := "give them with --header 'Authorization: Bearer ${TOKEN}' (the variable set in the launching app's env) or --token-env NAME"
	l := backoff.Start(250*time.Millisecond, 5*time.Second, remoteWait, 0)
	for said := false; ; {
		g, err := gateway.New(context.Background(), opts)
		if err == nil {
			if said {
				log.Warn().Msg("connect: the remote is reachable now")
			}
			return g, nil
		}
		// What the remote or the network said, without the gateway's layers.
		var refused *transport.RefusedError
		var redirected *transport.RedirectError
		var netErr *net.OpError
		switch {
		case errors.As(err, &refused):
			err = refused
		case errors.As(err, &redirected):
			err = redirected
		case errors.As(err, &netErr):
			err = netErr
		}
		giveUp := func() (*gateway.Gateway, error) {
			return nil, explain(fmt.Errorf("connect: the remote %s: %w", opts.URL, err), opts.URL, creds)
		}
		if refused != nil || redirected != nil {
			return giveUp()
		}
		if !said {
			log.Warn().Str("remote", opts.URL).Str("error", err.Error()).Stringer("for", remoteWait).Msg("connect: the remote is not reachable; trying again")
			said = true
		}
		if !l.Pause(context.Background()) {
			return giveUp()
		}
	}
}
