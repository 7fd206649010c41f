package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/transport"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// streamCutter ends the response body of the first tools/call POST right
// after its first event that carries progress, as a dropped connection does;
// with refuseTakeUp, a GET with Last-Event-ID is answered 404 without
// reaching the server.
type streamCutter struct {
	base         http.RoundTripper
	refuseTakeUp bool
	cuts         atomic.Int32
}

func (c *streamCutter) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if c.refuseTakeUp && r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		return &http.Response{StatusCode: http.StatusNotFound, Status: "404 Not Found", Header: http.Header{},
			Body: io.NopCloser(bytes.NewReader(nil)), Request: r}, nil
	}
	resp, err := c.base.RoundTrip(r)
	if err != nil || !bytes.Contains(body, []byte(`"tools/call"`)) || !c.cuts.CompareAndSwap(0, 1) {
		return resp, err
	}
	resp.Body = &cutAfterProgress{ReadCloser: resp.Body}
	return resp, nil
}

// cutAfterProgress passes an SSE body on up to the end of the first event
// with "progress" in it, then ends as a dropped connection does.
type cutAfterProgress struct {
	io.ReadCloser
	buf  bytes.Buffer
	done bool
}

func (b *cutAfterProgress) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	if i := bytes.Index(b.buf.Bytes(), []byte(`"progress"`)); i >= 0 {
		if j := bytes.Index(b.buf.Bytes()[i:], []byte("\n\n")); j >= 0 {
			keep := n - (b.buf.Len() - (i + j + 2))
			b.done = true
			return keep, nil
		}
	}
	return n, err
}

// A call's event stream cut mid-call on a connection that reports the loss
// of one stream (ReportStreamLoss): the client takes the stream up with a GET
// carrying its last event id, or, when the server refuses that, resumes the
// call (requests/resume) on the same connection; either way every progress
// value once, the result, and no new connection.
func TestStreamLostOnLiveConnection(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprint("refuseTakeUp=", refuse), func(t *testing.T) {
			url, log := serveHTTP(t, demo.Server("test"), nil)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			cut := &streamCutter{base: tr, refuseTakeUp: refuse}
			hc := &http.Client{Transport: cut}
			c := connect(t, func(context.Context) (transport.Conn, error) {
				return httptransport.Dial(url, &httptransport.ClientOptions{Client: hc, ReportStreamLoss: true}), nil
			}, fastOpts())
			var progress []float64
			res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.4, "steps": 4}, &client.CallOptions{
				Progress: func(p client.Progress) { progress = append(progress, p.Progress) },
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := text(t, res); got != "countdown done: 4 of 4 steps" || fmt.Sprint(progress) != "[1 2 3 4]" {
				t.Fatalf("result %q, progress %v", got, progress)
			}
			if cut.cuts.Load() != 1 || c.Reconnects() != 0 {
				t.Fatalf("%d cuts, %d reconnects: want 1 and none", cut.cuts.Load(), c.Reconnects())
			}
			resumes := log.count("requests/resume")
			if takeUps := log.count("GET Last-Event-ID"); refuse && resumes != 1 || !refuse && (takeUps == 0 || resumes != 0) {
				t.Fatalf("%d take-ups reached the server, %d resumes", takeUps, resumes)
			}
		})
	}
}

// failFirstCall fails the first tools/call POST before it reaches the server,
// with err.
type failFirstCall struct {
	base   http.RoundTripper
	err    error
	failed atomic.Bool
}

func (f *failFirstCall) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) && f.failed.CompareAndSwap(false, true) {
			return nil, f.err
		}
	}
	return f.base.RoundTrip(r)
}

// A call to a plain server (no keys, no resumable requests) whose POST could
// not be made (no connection: the server never got it) is sent again on the
// next connection, and the tool runs once; one whose POST failed after it
// went out (the server may run it) fails with ErrNotResumable, as its outcome
// is unknown.
func TestUnsentSentAgain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		again bool
	}{
		{"not sent", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"maybe sent", io.ErrUnexpectedEOF, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			s := server.NewMCPServer("plain", "1", server.WithToolCapabilities(false))
			s.AddTool(mcpgo.NewTool("once"), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
				runs.Add(1)
				return mcpgo.NewToolResultText("ran"), nil
			})
			hs := httptest.NewServer(server.NewStreamableHTTPServer(s))
			t.Cleanup(hs.Close)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			hc := &http.Client{Transport: &failFirstCall{base: tr, err: tc.err}}
			var resent atomic.Int32
			c := connect(t, func(context.Context) (transport.Conn, error) {
				return httptransport.Dial(hs.URL+"/mcp", &httptransport.ClientOptions{Client: hc, FailOnStreamLoss: true}), nil
			}, fastOpts())
			res, err := c.CallTool(t.Context(), "once", nil, &client.CallOptions{Resent: func() { resent.Add(1) }})
			if !tc.again {
				if !errors.Is(err, client.ErrNotResumable) || runs.Load() != 0 {
					t.Fatalf("err %v, %d runs: want ErrNotResumable and none", err, runs.Load())
				}
				return
			}
			if err != nil || text(t, res) != "ran" || runs.Load() != 1 || resent.Load() != 1 || c.Reconnects() != 1 {
				t.Fatalf("err %v, %d runs, %d resent, %d reconnects: want the result, one run, sent again once on a new connection", err, runs.Load(), resent.Load(), c.Reconnects())
			}
		})
	}
}

// swapHandler serves the Streamable HTTP handler it holds now.
type swapHandler struct {
	mu sync.Mutex // guards h
	h  http.Handler
}

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// A server that restarted (without its data) no longer knows the client's
// session: it refuses the next call with unknown_session, without running
// it. The client drops the connection and sends the call again on a new one,
// in a new session.
func TestUnknownSessionSentAgain(t *testing.T) {
	sw := &swapHandler{}
	serve := func() {
		core, err := mcp.New(demo.Server("test"), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := httptransport.NewHandler(core, nil)
		t.Cleanup(func() {
			h.Close()
			core.Close()
		})
		sw.mu.Lock()
		sw.h = h
		sw.mu.Unlock()
	}
	serve()
	hs := httptest.NewServer(sw)
	t.Cleanup(hs.Close)
	c := connect(t, func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(hs.URL, &httptransport.ClientOptions{ReportStreamLoss: true}), nil
	}, fastOpts())
	if res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "first"}, nil); err != nil || text(t, res) != "first" {
		t.Fatalf("echo: %v %v", res, err)
	}
	serve() // the restart
	res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "after"}, nil)
	if err != nil || text(t, res) != "after" || c.Reconnects() != 1 {
		t.Fatalf("echo after the restart: %v %v, %d reconnects", res, err, c.Reconnects())
	}
}

// A server that is draining (its instance stopping) refuses a new call with
// shutting_down, without running it: the client drops the connection and
// sends the call again on a new one, which reaches another instance.
func TestShuttingDownSentAgain(t *testing.T) {
	var (
		urls  []string
		cores []*mcp.Server
	)
	for range 2 {
		core, err := mcp.New(demo.Server("test"), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := httptransport.NewHandler(core, nil)
		hs := httptest.NewServer(h)
		t.Cleanup(func() {
			hs.Close()
			h.Close()
			core.Close()
		})
		urls, cores = append(urls, hs.URL), append(cores, core)
	}
	var dials atomic.Int64
	c := connect(t, func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(urls[min(dials.Add(1)-1, 1)], &httptransport.ClientOptions{ReportStreamLoss: true}), nil
	}, fastOpts())
	cores[0].Drain()
	res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "elsewhere"}, nil)
	if err != nil || text(t, res) != "elsewhere" || c.Reconnects() != 1 {
		t.Fatalf("echo on a draining server: %v %v, %d reconnects; want the result from the other, after one reconnect", res, err, c.Reconnects())
	}
}

// A server that refuses every call so (draining, with no other instance to
// go to) is not asked again at once each time: the refusals do not count as
// a live connection, so the client backs off between its connections as it
// does between failed dials (it asked about 12 times a second before).
func TestRefusedCallsBackOff(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.Close()
		h.Close()
		core.Close()
	})
	c := connect(t, func(context.Context) (transport.Conn, error) {
		return httptransport.Dial(hs.URL, &httptransport.ClientOptions{ReportStreamLoss: true}), nil
	}, &client.Options{MinBackoff: 50 * time.Millisecond, MaxBackoff: 400 * time.Millisecond})
	core.Drain()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := c.CallTool(ctx, "echo", map[string]any{"text": "x"}, nil); err == nil {
		t.Fatal("a call on a server that refuses every one succeeded")
	}
	// Backing off (50 ms doubling to 400 ms, jittered): at most 2 s / 200 ms
	// and the first few; without: every 25-50 ms, 40 and more.
	if n := c.Reconnects(); n > 15 {
		t.Fatalf("%d connections in 2 s to a server that refuses every call; want the client to back off", n)
	}
}
