// Command mcp-resume serves MCP tools with resumable requests (SEP-975).
//
//	mcp-resume serve [--stdio] [flags]
//
// Run `mcp-resume serve -h` for the flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/internal/demo"
	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/stdio"
)

var version = "dev"

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "mcp-resume:", err)
		}
		os.Exit(2)
	}
}

const usage = `usage: mcp-resume <command> [flags]

commands:
  serve     serve the demo tools with resumable requests (stdio)
  version   print the version
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdin, stdout, stderr)
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
	stdio         bool
	maxWait       time.Duration
	minWait       time.Duration
	retention     time.Duration
	delivered     time.Duration
	tombstoneTTL  time.Duration
	maxLive       int
	maxRetained   int
	queueBytes    int
	maxMessage    int
	policies      string
	defaultPolicy string
	logLevel      string
}

func serve(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&f.stdio, "stdio", true, "serve MCP on stdin/stdout (newline-delimited JSON); logs go to stderr")
	fs.DurationVar(&f.maxWait, "max-wait", 10*time.Minute, "how long a detached request keeps running without a client (advertised as maxWait)")
	fs.DurationVar(&f.minWait, "min-wait", 0, "how long a client should wait after a disconnect before resuming (advertised as minWait)")
	fs.DurationVar(&f.retention, "retention", 0, "how long a result no client has received is kept (0: same as --max-wait)")
	fs.DurationVar(&f.delivered, "delivered-retention", time.Minute, "how long a result written to a live client is kept unacknowledged, for a resume after a drop")
	fs.DurationVar(&f.tombstoneTTL, "tombstone-ttl", time.Hour, "how long an ended request answers expired/cancelled instead of not_found")
	fs.IntVar(&f.maxLive, "max-live", 10000, "maximum running resumable requests; past it new calls run without a resume policy")
	fs.IntVar(&f.maxRetained, "max-retained", 100000, "maximum finished requests whose results are kept; past it the oldest is released")
	fs.IntVar(&f.queueBytes, "queue-bytes", 1<<20, "byte budget of each request's queued messages")
	fs.IntVar(&f.maxMessage, "max-message-bytes", transport.DefaultMaxMessageBytes, "largest message accepted from a client")
	fs.StringVar(&f.policies, "policy", "", "per-tool resume policy: name=always|never|after:DURATION, comma-separated")
	fs.StringVar(&f.defaultPolicy, "default-policy", "always", "resume policy of tools not named in --policy")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !f.stdio {
		return errors.New("only --stdio is available in this version")
	}
	lvl, err := zerolog.ParseLevel(f.logLevel)
	if err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := zerolog.New(stderr).Level(lvl).With().Timestamp().Logger()
	def, err := parsePolicy(f.defaultPolicy)
	if err != nil {
		return fmt.Errorf("--default-policy: %w", err)
	}
	tools, err := parsePolicies(f.policies)
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}

	core := mcp.New(demo.Server(version), &mcp.Options{
		Engine: &resume.Options{
			MaxWait: f.maxWait, MinWait: f.minWait, Retention: f.retention, DeliveredRetention: f.delivered,
			TombstoneTTL: f.tombstoneTTL, MaxLive: f.maxLive, MaxRetained: f.maxRetained, QueueBytes: f.queueBytes,
		},
		DefaultPolicy: def,
		Tools:         tools,
		Logger:        &log,
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.Info().Str("version", version).Str("transport", "stdio").Dur("maxWait", f.maxWait).Msg("mcp-resume serving")
	conn := stdio.New(stdin, stdout, &stdio.Options{MaxMessageBytes: f.maxMessage})
	err = core.Serve(ctx, conn)
	// On stdio the connection is the whole session: when it ends there is no one to
	// resume on, so the process ends and its requests with it.
	core.Close()
	log.Info().Msg("mcp-resume stopped")
	return err
}

func parsePolicies(s string) (map[string]mcp.Policy, error) {
	out := map[string]mcp.Policy{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want name=always|never|after:DURATION", kv)
		}
		p, err := parsePolicy(val)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = p
	}
	return out, nil
}

func parsePolicy(s string) (mcp.Policy, error) {
	switch {
	case s == "always":
		return mcp.Policy{Mode: mcp.Always}, nil
	case s == "never":
		return mcp.Policy{Mode: mcp.Never}, nil
	case strings.HasPrefix(s, "after:"):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "after:"))
		if err != nil || d < 0 {
			return mcp.Policy{}, fmt.Errorf("%q: bad duration", s)
		}
		return mcp.Policy{Mode: mcp.After, After: d}, nil
	}
	return mcp.Policy{}, fmt.Errorf("%q: want always, never or after:DURATION", s)
}
