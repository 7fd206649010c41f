package http_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// At the bound of sessions per address, a new session takes the place of the
// one used least recently that has no open stream; when every one has a stream,
// initialize is refused with 503 and too_many_sessions.
func TestSessionBounds(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{MaxSessionsPerAddress: 3})
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	open := func() *e2etest.Client {
		c := e2etest.NewClient(t, httptransport.Dial(s.url, &httptransport.ClientOptions{Client: hc}))
		c.Initialize(`{}`)
		return c
	}
	a, b, c := open(), open(), open()
	b.Quiet(`"q"`) // b and c used after a
	c.Quiet(`"q"`)
	d := open()
	if n := s.h.Sessions(); n != 3 {
		t.Fatalf("%d sessions, want 3", n)
	}
	a.Send(`{"jsonrpc":"2.0","id":"x","method":"ping"}`)
	if m, _ := a.Response(`"x"`); m.Error == nil || m.Error.Reason != spec.ReasonUnknownSession {
		t.Fatalf("the least recently used session answered %s, want unknown_session", m.Raw)
	}
	for _, cl := range []*e2etest.Client{b, c, d} {
		cl.Send(`{"jsonrpc":"2.0","id":"y","method":"ping"}`)
		if m, _ := cl.Response(`"y"`); m.Error != nil {
			t.Fatalf("a newer session: %s", m.Raw)
		}
	}

	// Every session with an open stream (a long call each): no room.
	for i, cl := range []*e2etest.Client{b, c, d} {
		cl.Send(`{"jsonrpc":"2.0","id":"long%d","method":"tools/call","params":{"name":"countdown","arguments":{"seconds":30,"steps":30},"_meta":{"progressToken":"p"}}}`, i)
	}
	poll.Until(t, 10*time.Second, "three calls running", func() bool { return s.core.Calls() == 3 })
	resp, err := hc.Post(s.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = io.Copy(&body, resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body.String(), string(spec.ReasonTooManySessions)) {
		t.Fatalf("initialize with every session in use: %s %s", resp.Status, body.String())
	}
}

// A session with no stream and no work (a client that initialized and went
// away) is parked after EmptySessionIdle: let go but for what its client may
// come back with. Its client's next request takes it up again, as it was (its
// resumable requests capability included); one with a request a stream
// reconnect could take up is not parked.
func TestEmptySessionParked(t *testing.T) {
	s := newServer(t, nil, &httptransport.Options{EmptySessionIdle: 50 * time.Millisecond, SessionIdle: time.Hour})
	empty := e2etest.NewClient(t, httptransport.Dial(s.url, nil))
	empty.Initialize(`{"resumableRequests":{}}`)
	busy := e2etest.NewClient(t, httptransport.Dial(s.url, nil))
	busy.Initialize(`{"resumableRequests":{}}`)
	busy.Send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":30,"steps":30},"_meta":{"progressToken":"p"}}}`)
	e2etest.PolicyOf(t, busy.Next())
	busy.Close() // its stream goes; the call runs on, reconnectable in the session
	poll.Until(t, 10*time.Second, "the empty session parked", func() bool { return s.h.Parked() == 1 })
	if s.h.Sessions() != 2 || s.core.Calls() != 1 {
		t.Fatalf("%d sessions (%d parked), %d calls; want 2 (1 parked) and the busy session's call", s.h.Sessions(), s.h.Parked(), s.core.Calls())
	}
	empty.Send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":0.1,"steps":1},"_meta":{"progressToken":"q"}}}`)
	resp, before := empty.Response("2")
	if e2etest.Text(resp) != "countdown done: 1 of 1 steps" || len(before) == 0 || before[0].Method != spec.MethodResumePolicy {
		t.Fatalf("the parked session taken up again: %s after %d messages, want the result after a resume policy", resp.Raw, len(before))
	}
	if s.h.Parked() != 0 {
		t.Fatalf("%d parked after the session was used again", s.h.Parked())
	}
}
