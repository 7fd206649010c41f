package http_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
)

// A request that asks for a keepalive on its stream (HeaderKeepAlive) gets it
// when it is shorter than the server's own, down to MinKeepAlive, and the
// stream's answer announces it; a longer ask, or one that is no number,
// leaves the server's. The stream of a call asking 1 s carries a comment
// every second while it is quiet.
func TestKeepAliveAsked(t *testing.T) {
	s := newServer(t, nil, nil) // KeepAlive: the default, 20 s
	c := s.raw(t)
	c.initialize(`{}`)
	for i, tc := range []struct{ ask, want string }{
		{"", "20"},
		{"5", "5"},
		{"2.5", "2.5"},
		{"0.2", "1"},
		{"30", "20"},
		{"0", "20"},
		{"-1", "20"},
		{"NaN", "20"},
		{"1e400", "20"},
		{"soon", "20"},
	} {
		var hdr []string
		if tc.ask != "" {
			hdr = []string{httptransport.HeaderKeepAlive + ": " + tc.ask}
		}
		resp, _ := c.post(countdown(strings.Repeat("1", i+1), 0.05, 1), hdr...)
		if got := resp.Header.Get(httptransport.HeaderKeepAlive); got != tc.want {
			t.Errorf("a call asking %q: the stream announces a keepalive of %q s, want %q", tc.ask, got, tc.want)
		}
	}
	// One step of 2.3 s: the stream is quiet that long between its priming
	// event and its progress.
	resp := c.do(context.Background(), http.MethodPost, countdown("99", 2.3, 1), httptransport.HeaderKeepAlive+": 1")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), ": keepalive\n\n"); n != 2 || !strings.Contains(string(body), `"result"`) {
		t.Errorf("%d keepalive comments in a stream quiet for 2.3 s that asked for 1 s; want 2, then the result:\n%s", n, body)
	}
}

// A ClientConn that watches for silence (FailOnStreamLoss, ReportStreamLoss)
// asks for ClientKeepAlive on its requests' streams: every POST, and a GET
// that takes a request's stream up; the session's GET stream asks none (it
// keeps the server's keepalive: it carries no request's answer, and a quiet
// client costs the least). KeepAlive sets what it asks; a client that does
// not watch, or whose Silence is its own, asks none.
func TestClientAsksKeepAlive(t *testing.T) {
	type seen struct{ method, lastEventID, ask string }
	var mu sync.Mutex
	var got []seen
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.Header.Get(httptransport.HeaderLastEventID), r.Header.Get(httptransport.HeaderKeepAlive)})
		mu.Unlock()
		w.Header().Set(httptransport.HeaderSessionID, "s")
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // an event stream, open until the client leaves
	}))
	t.Cleanup(hs.Close)
	for _, tc := range []struct {
		name string
		opts httptransport.ClientOptions
		want string
	}{
		{"fail on loss", httptransport.ClientOptions{FailOnStreamLoss: true}, "5"},
		{"report loss", httptransport.ClientOptions{ReportStreamLoss: true}, "5"},
		{"asks 2s", httptransport.ClientOptions{ReportStreamLoss: true, KeepAlive: 2 * time.Second}, "2"},
		{"asks none", httptransport.ClientOptions{FailOnStreamLoss: true, KeepAlive: -1}, ""},
		{"its own silence", httptransport.ClientOptions{FailOnStreamLoss: true, Silence: time.Minute}, ""},
		{"does not watch", httptransport.ClientOptions{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = nil
			mu.Unlock()
			o := tc.opts
			o.Client = hs.Client()
			c := httptransport.Dial(hs.URL, &o)
			if err := c.Write(t.Context(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)); err != nil {
				t.Fatal(err)
			}
			if err := c.Listen(t.Context()); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Get("1.0"); err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
			mu.Lock()
			defer mu.Unlock()
			want := []seen{{"POST", "", tc.want}, {"GET", "", ""}, {"GET", "1.0", tc.want}}
			if len(got) != len(want) {
				t.Fatalf("requests %+v, want %+v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("request %d: %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}
