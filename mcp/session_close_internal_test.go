package mcp

import (
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/transport"
)

// An ended session lets its notification channel go (64 notifications deep):
// the calls that outlive it keep the session, and one detached call on a
// connection of its own would keep the channel with it.
func TestShutdownDropsSessionChannel(t *testing.T) {
	s, err := New(server.NewMCPServer("test", "1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client, srv := transport.Pipe()
	defer client.Close()
	c := newConnState(s, newConnStream(srv), false, nil)
	if c.sess.channel() == nil || c.sess.NotificationChannel() == nil {
		t.Fatal("a session with a default stream has no notification channel")
	}
	c.shutdown(false)
	if c.sess.ch.Load() != nil || c.sess.NotificationChannel() != nil {
		t.Error("the ended session keeps its notification channel")
	}
}
