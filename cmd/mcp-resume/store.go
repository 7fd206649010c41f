package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/cluster"
	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
)

// replicasMax is the largest --replicas: JetStream keeps at most five copies of
// a stream.
const replicasMax = 5

// defaultLease is --lease's default: an instance that dies is noticed this long
// (and up to a quarter more) after its last refresh.
const defaultLease = 10 * time.Second

// openStore returns the store --data-dir or --nats-url ask for, the cluster the
// instance joins (--nats-url), and the function that closes both once the core is
// closed; nil store and node for the in-memory default.
func openStore(ctx context.Context, f *serveFlags, log zerolog.Logger) (resume.Store, *cluster.Node, func(), error) {
	switch f.sync {
	case "periodic", "always":
	default:
		return nil, nil, nil, fmt.Errorf("--sync %q: want periodic or always", f.sync)
	}
	switch {
	case f.dataDir != "" && f.natsURL != "":
		return nil, nil, nil, errors.New("--data-dir and --nats-url exclude each other")
	case f.natsURL != "" && f.sync == "always":
		return nil, nil, nil, errors.New("--sync always applies to --data-dir; an existing NATS syncs by its own configuration (jetstream { sync_interval: always })")
	case f.natsURL == "" && (f.instance != "" || f.lease != defaultLease):
		return nil, nil, nil, errors.New("--instance and --lease apply to --nats-url (a cluster of instances)")
	case f.replicasSet && f.dataDir != "":
		return nil, nil, nil, errors.New("--replicas applies to --nats-url (a cluster of NATS servers); the embedded server of --data-dir is a single node, which keeps one copy")
	case f.replicasSet && f.natsURL == "":
		return nil, nil, nil, errors.New("--replicas applies to --nats-url (a cluster of NATS servers)")
	case f.replicasSet && (f.replicas < 1 || f.replicas > replicasMax):
		return nil, nil, nil, fmt.Errorf("--replicas %d: want 1 to %d", f.replicas, replicasMax)
	case f.dataDir == "" && f.natsURL == "":
		return nil, nil, func() {}, nil
	}
	var nc *nats.Conn
	var srv *embedded.Server
	if f.dataDir != "" {
		if fi, err := os.Stat(f.dataDir); err == nil && !fi.IsDir() {
			return nil, nil, nil, fmt.Errorf("--data-dir %s is a file, not a directory", f.dataDir)
		}
		var err error
		srv, err = embedded.Start(&embedded.Options{Dir: f.dataDir, SyncAlways: f.sync == "always"})
		if inUse := (*embedded.DirInUseError)(nil); errors.As(err, &inUse) {
			// Another process recovering and running this one's requests, or
			// this one theirs, would run calls twice: one process per directory.
			holder := "another process"
			if inUse.PID != 0 {
				holder = fmt.Sprintf("pid %d", inUse.PID)
			}
			return nil, nil, nil, fmt.Errorf("data directory %s is in use by %s (another mcp-resume serve or gateway); stop it or choose another --data-dir", f.dataDir, holder)
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--data-dir: %w", err)
		}
		if nc, err = srv.Connect(); err != nil {
			srv.Shutdown()
			return nil, nil, nil, fmt.Errorf("--data-dir: %w", err)
		}
	} else {
		var err error
		// A server that goes silent (its machine lost, a partition) must be
		// noticed, and a server reached again, well within the lease: nats.go
		// pings every 2 minutes by default, and waits 2 seconds before it dials
		// a server of its pool again (all of it, with one URL). Pinging every
		// twentieth of the lease, two pings unanswered declare the connection
		// stale within 3/20 of it, the dial comes a twentieth later, and the
		// refresh after the one lost with the connection (a third of the lease
		// later at most) comes before the lease lapses.
		tick := max(f.lease/20, 100*time.Millisecond)
		nc, err = nats.Connect(f.natsURL, nats.Name("mcp-resume"), nats.MaxReconnects(-1),
			nats.PingInterval(tick), nats.MaxPingsOutstanding(2), nats.ReconnectWait(min(tick, 2*time.Second)),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				log.Warn().Err(err).Msg("NATS disconnected; reconnecting")
			}),
			nats.ReconnectHandler(func(c *nats.Conn) { log.Info().Str("server", c.ConnectedUrlRedacted()).Msg("NATS reconnected") }))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--nats-url: %w", err)
		}
	}
	var node *cluster.Node
	var st *jsstore.Store
	closeAll := func() { // after the core is closed: no store call is left
		if st != nil { // what waits to be written goes before the connection
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := st.Close(ctx); err != nil {
				log.Warn().Err(err).Msg("writing what waited for the store at shutdown")
			}
			cancel()
		}
		if node != nil {
			node.Close() // a graceful leave: the others claim what was left running
		}
		nc.Close()
		if srv != nil {
			srv.Shutdown()
		}
	}
	js, err := jetstream.New(nc)
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		// The embedded server of --data-dir is this process's alone; --sync
		// always asks for every write before it is answered.
		st, err = jsstore.New(sctx, js, &jsstore.Options{Replicas: f.replicas, DeferRecords: srv != nil && f.sync == "periodic"})
		cancel()
		if err == nil {
			ev := log.Info().Str("store", "jetstream")
			if srv != nil {
				ev = ev.Str("dataDir", f.dataDir).Str("sync", f.sync)
			} else {
				ev = ev.Str("nats", nc.ConnectedUrlRedacted()).Int("replicas", st.Stream().CachedInfo().Config.Replicas)
			}
			ev.Msg("store open")
			if srv != nil {
				return st, nil, closeAll, nil
			}
			// An existing NATS: this instance joins the cluster of those sharing it.
			jctx, cancel := context.WithTimeout(ctx, f.lease+30*time.Second)
			node, err = cluster.Join(jctx, nc, &cluster.Options{Name: f.instance, Lease: f.lease, CallTimeout: min(5*time.Second, f.lease/2),
				Replicas: f.replicas, Logger: &log})
			cancel()
			if err == nil {
				log.Info().Str("instance", node.Self()).Stringer("lease", f.lease).Msg("joined the cluster")
				return st, node, closeAll, nil
			}
			err = fmt.Errorf("joining the cluster: %w", err)
		}
	}
	closeAll()
	return nil, nil, nil, fmt.Errorf("opening the JetStream store: %w", err)
}
