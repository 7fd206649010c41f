package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/spec"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// A POST whose body stops arriving is answered 408 request_timeout at
// BodyTimeout and its connection closed. The deadline covers the body only:
// a call's event stream that outlives it carries the call to its result.
// (Driven by the server's real timers: net/http cannot run in a synctest
// bubble.)
func TestBodyTimeout(t *testing.T) {
	const bodyTimeout = 200 * time.Millisecond
	s := newServer(t, nil, &httptransport.Options{BodyTimeout: bodyTimeout})
	c, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // without the bound, the test fails here
	start := time.Now()
	fmt.Fprint(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a body that stopped: %v", err)
	}
	took := time.Since(start)
	var m struct {
		Error struct{ Data struct{ Reason string } }
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != http.StatusRequestTimeout || m.Error.Data.Reason != string(spec.ReasonRequestTimeout) {
		t.Fatalf("a body that stopped: %s %s, want 408 request_timeout", resp.Status, b)
	}
	if took < bodyTimeout {
		t.Fatalf("answered after %v, before the %v bound", took, bodyTimeout)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the connection stays open after the timeout (%v), want EOF", err)
	}

	// A call streaming for five times the bound gets every step and its result
	// on its one stream.
	rc := s.raw(t)
	rc.initialize(`{}`)
	call := rc.do(t.Context(), http.MethodPost, countdown("1", 1, 4))
	var progress int
	var result string
	for e := range events(call.Body) {
		if progressOf(e) >= 0 {
			progress++
		} else if m := e.msg(); m != nil && m["result"] != nil {
			result = e.data
		}
	}
	if progress != 4 || result == "" {
		t.Fatalf("a call streaming past the body timeout: %d progress, result %q; want 4 and the result", progress, result)
	}
}

// A session whose only open stream is its standalone GET stream ends when its
// client has sent nothing for SessionIdle, keepalive comments or not: the
// stream closes, the session is gone, and its resumable call, detached, runs
// on and answers getStatus from a new session. A client that keeps sending,
// or that has a request's stream open, keeps it.
func TestSessionIdleWithStream(t *testing.T) {
	const idle = 300 * time.Millisecond
	s := newServer(t, nil, &httptransport.Options{SessionIdle: idle, KeepAlive: 50 * time.Millisecond})
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{}}`)
	get := events(c.do(t.Context(), http.MethodGet, "").Body)
	open := func(what string) {
		t.Helper()
		select {
		case e, ok := <-get:
			if !ok {
				t.Fatalf("the GET stream ended %s", what)
			}
			t.Fatalf("an event on the GET stream: %+v", e)
		default:
		}
		if n := s.h.Sessions(); n != 1 {
			t.Fatalf("%d sessions %s, want 1", n, what)
		}
	}

	// A client that pings every third of SessionIdle, for three of them.
	tick := time.NewTicker(idle / 3)
	for range 9 {
		<-tick.C
		if resp, body := c.post(`{"jsonrpc":"2.0","id":"p","method":"ping"}`); resp.StatusCode != http.StatusOK {
			t.Fatalf("ping: %s %s", resp.Status, body)
		}
	}
	tick.Stop()
	open("while its client pinged")

	// A call's stream open: silent for over three SessionIdles, until its
	// first progress a second in.
	callCtx, drop := context.WithCancel(t.Context())
	defer drop()
	call := events(c.do(callCtx, http.MethodPost, countdown(`"c"`, 30, 30)).Body)
	next(t, call) // priming
	var pol e2etest.Msg
	if err := json.Unmarshal([]byte(next(t, call).data), &pol); err != nil {
		t.Fatal(err)
	}
	token := e2etest.PolicyOf(t, pol).ResumeToken
	for progressOf(next(t, call)) < 0 {
	}
	open("while a request's stream was open")

	// The call's stream dropped (not a request of the client): silent since
	// the call, the session ends.
	drop()
	select {
	case _, ok := <-get:
		if ok {
			t.Fatal("an event on the GET stream")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the GET stream of a silent session still open 10s after its last request stream ended")
	}
	if resp, body := c.post(`{"jsonrpc":"2.0","id":"p","method":"ping"}`); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, string(spec.ReasonUnknownSession)) {
		t.Fatalf("ping on the expired session: %s %s, want 404 unknown_session", resp.Status, body)
	}
	cl := e2etest.NewClient(t, s.dial(t))
	cl.Initialize(`{"resumableRequests":{}}`)
	if st, e := cl.GetStatus(`"s"`, `"c"`, token); e != nil || st.Status != "processing" {
		t.Fatalf("getStatus of the detached call: %+v %v, want processing", st, e)
	}
}
