package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// raw is a bare Streamable HTTP client for tests that look at HTTP itself:
// statuses, headers, event ids.
type raw struct {
	t       testing.TB
	url     string
	client  *http.Client
	session string
}

func (s *server) raw(t testing.TB) *raw { return &raw{t: t, url: s.url, client: s.srv.Client()} }

// do sends an HTTP request; hdr is "Name: value" pairs. The caller closes the body.
func (c *raw) do(ctx context.Context, method, body string, hdr ...string) *http.Response {
	c.t.Helper()
	resp, err := c.send(ctx, method, body, hdr...)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}

// send is do returning its error, for a goroutine other than the test's.
func (c *raw) send(ctx context.Context, method, body string, hdr ...string) (*http.Response, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url, rd)
	if err != nil {
		return nil, err
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	if c.session != "" {
		req.Header.Set(httptransport.HeaderSessionID, c.session)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return c.client.Do(req)
}

// post sends a message and returns the response with its body read.
func (c *raw) post(body string, hdr ...string) (*http.Response, string) {
	c.t.Helper()
	resp := c.do(context.Background(), http.MethodPost, body, hdr...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// initialize opens a session.
func (c *raw) initialize(caps string) {
	c.t.Helper()
	resp, body := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"raw","version":"1"}}}`)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	c.session = resp.Header.Get(httptransport.HeaderSessionID)
	if c.session == "" {
		c.t.Fatal("initialize: no Mcp-Session-Id")
	}
	if resp, body := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("initialized: %s %s", resp.Status, body)
	}
}

// event is one SSE event.
type event struct {
	id, data string
	retry    bool
}

// msg decodes the event's data.
func (e event) msg() map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(e.data), &m)
	return m
}

// events reads an SSE body into a channel, closed at the end of the body.
func events(body io.ReadCloser) <-chan event {
	ch := make(chan event, 1024)
	go func() {
		defer close(ch)
		defer body.Close()
		sc := bufio.NewScanner(body)
		var e event
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e.id != "" || data != nil {
					e.data = strings.Join(data, "\n")
					ch <- e
				}
				e, data = event{}, nil
			case strings.HasPrefix(line, "id: "):
				e.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "retry: "):
				e.retry = true
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			}
		}
	}()
	return ch
}

// next returns the next event, failing the test at the end of the stream or after
// a long timeout.
func next(t testing.TB, ch <-chan event) event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20s")
	}
	return event{}
}

// progressOf returns a progress notification's progress value, or -1.
func progressOf(e event) int {
	m := e.msg()
	if m["method"] != "notifications/progress" {
		return -1
	}
	p, _ := m["params"].(map[string]any)
	v, _ := p["progress"].(float64)
	return int(v)
}

func countdown(id string, seconds float64, steps int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":%v,"steps":%d},"_meta":{"progressToken":%s}}}`,
		id, seconds, steps, id)
}

// TestCancelOvertakesItsCall: a cancel POSTed before its call's POST is
// handled (each is a request of its own) ends the call as it comes: its POST
// is answered at once without a JSON-RPC response (a cancelled request gets
// none), and the countdown never runs.
func TestCancelOvertakesItsCall(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{}}`)
	if resp, body := c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the cancel: %s %s", resp.Status, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := c.do(ctx, http.MethodPost, countdown("7", 30, 3))
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("the cancelled call's POST did not end: %v", err)
	}
	if strings.Contains(string(body), `"id":7`) || strings.Contains(string(body), "notifications/progress") {
		t.Fatalf("the cancelled call's POST: %s %s", resp.Status, body)
	}
}

// TestCancelEndsItsCallsPOST: a call cancelled while it runs ends its POST's
// stream without a response, at once: the client that cancelled need not
// close it itself.
func TestCancelEndsItsCallsPOST(t *testing.T) {
	s := newServer(t, nil, nil)
	c := s.raw(t)
	c.initialize(`{}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp := c.do(ctx, http.MethodPost, countdown("8", 30, 30))
	ch := events(resp.Body)
	if e := next(t, ch); progressOf(e) != 1 && e.id == "" {
		t.Fatalf("first event %+v", e)
	}
	if resp, body := c.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":8}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the cancel: %s %s", resp.Status, body)
	}
	for e := range ch {
		if m := e.msg(); m["id"] != nil {
			t.Fatalf("the cancelled call answered: %s", e.data)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the cancelled call's stream did not end")
	}
}
