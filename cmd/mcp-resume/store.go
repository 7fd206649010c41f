package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
)

// openStore returns the store --data-dir or --nats-url ask for, and the function
// that closes it once the core is closed; nil for the in-memory default.
func openStore(ctx context.Context, f *serveFlags, log zerolog.Logger) (resume.Store, func(), error) {
	switch f.sync {
	case "periodic", "always":
	default:
		return nil, nil, fmt.Errorf("--sync %q: want periodic or always", f.sync)
	}
	switch {
	case f.dataDir != "" && f.natsURL != "":
		return nil, nil, errors.New("--data-dir and --nats-url exclude each other")
	case f.natsURL != "" && f.sync == "always":
		return nil, nil, errors.New("--sync always applies to --data-dir; an existing NATS syncs by its own configuration (jetstream { sync_interval: always })")
	case f.dataDir == "" && f.natsURL == "":
		return nil, func() {}, nil
	}
	var nc *nats.Conn
	var srv *embedded.Server
	if f.dataDir != "" {
		var err error
		srv, err = embedded.Start(&embedded.Options{Dir: f.dataDir, SyncAlways: f.sync == "always"})
		if err != nil {
			return nil, nil, fmt.Errorf("--data-dir: %w", err)
		}
		if nc, err = srv.Connect(); err != nil {
			srv.Shutdown()
			return nil, nil, fmt.Errorf("--data-dir: %w", err)
		}
	} else {
		var err error
		nc, err = nats.Connect(f.natsURL, nats.Name("mcp-resume"), nats.MaxReconnects(-1),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				log.Warn().Err(err).Msg("NATS disconnected; reconnecting")
			}),
			nats.ReconnectHandler(func(c *nats.Conn) { log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("NATS reconnected") }))
		if err != nil {
			return nil, nil, fmt.Errorf("--nats-url: %w", err)
		}
	}
	closeAll := func() { // after the core is closed: no store call is left
		nc.Close()
		if srv != nil {
			srv.Shutdown()
		}
	}
	js, err := jetstream.New(nc)
	if err == nil {
		var st *jsstore.Store
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		st, err = jsstore.New(sctx, js, nil)
		cancel()
		if err == nil {
			ev := log.Info().Str("store", "jetstream")
			if srv != nil {
				ev = ev.Str("dataDir", f.dataDir).Str("sync", f.sync)
			} else {
				ev = ev.Str("nats", nc.ConnectedUrlRedacted())
			}
			ev.Msg("store open")
			return st, closeAll, nil
		}
	}
	closeAll()
	return nil, nil, fmt.Errorf("opening the JetStream store: %w", err)
}
