package main

import (
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp"
)

// drainPoll is how often a drain looks whether its calls are done.
const drainPoll = 50 * time.Millisecond

// drain is the first part of serve's shutdown, after /readyz went 503: up to
// grace, the servers stop keeping connections alive (a client's next request
// opens a new one, which a balancer sends to a ready instance), the cores refuse
// new calls (shutting_down) and serves everything else, and the calls running
// here finish. A second SIGINT or SIGTERM ends it at once. Then what still runs
// is handed on: with a durable store (keep) a restartable tool's request is left
// for the cluster's other instances (they claim it as this instance leaves) or
// the next process to run again; any other ends with server_stopped, stored for
// its client's resume.
func drain(cores []*mcp.Server, servers []*http.Server, grace time.Duration, keep bool, log zerolog.Logger) {
	if grace <= 0 {
		return
	}
	again := make(chan os.Signal, 1)
	signal.Notify(again, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(again)
	for _, s := range servers {
		s.SetKeepAlivesEnabled(false)
	}
	running := func() int {
		n := 0
		for _, c := range cores {
			n += c.Running()
		}
		return n
	}
	for _, c := range cores {
		c.Drain()
	}
	start := time.Now()
	if n := running(); n > 0 {
		log.Info().Int("calls", n).Stringer("grace", grace).Msg("draining: new calls go to other instances, running ones finish (a second SIGTERM or SIGINT stops now)")
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
wait:
	for running() > 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			log.Warn().Stringer("grace", grace).Msg("the drain's grace ended with calls still running")
			break wait
		case <-again:
			log.Warn().Msg("a second signal: stopping now")
			break wait
		}
	}
	ended, left := 0, 0
	for _, c := range cores {
		e, l := c.Abandon(keep)
		ended, left = ended+e, left+l
	}
	log.Info().Stringer("took", time.Since(start).Round(time.Millisecond)).Int("ended", ended).Int("runAgain", left).
		Msg("drained")
}
