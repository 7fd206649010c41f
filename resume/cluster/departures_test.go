package cluster_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume"
	"github.com/mcp-resume/mcp-resume/resume/cluster"
)

// lastRefresh returns when the server stored instance's lease last.
func lastRefresh(t *testing.T, kv jetstream.KeyValue, instance string) time.Time {
	t.Helper()
	e, err := kv.Get(ctxT(t), instance)
	if err != nil {
		t.Fatalf("reading %s's lease: %v", instance, err)
	}
	return e.Created()
}

// TestWatchCrash: an instance that stops without Close (its connection lost) is
// seen to depart once its lease has lapsed: not before, and not much after.
func TestWatchCrash(t *testing.T) {
	t.Parallel()
	for _, memory := range []bool{true, false} {
		name := map[bool]string{true: "memory", false: "file"}[memory]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := startServer(t)
			oa, ob := options(t, "alpha"), options(t, "beta")
			oa.Memory, ob.Memory = memory, memory
			a, nca := join(t, srv, oa)
			_, ncb := join(t, srv, ob)
			kv := leases(t, nca)
			lost, lostAt := signal(t)
			a.Watch("beta", lost)
			departed := make(chan string, 2)
			a.OnDeparted(func(instance string) { departed <- instance })

			ncb.Close() // a crash: beta's lease stays until it lapses
			last := lastRefresh(t, kv, "beta")
			if !a.Alive(ctxT(t), "beta") {
				t.Fatal("beta's lease is gone at once after a crash")
			}
			at := receive(t, lostAt, "lost")
			after := at.Sub(last)
			t.Logf("lost %s after beta's last refresh (lease %s)", after, lease)
			if after < lease-10*time.Millisecond {
				t.Errorf("lost %s after beta's last refresh, before its lease of %s lapsed", after, lease)
			}
			// Lease*1.25, the server's lateness (up to 350ms with file storage) and
			// room for a slow machine.
			if limit := lease*5/4 + 350*time.Millisecond + 500*time.Millisecond; after > limit {
				t.Errorf("lost %s after beta's last refresh, later than %s", after, limit)
			}
			if a.Alive(ctxT(t), "beta") {
				t.Error("beta is alive after lost")
			}
			if got := receive(t, departed, "OnDeparted"); got != "beta" {
				t.Errorf("OnDeparted(%q), want beta", got)
			}

			// The name is free again: a new process takes it.
			b2, _ := join(t, srv, ob)
			if !a.Alive(ctxT(t), b2.Self()) {
				t.Error("the new beta is not alive")
			}
		})
	}
}

// TestWatchLeave: an instance that Closes is seen to depart at the next poll,
// before its lease would have lapsed.
func TestWatchLeave(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	a, nca := join(t, srv, options(t, "alpha"))
	b, _ := join(t, srv, options(t, "beta"))
	kv := leases(t, nca)
	lost, lostAt := signal(t)
	a.Watch("beta", lost)
	departed1, departed2 := make(chan string, 2), make(chan string, 2)
	a.OnDeparted(func(instance string) { departed1 <- instance })
	a.OnDeparted(func(instance string) { departed2 <- instance })

	last := lastRefresh(t, kv, "beta")
	start := time.Now()
	b.Close()
	if a.Alive(ctxT(t), "beta") {
		t.Error("beta is alive after its Close")
	}
	at := receive(t, lostAt, "lost")
	t.Logf("lost %s after beta's Close", at.Sub(start))
	if at.After(last.Add(lease)) {
		t.Errorf("lost %s after beta's last refresh: not before its lease would have lapsed", at.Sub(last))
	}
	for _, ch := range []chan string{departed1, departed2} {
		if got := receive(t, ch, "OnDeparted"); got != "beta" {
			t.Errorf("OnDeparted(%q), want beta", got)
		}
	}

	// Watching it now: lost at once.
	lost2, lost2At := signal(t)
	a.Watch("beta", lost2)
	receive(t, lost2At, "lost of a departed instance")
}

// TestWatchDead: a watch on an instance that holds no lease fires at once, well
// before the next poll (a node of its own with a long lease, so polls are far
// apart).
func TestWatchDead(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	o := options(t, "alpha")
	o.Lease, o.Bucket = time.Minute, "slow"
	a, _ := join(t, srv, o)
	for _, name := range []string{"gamma", "", "a.b", "alpha.>"} {
		start := time.Now()
		lost, lostAt := signal(t)
		a.Watch(name, lost)
		select {
		case <-lostAt:
		case <-time.After(o.Lease / 10):
			t.Errorf("Watch(%q): lost not called within %s", name, o.Lease/10)
		}
		t.Logf("Watch(%q): lost after %s", name, time.Since(start))
	}
}

// TestWatchStop: a stopped watch never fires; another on the same instance does.
func TestWatchStop(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	var stopped atomic.Bool
	stop := a.Watch("beta", func() { stopped.Store(true) })
	lost, lostAt := signal(t)
	a.Watch("beta", lost)
	stop()
	stop()
	b.Close()
	receive(t, lostAt, "lost")
	a.Close() // waits for every lost it started
	if stopped.Load() {
		t.Error("a stopped watch fired")
	}
}

// TestWatchNotFired: no watch fires and nothing departs while every instance
// runs, over several polls.
func TestWatchNotFired(t *testing.T) {
	t.Parallel()
	a, b := pair(t)
	var fired atomic.Bool
	a.Watch("alpha", func() { fired.Store(true) })
	a.Watch("beta", func() { fired.Store(true) })
	a.OnDeparted(func(string) { fired.Store(true) })
	// Several polls (every steady/4), with both alive.
	ctx := ctxT(t)
	deadline := time.Now().Add(steady)
	for time.Now().Before(deadline) {
		if !a.Alive(ctx, "beta") || !b.Alive(ctx, "alpha") {
			t.Fatal("an instance is not alive")
		}
		time.Sleep(steady / 20)
	}
	a.Close()
	if fired.Load() {
		t.Error("a watch or OnDeparted fired while both instances were alive")
	}
}

// TestWatchRestart: a process that takes a departed one's name between two polls
// (here: at once after its Close) is a new incarnation: the old one is reported
// departed, the watches on the old one fire, and one on the new one does not.
func TestWatchRestart(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	oa, ob := options(t, "alpha"), options(t, "beta")
	oa.Lease, ob.Lease = 2*lease, 2*lease // polls 500ms apart
	a, _ := join(t, srv, oa)
	b, _ := join(t, srv, ob)
	lost, lostAt := signal(t)
	a.Watch("beta", lost)
	departed := make(chan string, 2)
	a.OnDeparted(func(instance string) { departed <- instance })

	b.Close()
	b2, _ := join(t, srv, ob)
	var fired atomic.Bool
	a.Watch("beta", func() { fired.Store(true) })

	receive(t, lostAt, "lost")
	if got := receive(t, departed, "OnDeparted"); got != "beta" {
		t.Errorf("OnDeparted(%q), want beta", got)
	}
	if !a.Alive(ctxT(t), b2.Self()) {
		t.Error("the new beta is not alive")
	}
	a.Close()
	if fired.Load() {
		t.Error("the watch on the new beta fired")
	}
}

// leases opens the lease bucket on nc, to read refreshes.
func leases(t *testing.T, nc *nats.Conn) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctxT(t), "mcp-resume-leases")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestCallsEndWhenInstanceDeparts: a Call, and a Deliver to an inbox, that the
// other instance took and never answered because it crashed, fail when its lease
// lapses (the poll that finds it gone), not at the caller's CallTimeout.
func TestCallsEndWhenInstanceDeparts(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	oa := options(t, "alpha")
	oa.CallTimeout = time.Minute // longer than patience: only the departure ends them
	a, _ := join(t, srv, oa)
	b, ncb := join(t, srv, options(t, "beta"))
	lost, lostAt := signal(t)
	a.Watch("beta", lost) // alpha knows beta's lease, as after any poll since beta joined

	took, release := make(chan struct{}, 2), make(chan struct{})
	b.Handle(func(context.Context, string, cluster.PeerCall) cluster.PeerReply {
		took <- struct{}{}
		<-release
		return cluster.PeerReply{}
	})
	inbox, closeInbox := b.Listen(func(resume.Message) error {
		took <- struct{}{}
		<-release
		return nil
	})
	defer closeInbox()
	defer close(release) // first: the stuck handler and deliver return as the test ends

	ended := make(chan error, 2)
	go func() {
		_, err := a.Call(context.Background(), "beta", cluster.PeerCall{Op: cluster.PeerAttach})
		ended <- err
	}()
	go func() { ended <- a.Deliver(context.Background(), inbox, resume.Message{Seq: 1, Data: []byte(`{}`)}) }()
	receive(t, took, "the call")
	receive(t, took, "the delivery")
	ncb.Close() // a crash: no reply goes back, and beta's lease stays until it lapses

	for range 2 {
		err := receive(t, ended, "the end of a call to the crashed instance")
		if err == nil || !strings.Contains(err.Error(), "departed") {
			t.Errorf("a call to the crashed instance ended with %v, want its departure", err)
		}
	}
	receive(t, lostAt, "the watch")
}
