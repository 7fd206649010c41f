package jstest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/mcp-resume/mcp-resume/testkit/jstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A three-server cluster takes an R3 stream; its leader moves where asked; once
// the leader's server is shut down, a client connected to it through the pool
// of every server's URL reconnects to another, the stream elects a new leader
// among the two left, and nothing acknowledged is lost.
func TestCluster(t *testing.T) {
	start := time.Now()
	c := jstest.StartCluster(t, 3)
	t.Logf("cluster ready in %v", time.Since(start).Round(time.Millisecond))
	nc, err := nats.Connect(c.URLs(1), nats.DontRandomize(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.ConnectedServerName() != c.Name(1) {
		t.Fatalf("connected to %s, want the pool's first, %s", nc.ConnectedServerName(), c.Name(1))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("stream replicas %d, want 3", r)
	}
	if got := c.Clients(t, 1, nc.Opts.Name); got == 0 {
		t.Fatalf("server n1 lists no client named %q", nc.Opts.Name)
	}
	c.MoveStreamLeader(t, nc, "S", 1)
	for i := range 10 {
		if _, err := js.Publish(ctx, "s.x", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	killed := time.Now()
	c.Shutdown(1)
	for i := 10; i < 20; i++ {
		// A publish sent on the connection to n1 as it went, or to the stream
		// between two leaders, gets no acknowledgement: each try has a short
		// timeout, and the message id makes a second copy a duplicate.
		for try := 0; ; try++ {
			tctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := js.Publish(tctx, "s.x", []byte{byte(i)}, jetstream.WithMsgID(fmt.Sprint(i)))
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("publishing message %d after n1 shut down: %v", i, err)
			}
		}
	}
	leader := c.WaitStreamLeader(t, "S")
	t.Logf("new leader %s, publishing again %v after the shutdown", c.Name(leader), time.Since(killed).Round(time.Millisecond))
	if leader == 1 || nc.ConnectedServerName() == c.Name(1) {
		t.Fatalf("leader %s, client on %s after n1 shut down", c.Name(leader), nc.ConnectedServerName())
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 20 {
		t.Fatalf("%d messages in the stream, want 20", info.State.Msgs)
	}
}
