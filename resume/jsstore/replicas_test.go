package jsstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
	"github.com/mcp-resume/mcp-resume/testkit/jstest"
)

// Options.Replicas on a cluster of three servers: a store opened without a
// count creates the stream and the bucket with one replica and afterwards
// leaves the count they have; one with a count scales both to it, up or down;
// a count the cluster cannot hold fails New with both counts named. On a
// single server, more than one replica fails.
func TestReplicas(t *testing.T) {
	c := jstest.StartCluster(t, 3)
	nc, err := nats.Connect(c.URLs(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(replicas, want int) {
		t.Helper()
		st, err := jsstore.New(ctx, js, &jsstore.Options{Replicas: replicas})
		if err != nil {
			t.Fatalf("Replicas %d: %v", replicas, err)
		}
		bucket, err := js.Stream(ctx, "KV_"+st.Bucket().Bucket())
		if err != nil {
			t.Fatal(err)
		}
		if s, b := st.Stream().CachedInfo().Config.Replicas, bucket.CachedInfo().Config.Replicas; s != want || b != want {
			t.Fatalf("Replicas %d: the stream has %d replicas, the bucket %d; want %d", replicas, s, b, want)
		}
	}
	open(0, 1)
	open(3, 3)
	open(0, 3) // kept
	open(1, 1) // scaled down
	open(3, 3)
	_, err = jsstore.New(ctx, js, &jsstore.Options{Replicas: 5})
	if err == nil || !strings.Contains(err.Error(), "stream MCP_RESUME: changing its replicas from 3 to 5") {
		t.Fatalf("5 replicas on 3 servers: %v; want an error naming both counts", err)
	}
	t.Log(err)

	srv, err := embedded.Start(&embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	single, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	sjs, err := jetstream.New(single)
	if err != nil {
		t.Fatal(err)
	}
	_, err = jsstore.New(ctx, sjs, &jsstore.Options{Replicas: 3})
	if err == nil || !strings.Contains(err.Error(), "creating it with 3 replicas") || !strings.Contains(err.Error(), "non-clustered") {
		t.Fatalf("3 replicas on a single server: %v", err)
	}
	t.Log(err)
}
