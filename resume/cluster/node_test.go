package cluster_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume/cluster"
	"github.com/mcp-resume/mcp-resume/testkit/jstest"
)

func TestJoinRejectsBadName(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	nc := connect(t, srv)
	for _, name := range []string{"a.b", "a b", "*", ">", "né", strings.Repeat("x", 65)} {
		n, err := cluster.Join(ctxT(t), nc, options(t, name))
		if err == nil {
			n.Close()
			t.Errorf("Join(%q) succeeded", name)
		}
	}
	// The longest valid name, and a default one.
	long, _ := join(t, srv, options(t, strings.Repeat("x", 64)))
	if long.Self() != strings.Repeat("x", 64) {
		t.Errorf("Self() = %q", long.Self())
	}
	def, _ := join(t, srv, options(t, ""))
	if !regexp.MustCompile(`^i-[0-9a-f]{12}$`).MatchString(def.Self()) {
		t.Errorf("default name %q, want i- and 12 hex digits", def.Self())
	}
}

func TestJoinWaitsForName(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	first, _ := join(t, srv, options(t, "alpha"))
	nc := connect(t, srv)

	// While the first holds the name, a Join waits until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 3*lease/10)
	defer cancel()
	start := time.Now()
	n, err := cluster.Join(ctx, nc, options(t, "alpha"))
	if err == nil {
		n.Close()
		t.Fatal("a second Join of a held name succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "alpha") {
		t.Errorf("Join's error = %v, want a deadline naming alpha", err)
	}
	if d := time.Since(start); d < 3*lease/10 {
		t.Errorf("Join gave up after %s, before its context ended", d)
	}

	// It succeeds once the first leaves, at once rather than when a lease lapses.
	type result struct {
		n   *cluster.Node
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	ctx, o := ctxT(t), options(t, "alpha")
	go func() {
		n, err := cluster.Join(ctx, nc, o)
		done <- result{n, err, time.Now()}
	}()
	select {
	case r := <-done:
		t.Fatalf("Join returned (%v) while the name was held", r.err)
	default:
	}
	left := time.Now()
	first.Close()
	r := receive(t, done, "the waiting Join")
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.n.Close()
	if d := r.at.Sub(left); d > lease/2 {
		t.Errorf("the waiting Join took %s after the first left", d)
	}
	if r.n.Self() != "alpha" || !r.n.Alive(ctxT(t), "alpha") {
		t.Errorf("the second alpha (%q) is not alive", r.n.Self())
	}
	t.Logf("joined %s after the first left", r.at.Sub(left))
}

func TestAlive(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	ctx := ctxT(t)
	for _, name := range []string{"alpha", "beta"} {
		if !a.Alive(ctx, name) || !b.Alive(ctx, name) {
			t.Errorf("%s is not alive", name)
		}
	}
	for _, name := range []string{"", "gamma", "a.b", "*", "beta.in.x"} {
		if a.Alive(ctx, name) {
			t.Errorf("Alive(%q) is true", name)
		}
	}
	b.Close()
	b.Close() // idempotent
	if a.Alive(ctx, "beta") {
		t.Error("beta is alive after its Close")
	}
	if !a.Alive(ctx, "alpha") {
		t.Error("alpha is not alive")
	}
}

// TestLeaseRefreshed: a node holds its lease for many times its length.
func TestLeaseRefreshed(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	ctx := ctxT(t)
	deadline := time.Now().Add(3 * lease)
	for time.Now().Before(deadline) {
		if !a.Alive(ctx, b.Self()) {
			t.Fatal("beta's lease lapsed while it ran")
		}
		time.Sleep(lease / 10)
	}
}

// TestLeaseLost: a node whose lease goes (the bucket's TTL removed it during a
// partition longer than the lease; here, deleted) reports it on Lost within a
// refresh, and does not take the name back on its own.
func TestLeaseLost(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	a, nc := join(t, srv, options(t, "alpha"))
	select {
	case <-a.Lost():
		t.Fatal("Lost closed while the lease is held")
	default:
	}
	if err := leases(t, nc).Delete(ctxT(t), "alpha"); err != nil {
		t.Fatal(err)
	}
	receive(t, a.Lost(), "Lost after the lease was deleted")
	if a.Alive(ctxT(t), "alpha") {
		t.Fatal("alpha holds a lease again after losing it")
	}
}

// Options.Replicas on a cluster of three NATS servers: a node joining with a
// count gives the lease bucket that many replicas; one joining without leaves
// the bucket's count as it is.
func TestJoinReplicas(t *testing.T) {
	t.Parallel()
	c := jstest.StartCluster(t, 3)
	replicas := func(nc *nats.Conn) int {
		t.Helper()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctxT(t), "KV_mcp-resume-leases")
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.Replicas
	}
	join := func(name string, replicas int) *nats.Conn {
		t.Helper()
		nc, err := nats.Connect(c.URLs(0), nats.MaxReconnects(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		o := options(t, name)
		o.Replicas = replicas
		n, err := cluster.Join(ctxT(t), nc, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return nc
	}
	if got := replicas(join("alpha", 3)); got != 3 {
		t.Fatalf("joined with 3 replicas: the bucket has %d", got)
	}
	if got := replicas(join("beta", 0)); got != 3 {
		t.Fatalf("joined without a count: the bucket has %d replicas, want the 3 it had", got)
	}
}
