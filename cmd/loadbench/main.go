// Command loadbench measures MCP servers as a user's client sees them: each
// server is a process of its own on loopback, driven from this one over
// Streamable HTTP, the servers taking turns in interleaved rounds so that all of
// them meet the machine's drift alike.
//
// A round, for each target: four sessions declaring resumable requests (the 2025
// era, a session each), -echo calls of the echo tool spread over them (each
// session one call at a time), then one call of countdown that sends -progress
// progress notifications. Reported per target (medians over the rounds): echo
// p50 and p99, echo calls/s, progress notifications/s, the server's resident
// memory after the round, and whether every round was lossless (every echo
// answered with its text, every progress notification once and in order, the
// result after them).
//
//	go run ./cmd/loadbench                      # the default targets
//	go run ./cmd/loadbench -target old=serve:/tmp/old/mcp-resume -target new=serve:./mcp-resume
//	go run ./cmd/loadbench -check docs/testing.md   # fail on a ratio below its recorded figure
//
// A target is NAME=KIND[:ARGS]:
//
//	floor               a raw net/http server: SSE answers, no MCP library (the floor)
//	mcpgo               mcp-go's StreamableHTTPServer with the demo tools, default options
//	serve:BIN [FLAGS]   BIN serve --http ADDR FLAGS (BIN is our binary, of any revision)
//	gateway:BIN [FLAGS] [-- UFLAGS]  BIN gateway --http ADDR FLAGS -- BIN serve --stdio UFLAGS
//	url:URL             a server started elsewhere (no memory or CPU figures)
//
// KIND+keyed (serve+keyed:BIN, url+keyed:URL, ...) makes every echo call of the
// target carry a call key of its own (io.mcp-resume/key, 43 random
// characters), as our own clients' calls do: such a call is resumable from its
// start, and with --data-dir stored.
//
// {dir} in FLAGS is replaced by a fresh directory. Leading KEY=VALUE words of
// ARGS are the target's environment, and {otlp} in them is the URL of an
// OTLP/HTTP sink this program runs (it answers exports as a collector does and
// counts the spans of each service, printed at the end): a target that traces
// every request and exports it,
//
//	-target traced=serve:OTEL_EXPORTER_OTLP_ENDPOINT={otlp} OTEL_SERVICE_NAME=traced ./mcp-resume
//
// With -detached N, the targets instead each get the detached scene (one
// after another): N countdowns of 600 s with a progress token, started over
// WebSocket by clients of 500 calls each that go once their calls' resume
// policies came; -settle later (progress queued meanwhile), the server's
// resident memory, and getStatus of 1,000 random ones from a new connection
// (p50, p99). Its default targets are the binary with room for N running
// requests, and a gateway with as much room in front of it (the RSS is the
// gateway's):
//
//	go run ./cmd/loadbench -detached 100000
//
// With -paired, a round's echo calls go to every target in turn, call by call
// (each of the four workers holds a session on each target), instead of one
// target's calls after another's: the targets' p50s then come from the same
// moments of the machine, and their ratio moves far less from run to run than
// that of turns taken a round at a time. The countdowns stay one at a time.
//
// Without -target: floor, mcpgo, memory (serve), datadir (serve --data-dir),
// datadir-sync (serve --data-dir --sync always), keyed (serve, keyed calls),
// keyed-datadir (serve --data-dir, keyed calls) and gateway, with the binary
// built from this tree.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) == 3 && strings.HasPrefix(os.Args[1], "-serve-") {
		// This program started again as a server of its own (a target).
		if err := serveSelf(os.Args[1], os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var (
		targets  []string
		cfg      config
		check    string
		asJSON   bool
		keepLogs bool
	)
	flag.Func("target", "NAME=KIND[:ARGS], repeated (see go doc)", func(s string) error { targets = append(targets, s); return nil })
	flag.IntVar(&cfg.rounds, "rounds", 3, "interleaved rounds")
	flag.IntVar(&cfg.sessions, "sessions", 4, "sessions per target")
	flag.IntVar(&cfg.echo, "echo", 2000, "echo calls per round, spread over the sessions")
	flag.IntVar(&cfg.progress, "progress", 20000, "progress notifications of the round's countdown call")
	flag.StringVar(&check, "check", "", "compare the ratios with the figures recorded in this file's table (see docs/testing.md) and fail on one more than 15% worse")
	flag.BoolVar(&cfg.paired, "paired", false, "make each round's echo calls to every target in turn, call by call, instead of one target's after another's")
	flag.BoolVar(&asJSON, "json", false, "print the summary as JSON too")
	flag.BoolVar(&keepLogs, "v", false, "pass the servers' logs through to stderr")
	flag.IntVar(&cfg.detached, "detached", 0, "instead of rounds: the detached scene with this many countdowns (see go doc)")
	flag.DurationVar(&cfg.settle, "settle", 10*time.Second, "the detached scene: how long its countdowns queue progress before the server's memory is read")
	flag.IntVar(&cfg.perClient, "per-client", 500, "the detached scene: how many calls each client starts before it goes (1: a connection per call, as clients whose machines slept)")
	flag.Parse()
	cfg.logs = keepLogs
	if err := run(targets, cfg, check, asJSON); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}

// config is the shape of every round.
type config struct {
	rounds, sessions, echo, progress int
	paired                           bool // see roundOf
	logs                             bool
	detached                         int           // the detached scene's countdowns; 0: rounds
	settle                           time.Duration // the detached scene's wait before its figures
	perClient                        int           // the detached scene's calls per client
}

func run(specs []string, cfg config, check string, asJSON bool) error {
	work, err := os.MkdirTemp("", "loadbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if len(specs) == 0 {
		bin, err := buildBinary(work)
		if err != nil {
			return err
		}
		specs = defaultTargets(bin)
		if cfg.detached > 0 {
			specs = detachedTargets(bin, cfg.detached)
		}
	}
	var targets []*target
	var sink *otlpSink
	defer func() {
		for _, t := range targets {
			t.stop()
		}
		if sink != nil {
			sink.close()
		}
	}()
	for _, s := range specs {
		t, err := startTarget(s, work, cfg.logs, &sink)
		if err != nil {
			return err
		}
		targets = append(targets, t)
	}
	if cfg.detached > 0 {
		return runDetached(targets, cfg.detached, max(cfg.perClient, 1), cfg.settle, asJSON)
	}
	// A warm-up round of a tenth of the size, not counted: the first calls of a
	// process pay its lazy starts (page faults, pools, connections).
	warm := config{rounds: 1, sessions: cfg.sessions, echo: max(cfg.echo/10, cfg.sessions), progress: max(cfg.progress/10, 1)}
	for _, t := range targets {
		if _, err := t.round(warm); err != nil {
			return fmt.Errorf("%s, warm-up: %w", t.name, err)
		}
	}
	for round := range cfg.rounds {
		// The order rotates, so that no target always follows the same one.
		order := make([]*target, len(targets))
		for i := range targets {
			order[i] = targets[(i+round)%len(targets)]
		}
		groups := [][]*target{order}
		if !cfg.paired {
			groups = groups[:0]
			for _, t := range order {
				groups = append(groups, []*target{t})
			}
		}
		for _, g := range groups {
			rs, err := roundOf(cfg, g)
			if err != nil {
				return fmt.Errorf("round %d: %w", round+1, err)
			}
			for k, t := range g {
				t.results = append(t.results, rs[k])
				fmt.Fprintf(os.Stderr, "round %d %-14s %s\n", round+1, t.name, rs[k])
			}
		}
	}
	sum := summarize(targets)
	fmt.Print(sum.table())
	if sink != nil {
		for _, t := range targets {
			t.terminate() // a target exports the spans it still holds as it exits
		}
		fmt.Println(sink)
	}
	if asJSON {
		b, _ := json.MarshalIndent(sum, "", "  ")
		fmt.Println(string(b))
	}
	if !sum.lossless(peers) {
		return fmt.Errorf("a round lost messages (see above)")
	}
	if check != "" {
		return sum.check(check)
	}
	return nil
}

// peers are the targets that are not ours: a loss there is reported, not
// failed (mcp-go drops progress notifications when its channel is full).
var peers = map[string]bool{"mcpgo": true}

func defaultTargets(bin string) []string {
	return []string{
		"floor=floor",
		"mcpgo=mcpgo",
		"memory=serve:" + bin,
		"datadir=serve:" + bin + " --data-dir {dir}",
		"datadir-sync=serve:" + bin + " --data-dir {dir} --sync always",
		"keyed=serve+keyed:" + bin,
		"keyed-datadir=serve+keyed:" + bin + " --data-dir {dir}",
		"gateway=gateway:" + bin,
	}
}
