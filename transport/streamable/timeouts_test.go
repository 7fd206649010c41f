package streamable_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/transport"
	"github.com/mcp-resume/mcp-resume/transport/streamable"
)

// A POST whose body stops arriving is answered 408 request_timeout at
// BodyTimeout and its connection closed. The deadline covers the body only:
// a call's event stream that outlives it carries the call to its result.
// (Driven by the server's real timers: net/http cannot run in a synctest
// bubble.)
func TestBodyTimeout(t *testing.T) {
	const bodyTimeout = 200 * time.Millisecond
	s := newServer(t, nil, &streamable.Options{BodyTimeout: bodyTimeout})
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
	if err := json.Unmarshal(b, &m); err != nil || resp.StatusCode != http.StatusRequestTimeout || m.Error.Data.Reason != string(transport.ReasonRequestTimeout) {
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
