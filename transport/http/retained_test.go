package http_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/mcp-resume/mcp-resume/mcp"
	"github.com/mcp-resume/mcp-resume/mcp/e2etest"
	"github.com/mcp-resume/mcp-resume/servers/demo"
	"github.com/mcp-resume/mcp-resume/testkit/poll"
	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// An answered call whose result the engine keeps (resumable, for
// --delivered-retention) keeps nothing of its HTTP exchange: the stream it was
// written to, which the request holds as its sink, lets go of the response
// writer, and with it of the request, its headers and net/http's buffers.
func TestAnsweredCallKeepsNoExchange(t *testing.T) {
	core, err := mcp.New(demo.Server("test"), &mcp.Options{QuickCall: -1}) // every echo kept, however quick
	if err != nil {
		t.Fatal(err)
	}
	h := httptransport.NewHandler(core, nil)
	var (
		mu    sync.Mutex
		calls []weak.Pointer[http.Request]
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			calls = append(calls, weak.Make(r))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		core.Close()
	})
	c := e2etest.NewClient(t, httptransport.Dial(srv.URL+"/mcp", &httptransport.ClientOptions{Client: srv.Client()}))
	c.Initialize(`{"resumableRequests":{}}`)
	const n = 20
	for i := range n {
		c.Send(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, i+1)
		if resp, _ := c.Response(fmt.Sprint(i + 1)); e2etest.Text(resp) != "hi" {
			t.Fatalf("call %d: %s", i+1, resp.Raw)
		}
	}
	if live := core.Engine().Live(); live < n {
		t.Fatalf("the engine holds %d requests, want the %d results kept", live, n)
	}
	// Each connection's server goroutine holds its last request until it sees
	// the connection closed: close them, and collect until it has.
	srv.Client().CloseIdleConnections()
	kept := func() int {
		runtime.GC()
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, p := range calls {
			if p.Value() != nil {
				n++
			}
		}
		return n
	}
	// The initialize's session may keep its own request.
	poll.Until(t, 10*time.Second, "the HTTP requests of the answered calls to be collectable", func() bool { return kept() <= 1 })
}

// BenchmarkAnsweredCallHeld: what the server holds for each call it answered
// while the results are kept (--delivered-retention): heap in use after a GC,
// per call, after b.N echo calls of a resumable client.
func BenchmarkAnsweredCallHeld(b *testing.B) {
	c := newBenchClient(b, benchTargets[0]) // ours-resume
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	id := 0
	for b.Loop() {
		id++
		c.call(b, id, `{"name":"echo","arguments":{"text":"hello"}}`, nil, nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(id), "held-B/call")
	b.ReportMetric(float64(int64(after.HeapObjects)-int64(before.HeapObjects))/float64(id), "held-objs/call")
}

// Nor does the session: the stream an answered call was written to, once it
// has closed, is let go while the call's result is kept (the session's entry
// for the request, by which its client finds it by id, keeps no stream).
func TestAnsweredCallKeepsNoStream(t *testing.T) {
	s := newServer(t, &mcp.Options{QuickCall: -1}, nil)
	c := s.raw(t)
	c.initialize(`{"resumableRequests":{},"elicitation":{}}`)
	resp := c.do(context.Background(), http.MethodPost, `{"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"ask","arguments":{"question":"Name?"}}}`)
	ch := events(resp.Body)
	var ask map[string]any
	for ask = next(t, ch).msg(); ask == nil || ask["method"] != "elicitation/create"; ask = next(t, ch).msg() {
	}
	streams := httptransport.OpenStreams(s.h) // the call's, while it waits for the answer
	if len(streams) != 1 {
		t.Fatalf("%d streams open, want the call's", len(streams))
	}
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"Ada"}}}`, mustJSON(ask["id"]))
	if r, body := c.post(answer); r.StatusCode != http.StatusAccepted {
		t.Fatalf("posting the answer: %s %s", r.Status, body)
	}
	for e := range ch {
		if m := e.msg(); m["result"] != nil && !strings.Contains(e.data, "Ada") {
			t.Fatalf("the tool did not get the answer: %s", e.data)
		}
	}
	if live := s.core.Engine().Live(); live != 1 {
		t.Fatalf("the engine holds %d requests, want the result kept", live)
	}
	poll.Until(t, 10*time.Second, "the answered call's stream to be collectable", func() bool {
		runtime.GC()
		return streams[0].Value() == nil
	})
	if live := s.core.Engine().Live(); live != 1 {
		t.Fatalf("the engine holds %d requests, want the result still kept", live)
	}
}
