package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/resume/cluster"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lease is the lease of the tests that watch an instance's lease lapse: short,
// so that lapses come within a test's patience.
const lease = time.Second

// steady is the lease of the tests in which no instance departs but by Close
// (pair): long enough that a machine loaded far past its cores does not make
// one depart. Beside two busy loops and a test sweep, the embedded server's
// answers stalled for more than a second, and a 1 s lease lapsed in the middle
// of TestDeliverOrder (2 runs in 20).
const steady = 8 * time.Second

// patience bounds every wait for a condition.
const patience = 10 * time.Second

// startServer starts an embedded NATS server on loopback, shut down when the test
// ends.
func startServer(t testing.TB) *embedded.Server {
	t.Helper()
	srv, err := embedded.Start(&embedded.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// connect opens a client connection to srv over TCP, closed when the test ends.
func connect(t testing.TB, srv *embedded.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// options are the tests' options for an instance called name (random when "").
func options(t testing.TB, name string) *cluster.Options {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	return &cluster.Options{Name: name, Lease: lease, Memory: true, Logger: &log}
}

// join joins a node on a connection of its own, closed (node, then connection)
// when the test ends.
func join(t testing.TB, srv *embedded.Server, o *cluster.Options) (*cluster.Node, *nats.Conn) {
	t.Helper()
	nc := connect(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	n, err := cluster.Join(ctx, nc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n, nc
}

// pair starts a server and joins two nodes to it, with the steady lease.
func pair(t testing.TB) (a, b *cluster.Node) {
	srv := startServer(t)
	oa, ob := options(t, "alpha"), options(t, "beta")
	oa.Lease, ob.Lease = steady, steady
	a, _ = join(t, srv, oa)
	b, _ = join(t, srv, ob)
	return a, b
}

// receive returns the next value from ch, failing the test after patience.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("%s: nothing within %s", what, patience)
		panic("unreachable")
	}
}

// signal returns a function that sends the time it is called on the channel
// returned, once; a second call fails the test.
func signal(t *testing.T) (func(), <-chan time.Time) {
	ch := make(chan time.Time, 2)
	return func() {
		ch <- time.Now()
		if len(ch) > 1 {
			t.Error("called twice")
		}
	}, ch
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}
