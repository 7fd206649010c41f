// Package embedded runs a single-node NATS server with JetStream inside the
// process: the durable store of `mcp-resume serve --data-dir`, and the real server
// the JetStream store's tests run against.
//
// By default the server listens on no port at all: clients connect in-process
// (Server.Connect), so nothing outside the process can reach it.
//
// # Sync
//
// JetStream's file store writes every acknowledged message to the operating
// system at once, but asks it to flush to disk (fsync) only periodically (every
// two minutes by default): a crash of the process loses nothing, a crash of the
// machine (power loss, kernel panic) can lose what was acknowledged since the
// last flush. Options.SyncAlways flushes before each acknowledgement instead:
// nothing acknowledged is lost, at a large cost in throughput and latency per
// write (measured in the package jsstore's benchmarks).
//
// # One server per directory
//
// A Server holds an exclusive lock (flock(2)) on the file LockFile in its
// directory from before it starts until Shutdown has returned, and writes its
// process id there. Start on a directory held by another Server, in this
// process or another, fails at once with a *DirInUseError naming the holder's
// pid: two servers on one directory would each take the other's requests for
// their own. The operating system drops the lock when its process ends, killed
// or not, so a lock file left behind never stands in the way. Where flock(2)
// does not exist (Windows) no lock is taken.
package embedded

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Options configure a Server. The zero value of each field means its default.
type Options struct {
	// Dir is where JetStream keeps its files (streams with memory storage keep
	// none there). Required.
	Dir string
	// SyncAlways flushes every write to disk before it is acknowledged.
	SyncAlways bool
	// SyncInterval is the periodic flush when SyncAlways is off. Default: the
	// server's (two minutes).
	SyncInterval time.Duration
	// Listen, when set, also serves NATS clients on this address (host:port; port 0
	// for any free one). Only loopback addresses are accepted.
	Listen string
	// ReadyTimeout bounds the wait for the server to start. Default 10 seconds.
	ReadyTimeout time.Duration
}

// Server is a running embedded NATS server. Its methods are safe for
// concurrent use, but Shutdown, which is called once.
type Server struct {
	ns     *server.Server
	addr   string // the client listener's address (Options.Listen), "" when none
	unlock func() // releases the directory's lock
}

// Start locks o.Dir (creating it if need be), starts a server on it and waits
// until it is ready for connections. It fails at once with a *DirInUseError when
// another Server holds the directory.
func Start(o *Options) (srv *Server, err error) {
	if o == nil {
		o = &Options{}
	}
	if o.Dir == "" {
		return nil, errors.New("embedded: no directory for JetStream's files")
	}
	so := &server.Options{
		ServerName:   "mcp-resume",
		JetStream:    true,
		StoreDir:     o.Dir,
		SyncAlways:   o.SyncAlways,
		SyncInterval: o.SyncInterval,
		DontListen:   o.Listen == "",
		NoSigs:       true,
		NoLog:        true,
		MaxPayload:   8 << 20, // a queued message is a whole MCP message
	}
	if o.Listen != "" {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded: listen address %q: %w", o.Listen, err)
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("embedded: listen address %q is not loopback", o.Listen)
		}
		var p int
		if _, err := fmt.Sscan(port, &p); err != nil {
			return nil, fmt.Errorf("embedded: listen port %q: %w", port, err)
		}
		so.Host, so.Port = host, p
		if p == 0 {
			so.Port = server.RANDOM_PORT
		}
	}
	unlock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	ns, err := server.NewServer(so)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	go ns.Start()
	wait := o.ReadyTimeout
	if wait <= 0 {
		wait = 10 * time.Second
	}
	if !ns.ReadyForConnections(wait) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("embedded: the NATS server was not ready within %s", wait)
	}
	srv = &Server{ns: ns, unlock: unlock}
	if a := ns.Addr(); a != nil {
		srv.addr = a.String()
	}
	return srv, nil
}

// Connect returns a client connection to the server, in-process (no socket).
// Options are applied after the in-process one.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(s.ns), nats.Name("mcp-resume")}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: connecting: %w", err)
	}
	return nc, nil
}

// ClientURL is the server's client URL when it listens (Options.Listen), else "".
func (s *Server) ClientURL() string {
	if s.ns.Addr() == nil {
		return ""
	}
	return s.ns.ClientURL()
}

// Addr is the address the server listens on for clients (host:port, with the
// port chosen when Options.Listen asked for any), else "". It stays valid after
// Shutdown: a server started again on the same directory with Listen set to it
// takes the place of this one, and the clients that were connected to this one
// reconnect to it.
func (s *Server) Addr() string { return s.addr }

// NATS returns the server itself, for inspection (JetStream usage, memory).
func (s *Server) NATS() *server.Server { return s.ns }

// Shutdown stops the server and waits until it has: its files are closed and
// flushed, its lock on the directory is released, and a new server may start on
// the same directory. Call it once.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.unlock()
}
