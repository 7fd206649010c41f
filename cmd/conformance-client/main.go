// Command client is the client under test of the official MCP conformance
// suite's client mode (@modelcontextprotocol/conformance `client --command`):
// the suite starts a server of its own per scenario, runs
// `sh -c "<command> <url>"` with the scenario's name in
// MCP_CONFORMANCE_SCENARIO (and its data, as JSON, in
// MCP_CONFORMANCE_CONTEXT; the protocol version to speak in
// MCP_CONFORMANCE_PROTOCOL_VERSION, from 0.2.0 on), and checks what the
// client sent. This program is the project's Go client (mcp/client) over
// Streamable HTTP, dialed as `mcp-resume connect` dials its remote, doing
// what each scenario asks: list the tools and call them, answer a server's
// questions, read a resource, get a prompt.
//
// It speaks 2026-07-28 when the suite asks for it (stateless requests,
// server/discover, multi round-trip requests), 2025-11-25 otherwise. It exits
// 0 when the scenario's exchange went through, 1 with the reason on stderr
// otherwise. The auth/* scenarios go through the OAuth client of package oauth
// as connect's requests do (auth.go): a person's login with the redirect
// read headless, or a machine's client credentials.
//
// .ci/conformance builds it and runs the suite against it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stderr))
}

// timeout bounds a scenario's exchange: the suite's own default is 30 s per
// client, after which it kills the client and fails the scenario.
const timeout = 25 * time.Second

// run runs the scenario getenv names against the server whose URL is the last
// of args, and returns the exit code; what went wrong goes to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: client URL (with MCP_CONFORMANCE_SCENARIO set, as the conformance suite runs it)")
		return 2
	}
	sc, err := scenarioOf(getenv, args[len(args)-1])
	if err != nil {
		fmt.Fprintf(stderr, "client: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := sc.run(ctx); err != nil {
		fmt.Fprintf(stderr, "client: scenario %s: %v\n", sc.Name, err)
		return 1
	}
	return 0
}
