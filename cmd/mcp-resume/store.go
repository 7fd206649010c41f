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

	"github.com/mcp-resume/mcp-resume/mcp"
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

// openStores connects to the NATS of --data-dir (started here) or --nats-url,
// where the endpoints' stores are opened (stores.open); nil for the in-memory
// default.
func openStores(f *serveFlags, log zerolog.Logger) (*stores, error) {
	switch f.sync {
	case "periodic", "always":
	default:
		return nil, fmt.Errorf("--sync %q: want periodic or always", f.sync)
	}
	switch {
	case f.dataDir != "" && f.natsURL != "":
		return nil, errors.New("--data-dir and --nats-url exclude each other")
	case f.natsURL != "" && f.sync == "always":
		return nil, errors.New("--sync always applies to --data-dir; an existing NATS syncs by its own configuration (jetstream { sync_interval: always })")
	case f.natsURL == "" && (f.instance != "" || f.lease != defaultLease):
		return nil, errors.New("--instance and --lease apply to --nats-url (a cluster of instances)")
	case f.replicasSet && f.dataDir != "":
		return nil, errors.New("--replicas applies to --nats-url (a cluster of NATS servers); the embedded server of --data-dir is a single node, which keeps one copy")
	case f.replicasSet && f.natsURL == "":
		return nil, errors.New("--replicas applies to --nats-url (a cluster of NATS servers)")
	case f.replicasSet && (f.replicas < 1 || f.replicas > replicasMax):
		return nil, fmt.Errorf("--replicas %d: want 1 to %d", f.replicas, replicasMax)
	case f.dataDir == "" && f.natsURL == "":
		return nil, nil
	}
	var nc *nats.Conn
	var srv *embedded.Server
	if f.dataDir != "" {
		if fi, err := os.Stat(f.dataDir); err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("--data-dir %s is a file, not a directory", f.dataDir)
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
			return nil, fmt.Errorf("data directory %s is in use by %s (another mcp-resume serve or gateway); stop it or choose another --data-dir", f.dataDir, holder)
		}
		if err != nil {
			return nil, fmt.Errorf("--data-dir: %w", err)
		}
		if nc, err = srv.Connect(); err != nil {
			srv.Shutdown()
			return nil, fmt.Errorf("--data-dir: %w", err)
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
			return nil, fmt.Errorf("--nats-url: %w", err)
		}
	}
	set := &stores{f: f, log: log, nc: nc, srv: srv}
	js, err := jetstream.New(nc)
	if err != nil {
		set.close()
		return nil, fmt.Errorf("opening the JetStream store: %w", err)
	}
	set.js = js
	return set, nil
}

// stores are the JetStream stores of --data-dir or --nats-url: one per
// endpoint the process serves (a gateway of several upstreams serves one for
// each upstream and one for their aggregate), each its own stream, buckets
// and control subjects on the one NATS connection.
type stores struct {
	f   *serveFlags
	log zerolog.Logger
	nc  *nats.Conn
	srv *embedded.Server // --data-dir's; nil for --nats-url
	js  jetstream.JetStream

	opened []*jsstore.Store
	nodes  []*cluster.Node
}

// open opens the store of the endpoint of upstream ("" for the process's
// own, or a gateway's aggregate) and, with --nats-url, joins its cluster.
func (s *stores) open(ctx context.Context, upstream string) (resume.Store, *cluster.Node, error) {
	f, log := s.f, s.log
	deferred := s.srv != nil && f.sync == "periodic"
	so := &jsstore.Options{Replicas: f.replicas, DeferRecords: deferred, DeliveredInMemory: deferred}
	co := &cluster.Options{Name: f.instance, Lease: f.lease, CallTimeout: min(5*time.Second, f.lease/2), Replicas: f.replicas, Logger: &log}
	if upstream != "" {
		so.Stream, so.Subject, so.Bucket = "MCP_RESUME_UP_"+upstream, "mr.upmsg."+upstream, "mcp-resume-up-"+upstream
		co.Bucket, co.Subject = "mcp-resume-leases-up-"+upstream, "mr.upctl."+upstream
		l := log.With().Str("upstream", upstream).Logger()
		co.Logger = &l
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	// The embedded server of --data-dir is this process's alone; --sync
	// always asks for every write before it is answered.
	st, err := jsstore.New(sctx, s.js, so)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("opening the JetStream store: %w", err)
	}
	s.opened = append(s.opened, st)
	ev := log.Info().Str("store", "jetstream")
	if upstream != "" {
		ev = ev.Str("upstream", upstream)
	}
	if s.srv != nil {
		ev = ev.Str("dataDir", f.dataDir).Str("sync", f.sync)
	} else {
		ev = ev.Str("nats", s.nc.ConnectedUrlRedacted()).Int("replicas", st.Stream().CachedInfo().Config.Replicas)
	}
	ev.Msg("store open")
	if s.srv != nil {
		return st, nil, nil
	}
	// An existing NATS: this instance joins the cluster of those sharing it.
	jctx, cancel := context.WithTimeout(ctx, f.lease+30*time.Second)
	node, err := cluster.Join(jctx, s.nc, co)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("joining the cluster: %w", err)
	}
	s.nodes = append(s.nodes, node)
	if upstream == "" {
		log.Info().Str("instance", node.Self()).Stringer("lease", f.lease).Msg("joined the cluster")
	}
	return st, node, nil
}

// sessions is the cluster's share of the endpoint's HTTP sessions.
func (s *stores) sessions(ctx context.Context, node *cluster.Node, upstream string) (mcp.SessionShare, error) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if upstream == "" {
		return node.Sessions(sctx, s.f.sessionIdle)
	}
	return cluster.OpenSessions(sctx, s.nc, &cluster.SessionOptions{Bucket: "mcp-resume-sessions-up-" + upstream, TTL: s.f.sessionIdle, Replicas: s.f.replicas})
}

// close closes every store (what waits to be written first), leaves the
// clusters and closes the connection; after the cores are closed: no store
// call is left.
func (s *stores) close() {
	for _, st := range s.opened {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := st.Close(ctx); err != nil {
			s.log.Warn().Err(err).Msg("writing what waited for the store at shutdown")
		}
		cancel()
	}
	for _, n := range s.nodes {
		n.Close() // a graceful leave: the others claim what was left running
	}
	s.nc.Close()
	if s.srv != nil {
		s.srv.Shutdown()
	}
}
