package jsstore

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcp-resume/mcp-resume/resume/jsstore/embedded"
)

// embeddedJS starts an embedded NATS server on a fresh directory and returns a
// JetStream client on it, for this package's own tests; both stop when t ends.
func embeddedJS(t testing.TB) jetstream.JetStream {
	t.Helper()
	srv, err := embedded.Start(&embedded.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
