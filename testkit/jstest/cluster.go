package jstest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/testkit/freeport"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
)

// Cluster is a JetStream cluster of nats-servers in the test process: each with
// a store directory of its own, routed to all the others on loopback, serving
// clients on a loopback port of its own. Its methods are safe for concurrent use.
type Cluster struct {
	servers []*server.Server
	urls    []string

	mu   sync.Mutex // guards down
	down []bool     // servers shut down by Shutdown
}

// account is the account the tests' clients use: the servers' global one.
const account = "$G"

// clusterPatience bounds the cluster's waits: for the servers to start and
// elect a meta leader, for a stream's leader.
const clusterPatience = 30 * time.Second

// StartCluster starts n servers named n0, n1, ... in one cluster (three for
// replicated streams that survive the loss of a server) and waits until the
// JetStream meta leader has all n as peers and every server is current: an R(n)
// stream can then be created through any of them. Every server still running
// is shut down when tb ends.
//
// The route ports must be known before the servers start (each is told every
// route), so they are picked free and taken by the servers a moment later
// (package freeport: from below the ephemeral range, which outgoing connections
// use); should one be taken anyway, the servers are started again on others.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c := &Cluster{down: make([]bool, n)}
	for attempt := 1; ; attempt++ {
		servers, err := startServers(tb, n)
		if err == nil {
			c.servers = servers
			break
		}
		if attempt == clusterAttempts {
			tb.Fatal(err)
		}
		tb.Logf("%v; starting the cluster again on other ports", err)
	}
	tb.Cleanup(c.shutdownAll)
	for _, ns := range c.servers {
		c.urls = append(c.urls, ns.ClientURL())
	}
	poll.Until(tb, clusterPatience, fmt.Sprintf("a JetStream meta leader with %d peers, every server current", n), func() bool {
		leaders := 0
		for _, ns := range c.servers {
			if !ns.JetStreamIsCurrent() {
				return false
			}
			if ns.JetStreamIsLeader() {
				leaders++
				if len(ns.JetStreamClusterPeers()) != n {
					return false
				}
			}
		}
		return leaders == 1
	})
	c.waitAPI(tb)
	return c
}

// clusterAttempts bounds the starts of a cluster whose route ports were taken.
const clusterAttempts = 3

// startServers starts n servers routed to each other, on route ports picked
// free, and waits until each is ready; when one is not, it shuts them all down
// and says which.
func startServers(tb testing.TB, n int) ([]*server.Server, error) {
	ports, err := freeport.Ports(n)
	if err != nil {
		tb.Fatal(err)
	}
	routes := make([]*url.URL, n)
	for i, p := range ports {
		routes[i] = &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)}
	}
	// The directories first: their removal, registered with them, then runs
	// after the servers' shutdown (cleanups run last registered first).
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = tb.TempDir()
	}
	var servers []*server.Server
	stop := func() {
		for _, ns := range servers {
			ns.Shutdown()
			ns.WaitForShutdown()
		}
	}
	for i := range n {
		ns, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       server.RANDOM_PORT,
			JetStream:  true,
			StoreDir:   dirs[i],
			Cluster:    server.ClusterOpts{Name: "mcp-resume-test", Host: "127.0.0.1", Port: ports[i]},
			Routes:     routes, // its own among them: a server knows itself and skips it
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20, // as embedded's: a queued message is a whole MCP message
		})
		if err != nil {
			stop()
			tb.Fatal(err)
		}
		ns.SetLoggerV2(failLog(tb, ns.Name()), false, false, false)
		servers = append(servers, ns)
		go ns.Start()
	}
	for i, ns := range servers {
		if !ns.ReadyForConnections(clusterPatience) {
			stop()
			return nil, fmt.Errorf("server n%d not ready within %v (its route port %d taken meanwhile?)", i, clusterPatience, ports[i])
		}
	}
	return servers, nil
}

// waitAPI waits until the cluster's JetStream API creates and deletes a stream
// on every server's connection: a leader elected moments ago may be replaced
// (under load it often is), and requests in flight then go unanswered, which a
// test would take for a failure of its own.
func (c *Cluster) waitAPI(tb testing.TB) {
	tb.Helper()
	for i, u := range c.urls {
		nc, err := nats.Connect(u)
		if err != nil {
			tb.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			tb.Fatal(err)
		}
		name := fmt.Sprintf("JSTEST_READY_%d", i)
		poll.Until(tb, clusterPatience, "the JetStream API to create and delete a stream on "+c.servers[i].Name(), func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"jstest.ready." + name}, Replicas: len(c.servers)}); err != nil {
				return false
			}
			return js.DeleteStream(ctx, name) == nil
		})
		nc.Close()
	}
}

// Len is the number of servers, those shut down included.
func (c *Cluster) Len() int { return len(c.servers) }

// URL is server i's client URL (nats://127.0.0.1:PORT).
func (c *Cluster) URL(i int) string { return c.urls[i] }

// URLs is every server's client URL, comma-separated, as nats.Connect takes a
// server pool, beginning with server first (the others follow in order).
func (c *Cluster) URLs(first int) string {
	urls := append(append([]string(nil), c.urls[first:]...), c.urls[:first]...)
	return strings.Join(urls, ",")
}

// Name is server i's name (n0, n1, ...), as JetStream's cluster info gives it.
func (c *Cluster) Name(i int) string { return c.servers[i].Name() }

// Server returns server i, for inspection.
func (c *Cluster) Server(i int) *server.Server { return c.servers[i] }

// Shutdown stops server i and waits until it has stopped: its clients are
// disconnected, and the leaders it held have been handed over (nats-server
// steps its Raft leaders down as it shuts down). Call it once per server.
func (c *Cluster) Shutdown(i int) {
	c.mu.Lock()
	c.down[i] = true
	c.mu.Unlock()
	c.servers[i].Shutdown()
	c.servers[i].WaitForShutdown()
}

func (c *Cluster) shutdownAll() {
	for i, ns := range c.servers {
		c.mu.Lock()
		down := c.down[i]
		c.down[i] = true
		c.mu.Unlock()
		if !down {
			ns.Shutdown()
			ns.WaitForShutdown()
		}
	}
}

func (c *Cluster) running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.down[i]
}

// StreamLeader returns the index of the running server that leads stream (a
// KV bucket's is KV_<bucket>), or -1 when none does now.
func (c *Cluster) StreamLeader(stream string) int {
	for i, ns := range c.servers {
		if c.running(i) && ns.JetStreamIsStreamLeader(account, stream) {
			return i
		}
	}
	return -1
}

// MetaLeader returns the index of the running server that leads JetStream's
// meta group, or -1 when none does now.
func (c *Cluster) MetaLeader() int {
	for i, ns := range c.servers {
		if c.running(i) && ns.JetStreamIsLeader() {
			return i
		}
	}
	return -1
}

// WaitStreamLeader waits until a running server leads stream and returns its
// index.
func (c *Cluster) WaitStreamLeader(tb testing.TB, stream string) int {
	tb.Helper()
	leader := -1
	poll.Until(tb, clusterPatience, "a leader of stream "+stream, func() bool {
		leader = c.StreamLeader(stream)
		return leader >= 0
	})
	return leader
}

// MoveStreamLeader makes server to the leader of stream, asking the current
// leader to step down in its favour through nc (any client connection to the
// cluster), and waits until it leads. Nothing happens when it leads already. A
// preferred server that is not current when the leader steps down is passed
// over (another replica is elected): the leader is asked again, until to leads.
func (c *Cluster) MoveStreamLeader(tb testing.TB, nc *nats.Conn, stream string, to int) {
	tb.Helper()
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": c.Name(to)}})
	var asked time.Time
	poll.Until(tb, clusterPatience, fmt.Sprintf("%s to lead stream %s", c.Name(to), stream), func() bool {
		switch leader := c.StreamLeader(stream); {
		case leader == to:
			return true
		case leader < 0 || time.Since(asked) < stepDownPatience:
			return false // an election under way, or the last request's
		}
		asked = time.Now()
		msg, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, req, clusterPatience)
		if err != nil {
			tb.Fatalf("stepping the leader of stream %s down for %s: %v", stream, c.Name(to), err)
		}
		var resp struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Error != nil {
			tb.Fatalf("stepping the leader of stream %s down for %s: %s", stream, c.Name(to), msg.Data)
		}
		return false
	})
}

// stepDownPatience is how long MoveStreamLeader waits for the election a
// step-down starts before it asks again.
const stepDownPatience = 3 * time.Second

// Clients returns how many client connections named name server i has.
func (c *Cluster) Clients(tb testing.TB, i int, name string) int {
	tb.Helper()
	cz, err := c.servers[i].Connz(&server.ConnzOptions{Limit: 1 << 16})
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, ci := range cz.Conns {
		if ci.Name == name {
			n++
		}
	}
	return n
}

// serverLog keeps a server's notices, warnings and errors, for the test's log
// when it fails (a server's own account of a refusal, which its client only
// sees as a code).
type serverLog struct {
	name  string
	mu    sync.Mutex // guards lines
	lines []string
}

// failLog returns a logger for the server named name, whose lines tb logs if
// it fails.
func failLog(tb testing.TB, name string) *serverLog {
	l := &serverLog{name: name}
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		tb.Logf("server %s's log:\n%s", l.name, strings.Join(l.lines, "\n"))
	})
	return l
}

func (l *serverLog) add(level, format string, v ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, time.Now().Format("15:04:05.000 ")+level+" "+fmt.Sprintf(format, v...))
	l.mu.Unlock()
}

func (l *serverLog) Noticef(format string, v ...any) { l.add("INF", format, v...) }
func (l *serverLog) Warnf(format string, v ...any)   { l.add("WRN", format, v...) }
func (l *serverLog) Fatalf(format string, v ...any)  { l.add("FTL", format, v...) }
func (l *serverLog) Errorf(format string, v ...any)  { l.add("ERR", format, v...) }
func (l *serverLog) Debugf(string, ...any)           {}
func (l *serverLog) Tracef(string, ...any)           {}
