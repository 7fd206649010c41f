package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-resume/mcp-resume/mcp/client"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/faultproxy"
)

// methodLog records the methods of the JSON-RPC messages POSTed to a handler,
// and its GETs: "GET" for the standalone stream, "GET Last-Event-ID" for a
// stream taken up.
type methodLog struct {
	next http.Handler
	mu   sync.Mutex // guards seen
	seen map[string]int
}

func (l *methodLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		l.mu.Lock()
		l.seen[m.Method]++
		l.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	if r.Method == http.MethodGet {
		key := "GET"
		if r.Header.Get("Last-Event-ID") != "" {
			key += " Last-Event-ID"
		}
		l.mu.Lock()
		l.seen[key]++
		l.mu.Unlock()
	}
	l.next.ServeHTTP(w, r)
}

func (l *methodLog) count(method string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[method]
}

// mcp-go's own Streamable HTTP server offers no resumability: calls work,
// progress arrives, nothing is resumed, and a cut fails the call clearly.
func TestMCPGoStreamableHTTPServer(t *testing.T) {
	log := &methodLog{next: server.NewStreamableHTTPServer(demo.Server("plain")), seen: map[string]int{}}
	srv := httptest.NewServer(log)
	t.Cleanup(srv.Close)
	c := connect(t, httpDialer(t, srv.URL+"/mcp"), fastOpts())
	if c.Resumable() != nil {
		t.Fatalf("mcp-go advertised %+v", c.Resumable())
	}
	for range 5 {
		var progress []float64
		var policies int
		res, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 0.02, "steps": 3}, &client.CallOptions{
			Progress: func(p client.Progress) { progress = append(progress, p.Progress) },
			Policy:   func(client.Policy) { policies++ },
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := text(t, res); got != "countdown done: 3 of 3 steps" {
			t.Fatalf("result %q", got)
		}
		// mcp-go may write a tool's last notification after its response (then
		// it is lost): progress is in order and never repeated, not always all there.
		for i := 1; i < len(progress); i++ {
			if progress[i] <= progress[i-1] {
				t.Fatalf("progress %v", progress)
			}
		}
		if len(progress) > 3 || policies != 0 {
			t.Fatalf("progress %v, %d policies", progress, policies)
		}
	}
	res, err := c.CallTool(t.Context(), "echo", map[string]any{"text": "plain"}, nil)
	if err != nil || text(t, res) != "plain" {
		t.Fatalf("echo: %v %v", res, err)
	}
	if n := log.count("requests/resume") + log.count("requests/getStatus"); n != 0 {
		t.Fatalf("%d resume or getStatus requests sent to a plain server", n)
	}
	if c.Reconnects() != 0 {
		t.Fatalf("%d reconnects without a cut", c.Reconnects())
	}
}

// Through a cutting proxy, a call to the plain server fails with ErrNotResumable
// instead of hanging, and no resume is attempted.
func TestMCPGoServerCut(t *testing.T) {
	log := &methodLog{next: server.NewStreamableHTTPServer(demo.Server("plain")), seen: map[string]int{}}
	srv := httptest.NewServer(log)
	t.Cleanup(srv.Close)
	p := faultproxy.New(t, srv.Listener.Addr().String(), 1500, 1501)
	dial := httpDialer(t, "http://"+p.Addr()+"/mcp")
	var c *client.Client
	for attempt := 0; c == nil; attempt++ { // the first connection may be cut too
		var err error
		if c, err = client.Connect(t.Context(), dial, fastOpts()); err != nil && attempt > 50 {
			t.Fatalf("connect: %v", err)
		}
	}
	defer c.Close()
	_, err := c.CallTool(t.Context(), "countdown", map[string]any{"seconds": 2, "steps": 40}, nil)
	if !errors.Is(err, client.ErrNotResumable) {
		t.Fatalf("err %v, want ErrNotResumable", err)
	}
	if n := log.count("requests/resume"); n != 0 {
		t.Fatalf("%d resumes sent to a plain server", n)
	}
}
