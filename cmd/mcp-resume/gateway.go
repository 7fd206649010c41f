package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-resume/mcp-resume/gateway"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
)

const gatewayUsage = `usage: mcp-resume gateway [flags] -- CMD ARGS...
       mcp-resume gateway --upstream URL [flags]

Serves another MCP server's tools, resources, prompts and completions with resumable
requests and tasks, in both protocol eras: the upstream runs as a stdio child (started
again when it exits) or is reached over Streamable HTTP (http://, https://) or WebSocket
(ws://, wss://). Every serve flag applies.

examples:
  mcp-resume gateway -- npx -y @modelcontextprotocol/server-everything stdio
  mcp-resume gateway --data-dir ./state -- python my_server.py
  MY_TOKEN=... mcp-resume gateway --upstream https://example.com/mcp --upstream-token-env MY_TOKEN
  mcp-resume gateway --upstream wss://example.com/ws --upstream-header 'X-Api-Key: ${MY_KEY}'

flags:
`

// startGateway starts the upstream and mirrors it; its requests to the
// upstream are traced with tp and measured with onOp (nil: not).
func startGateway(f *serveFlags, command []string, tools map[string]mcp.Policy, def mcp.Policy, stderr io.Writer, log zerolog.Logger,
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
		Restartable: func(name string) bool {
			if p, ok := tools[name]; ok {
				return p.Restartable
			}
			return def.Restartable
		},
	}
	if f.upstream == "" && (f.upstreamTokenEnv != "" || f.upstreamHeaders.h != nil) {
		return nil, fmt.Errorf("--upstream-token-env and --upstream-header go with --upstream")
	}
	if f.upstream != "" && len(f.childEnv) > 0 {
		return nil, fmt.Errorf("--env goes with a command after -- (the child's environment), not with --upstream")
	}
	opts.Header = f.upstreamHeaders.h.Clone()
	if f.upstreamTokenEnv != "" {
		tok := os.Getenv(f.upstreamTokenEnv)
		if tok == "" {
			return nil, fmt.Errorf("--upstream-token-env: %s is not set or empty", f.upstreamTokenEnv)
		}
		if opts.Header == nil {
			opts.Header = http.Header{}
		}
		opts.Header.Set("Authorization", "Bearer "+tok)
	}
	g, err := gateway.New(context.Background(), opts)
	if err != nil {
		if f.upstream != "" && opts.Header.Get("Authorization") == "" && strings.Contains(err.Error(), "401") {
			err = fmt.Errorf("%w\n(the upstream wants a token: put it in an environment variable and name it with --upstream-token-env)", err)
		}
		return nil, err
	}
	info := g.ServerInfo()
	log.Info().Str("upstream", info.Name).Str("upstreamVersion", info.Version).Msg("gateway ready")
	return g, nil
}
