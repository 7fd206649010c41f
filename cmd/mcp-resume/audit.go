package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/audit"
	"github.com/mcp-resume/mcp-resume/internal/telemetry"
)

// auditing is the audit trail of serve and gateway: --audit (a file, or
// stdout), --audit-otlp (log records to the OTLP endpoint tracing is
// configured for), --audit-arguments (the per-tool rules). Off, every field
// is nil and stop does nothing.
type auditing struct {
	record func(audit.Event) // mcp.Options.Audit
	rules  audit.Rules       // --audit-arguments: each tool's Policy.Arguments
	// dropped is mcp_resume_audit_dropped_total, for /metrics.
	dropped prometheus.Collector
	// stop writes the events buffered, closes the file and exports the
	// records not exported yet (within tracingFlush): after the core's
	// Close, so that the calls it ends are in the trail.
	stop func()
}

// auditRules reads --audit-arguments: NewRules of the map ParseRules reads,
// the same a configuration file will give NewRules.
func auditRules(text string) (audit.Rules, error) {
	m, err := audit.ParseRules(text)
	if err != nil {
		return nil, fmt.Errorf("--audit-arguments: %w", err)
	}
	rs, err := audit.NewRules(m)
	if err != nil {
		return nil, fmt.Errorf("--audit-arguments: %w", err)
	}
	return rs, nil
}

// startAudit opens the audit trail the flags ask for; its errors (a file
// that cannot be opened, no OTLP endpoint for --audit-otlp) stop the
// command: an operator who asked for an audit trail does not get a server
// without one.
func startAudit(f *serveFlags, stdout io.Writer, log zerolog.Logger) (*auditing, error) {
	a := &auditing{stop: func() {}}
	rules, err := auditRules(f.auditArgs)
	if err != nil {
		return nil, err
	}
	if f.audit == "" && !f.auditOTLP {
		if rules != nil {
			return nil, errors.New("--audit-arguments: the audit trail is off (give --audit or --audit-otlp)")
		}
		return a, nil
	}
	var sinks []audit.Sink
	var closers []func()
	stopAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	switch {
	case f.audit == "-" && f.stdio:
		return nil, errors.New("--audit -: with --stdio, stdout carries MCP; give the audit trail a file")
	case f.audit == "-":
		sinks = append(sinks, audit.JSONLines(stdout))
	case f.audit != "":
		file, err := audit.OpenFile(f.audit)
		if err != nil {
			return nil, fmt.Errorf("--audit: %w", err)
		}
		sinks = append(sinks, file)
		closers = append(closers, reopenOnHUP(file, log))
	}
	if f.auditOTLP {
		logs, err := telemetry.SetupLogs(context.Background(), "mcp-resume", version)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("--audit-otlp: %w", err)
		}
		sinks = append(sinks, audit.OTel(logs.LoggerProvider()))
		closers = append(closers, func() {
			ctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
			defer cancel()
			if err := logs.Shutdown(ctx); err != nil {
				log.Warn().Err(err).Msg("audit: exporting the last records")
			}
		})
	}
	trail := audit.NewTrail(&audit.Options{Warn: func(err error) { log.Warn().Err(err).Msg("audit") }}, sinks...)
	a.record, a.rules = trail.Record, rules
	a.dropped = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "mcp_resume_audit_dropped_total",
		Help: "Audit events dropped because the audit trail's sinks were behind (its buffer full).",
	}, func() float64 { return float64(trail.Dropped()) })
	a.stop = func() {
		// The trail first: it writes what it holds to the file and the
		// log provider, which the closers then close and flush.
		if err := trail.Close(); err != nil {
			log.Warn().Err(err).Msg("audit: closing")
		}
		stopAll()
		if n := trail.Dropped(); n > 0 {
			log.Warn().Uint64("dropped", n).Msg("audit: events dropped")
		}
	}
	target := f.audit
	if target == "-" {
		target = "stdout"
	}
	log.Info().Str("file", target).Bool("otlp", f.auditOTLP).Str("arguments", rules.String()).Msg("audit trail on")
	return a, nil
}

// reopenOnHUP opens the audit file again on each SIGHUP (a rotation's
// postrotate), until the returned function, which stops it, waits for it,
// and closes the file. (The API keys reload on the same signal.)
func reopenOnHUP(file *audit.File, log zerolog.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-hup:
				if err := file.Reopen(); err != nil {
					log.Error().Err(err).Msg("audit: reopening the file failed; writing on to the old one")
				} else {
					log.Info().Msg("audit: file reopened")
				}
			case <-done:
				return
			}
		}
	})
	return func() {
		signal.Stop(hup)
		close(done)
		wg.Wait()
		if err := file.Close(); err != nil {
			log.Warn().Err(err).Msg("audit: closing the file")
		}
	}
}
