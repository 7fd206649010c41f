package jstest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume/jsstore"
	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
)

// Start starts the server (syncing every message with syncAlways), connects to
// it with opts, and returns a store on it with the server and the connection:
// the binary's store (DeferRecords and DeliveredInMemory unless syncAlways).
// Everything stops when tb ends.
func Start(tb testing.TB, syncAlways bool, opts ...nats.Option) (*jsstore.Store, *embedded.Server, *nats.Conn) {
	tb.Helper()
	return StartWith(tb, syncAlways, jsstore.Options{DeferRecords: !syncAlways, DeliveredInMemory: !syncAlways}, opts...)
}

// StartWith is Start with the store's options so.
func StartWith(tb testing.TB, syncAlways bool, so jsstore.Options, opts ...nats.Option) (*jsstore.Store, *embedded.Server, *nats.Conn) {
	tb.Helper()
	srv, err := embedded.Start(&embedded.Options{Dir: tb.TempDir(), SyncAlways: syncAlways})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Shutdown)
	nc, err := srv.Connect(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := jsstore.New(context.Background(), js, &so)
	if err != nil {
		tb.Fatal(err)
	}
	return st, srv, nc
}
