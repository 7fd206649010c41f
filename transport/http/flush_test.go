package http_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/logbuf"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// A call's first events (its priming event and policy) wait up to FirstFlush
// for company: a call that ends within it is answered in one write to the
// connection, its progress and all. With FirstFlush as short as Coalesce, a
// call's first events reach the client while it runs.
func TestFirstFlush(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		s, writes := newCountingServer(t, nil, &httptransport.Options{FirstFlush: time.Hour})
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
		// (mcp.Options.QuickCall, an hour here: however slow the machine, the
		// echo is quick).
		s, writes := newCountingServer(t, &mcp.Options{QuickCall: time.Hour}, &httptransport.Options{FirstFlush: time.Hour})
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
		// FirstFlush negative: the first events wait as long as Coalesce (an
		// hour here), not FirstFlush's default: the call is answered in one
		// write, its priming event, policy and progress with its result.
		s, writes := newCountingServer(t, nil, &httptransport.Options{FirstFlush: -1, Coalesce: time.Hour})
		c := s.raw(t)
		c.initialize(`{"resumableRequests":{}}`)
		before := writes.Load()
		resp := c.do(context.Background(), http.MethodPost, countdown("1", 0.05, 1))
		n := 0
		for range events(resp.Body) {
			n++
		}
		if n != 4 {
			t.Fatalf("%d events, want the priming event, policy, progress and result", n)
		}
		if n := writes.Load() - before; n != 1 {
			t.Fatalf("the call's answer took %d writes to the connection, want 1", n)
		}
	})
}

// newCountingServer is newServer with a count of the writes to its
// connections.
func newCountingServer(t *testing.T, opts *mcp.Options, hopts *httptransport.Options) (*server, *atomic.Int64) {
	writes := new(atomic.Int64)
	s := newServerOf(t, demo.Server("test"), opts, hopts, func(l net.Listener) net.Listener { return countingListener{l, writes} })
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

// The priming event names a request its client can reconnect to: a call still
// in its quick window (mcp.Options.QuickCall) when its stream's first flush
// comes is made resumable first, so a drop right after the priming event
// loses nothing and Last-Event-ID finds the call.
func TestPrimingNamesResumable(t *testing.T) {
	s := newServerOf(t, blockServer(nil), &mcp.Options{QuickCall: time.Hour}, nil, nil)
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{}}`)
	ctx, drop := context.WithCancel(context.Background())
	resp := c.do(ctx, http.MethodPost, `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"block"}}`)
	prime := priming(t, resp)
	drop()
	reconnects(t, c, prime.id)
}

// A call whose tool has not started when its stream's first flush comes (its
// worker busy elsewhere: held here by a hook that runs before the tool) gives
// its client no id to come back with yet: the call is not resumable until its
// tool's policy is applied, and a client that went away with the id would
// come back to nothing. The priming event goes out once the tool starts, and
// names the call.
func TestPrimingWaitsForTheTool(t *testing.T) {
	var logs logbuf.Buffer
	log := zerolog.New(&logs).Level(zerolog.DebugLevel)
	hooks := &mcpgoserver.Hooks{}
	start := make(chan struct{})
	var release sync.Once
	defer release.Do(func() { close(start) })
	hooks.AddBeforeCallTool(func(context.Context, any, *mcpgo.CallToolRequest) { <-start })
	s := newServerOf(t, blockServer(hooks), &mcp.Options{QuickCall: time.Hour, Logger: &log}, nil, nil)
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{}}`)
	ctx, drop := context.WithCancel(context.Background())
	defer drop()
	answered := goSend(ctx, c, `{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"block"}}`)
	var started response
	poll.Until(t, 10*time.Second, "the stream's first flush", func() bool {
		select {
		case started = <-answered:
			return true
		default:
			return strings.Contains(logs.String(), "priming event held")
		}
	})
	if started.err != nil {
		t.Fatal(started.err)
	}
	if started.resp != nil {
		t.Fatalf("the stream started (%s) before the call's tool did: a drop now would lose the call", started.resp.Header.Get("Content-Type"))
	}
	release.Do(func() { close(start) })
	prime := priming(t, receiveResponse(t, answered))
	drop()
	reconnects(t, c, prime.id)
}

// blockServer is an MCP server (with hooks, or nil) of one tool, block, which
// runs until its call is cancelled.
func blockServer(hooks *mcpgoserver.Hooks) *mcpgoserver.MCPServer {
	tools := mcpgoserver.NewMCPServer("test", "test", mcpgoserver.WithToolCapabilities(false), mcpgoserver.WithHooks(hooks))
	tools.AddTool(mcpgo.NewTool("block"), func(ctx context.Context, _ mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return tools
}

// response is what send gave.
type response struct {
	resp *http.Response
	err  error
}

// goSend posts body in a goroutine of its own and delivers what came.
func goSend(ctx context.Context, c *raw, body string) <-chan response {
	ch := make(chan response, 1)
	go func() {
		resp, err := c.send(ctx, http.MethodPost, body)
		ch <- response{resp, err}
	}()
	return ch
}

// receiveResponse waits for what goSend delivers, and fails t on an error or
// when nothing comes within 10 s.
func receiveResponse(t *testing.T, ch <-chan response) *http.Response {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.resp
	case <-time.After(10 * time.Second):
		t.Fatal("no response within 10s")
		return nil
	}
}

// priming returns resp's first event, which must be a priming event.
func priming(t *testing.T, resp *http.Response) event {
	t.Helper()
	prime := next(t, events(resp.Body))
	if prime.data != "" || prime.id == "" {
		t.Fatalf("first event %+v, want the priming event", prime)
	}
	return prime
}

// reconnects checks that Last-Event-ID id finds its request's stream.
func reconnects(t *testing.T, c *raw, id string) {
	t.Helper()
	again := c.do(context.Background(), http.MethodGet, "", httptransport.HeaderLastEventID+": "+id)
	defer again.Body.Close()
	if again.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(again.Body)
		t.Fatalf("reconnecting with the priming event's id %s: %s %s", id, again.Status, b)
	}
}
