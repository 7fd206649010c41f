package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

const connectUsage = `usage: mcp-resume connect [flags] URL

Serves a remote MCP server (Streamable HTTP at URL) on stdin/stdout, for the one
local client that launched it: a desktop app or an IDE that only starts local
servers. Its calls survive what breaks between here and the remote: a cut
connection, a connection gone silent (a laptop's sleep, a NAT that forgot the
flow), the remote restarting on its data. Calls the remote makes resumable
(SEP-975, as mcp-resume serve and gateway do) are resumed on a new connection,
exactly once; the local client sees none of it. Logs go to stderr: one line per
loss of the remote, nothing else (--log-level info for more).

example, in a desktop app's or an IDE's MCP configuration:
  {"mcpServers": {"remote": {"command": "mcp-resume",
    "args": ["connect", "https://mcp.example.com/mcp"]}}}

flags:
`

// connect is `mcp-resume connect`: the gateway with its stdio face in front of
// URL, quiet by default.
func connect(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, connectUsage); fs.PrintDefaults() }
	tokenEnv := fs.String("token-env", "", "the name of an environment variable holding a bearer token sent to the remote")
	logLevel := fs.String("log-level", "warn", "log level on stderr: debug, info, warn, error")
	dataDir := fs.String("data-dir", "", "keep the local client's calls in this directory, so that they survive a restart of connect itself (see serve --data-dir)")
	if err := parseAnywhere(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("connect: want the remote's URL (got %q)", fs.Args())
	}
	url := fs.Arg(0)
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return errors.New("connect: the URL must be http:// or https:// (Streamable HTTP)")
	}
	gw := []string{"--stdio", "--upstream", url, "--log-level", *logLevel}
	if *tokenEnv != "" {
		gw = append(gw, "--upstream-token-env", *tokenEnv)
	}
	if *dataDir != "" {
		gw = append(gw, "--data-dir", *dataDir)
	}
	return serve(gw, stdin, stdout, stderr, true)
}
