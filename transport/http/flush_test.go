package http_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-resume/mcp-resume/internal/demo"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// A call's first events (its priming event and policy) wait up to FirstFlush
// for company: a call that ends within it is answered in one write to the
// connection, its progress and all. With FirstFlush as short as Coalesce, a
// call's first events reach the client while it runs.
func TestFirstFlush(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		s, writes := newCountingServer(t, &httptransport.Options{FirstFlush: time.Hour})
		c := s.raw(t)
		c.initialize(`{"resumableRequests":{}}`)
		before := writes.Load()
		// 50 ms, far past Coalesce (200 us): without the hold, its first
		// events would go out on their own.
		resp := c.do(context.Background(), http.MethodPost, countdown("1", 0.05, 1))
		var kinds []string
		for e := range events(resp.Body) {
			m := e.msg()
			switch {
			case e.data == "":
				kinds = append(kinds, "priming")
			case m["method"] != nil:
				kinds = append(kinds, m["method"].(string))
			case m["result"] != nil:
				kinds = append(kinds, "result")
			}
		}
		want := "[priming notifications/requests/resumePolicy notifications/progress result]"
		if got := fmt.Sprint(kinds); got != want {
			t.Fatalf("events %s, want %s", got, want)
		}
		if n := writes.Load() - before; n != 1 {
			t.Fatalf("the call's answer took %d writes to the connection, want 1", n)
		}
	})
	t.Run("quick", func(t *testing.T) {
		// A call answered before the stream's first flush, sending nothing
		// before: a JSON body, in one write, with no priming event or policy
		// (mcp.Options.QuickCall).
		s, writes := newCountingServer(t, &httptransport.Options{FirstFlush: time.Hour})
		c := s.raw(t)
		c.initialize(`{"resumableRequests":{}}`)
		before := writes.Load()
		resp := c.do(context.Background(), http.MethodPost, `{"jsonrpc":"2.0","id":"1","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" || !strings.Contains(string(body), `"text":"hi"`) {
			t.Fatalf("answered %s: %s, want the result as a JSON body", ct, body)
		}
		if n := writes.Load() - before; n != 1 {
			t.Fatalf("the call's answer took %d writes to the connection, want 1", n)
		}
	})
	t.Run("coalesce", func(t *testing.T) {
		s, _ := newCountingServer(t, &httptransport.Options{FirstFlush: -1})
		c := s.raw(t)
		c.initialize(`{"resumableRequests":{}}`)
		ctx, drop := context.WithCancel(context.Background())
		defer drop()
		resp := c.do(ctx, http.MethodPost, countdown("1", 60, 1)) // ends long after the test
		if e := next(t, events(resp.Body)); e.data != "" {
			t.Fatalf("first event %q, want the priming event", e.data)
		}
	})
}

// newCountingServer is newServer with a count of the writes to its
// connections.
func newCountingServer(t *testing.T, hopts *httptransport.Options) (*server, *atomic.Int64) {
	writes := new(atomic.Int64)
	s := newServerOf(t, demo.Server("test"), nil, hopts, func(l net.Listener) net.Listener { return countingListener{l, writes} })
	return s, writes
}

type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}
