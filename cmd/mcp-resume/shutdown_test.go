package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	httptransport "github.com/mcp-resume/mcp-resume/transport/http"
	"github.com/mcp-resume/mcp-resume/transport/ws"
)

// SIGINT and SIGTERM each shut `serve` down gracefully while a call streams over
// Streamable HTTP, a GET stream is open and a WebSocket connection has a call in
// flight: every one of them is closed by the server, and the process exits 0
// promptly, not when the minute-long calls would have ended.
func TestGracefulShutdownHTTP(t *testing.T) {
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			l := spawnNet(t, "serve --http 127.0.0.1:0", 1)[0]
			ctx := t.Context()

			sid := shutdownInit(t, l.URL)
			post := shutdownRequest(t, l.URL, sid, http.MethodPost,
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":60}}}`)
			get := shutdownRequest(t, l.URL, sid, http.MethodGet, "")
			// The call runs once its policy has come.
			br := bufio.NewReader(post.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("the call's stream ended before its policy: %v", err)
				}
				if strings.Contains(line, "notifications/requests/resumePolicy") {
					break
				}
			}

			wc, err := ws.Dial(ctx, l.WS, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer wc.Close()
			for _, m := range []string{
				`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"countdown","arguments":{"seconds":60,"steps":60}}}`,
			} {
				if err := wc.Write(ctx, []byte(m)); err != nil {
					t.Fatal(err)
				}
			}
			if b, err := wc.Read(ctx); err != nil || !strings.Contains(string(b), `"id":0`) {
				t.Fatalf("WebSocket initialize: %s, %v", b, err)
			}

			// Each stream is read to its end from now on.
			ended := make(chan string, 3)
			readAll := func(name string, r io.Reader) {
				b, _ := io.ReadAll(r)
				ended <- name + ": " + string(b)
			}
			go readAll("the call's stream", br)
			go readAll("the GET stream", get.Body)
			go func() {
				var rest strings.Builder
				for {
					b, err := wc.Read(context.Background())
					if err != nil {
						ended <- "the WebSocket connection: " + rest.String()
						return
					}
					rest.Write(b)
				}
			}()

			exited := make(chan error, 1)
			go func() { exited <- l.Stop(sig) }()
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("serve after %v: %v, want exit status 0", sig, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("serve still running 30s after %v", sig)
			}
			for range 3 {
				select {
				case got := <-ended:
					if strings.Contains(got, `"result"`) {
						t.Errorf("%s: a result of a minute-long call arrived: %s", sig, got)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("a stream still open 10s after the server exited")
				}
			}
		})
	}
}

// shutdownInit opens a session on url for a client with the resume capability,
// and returns its id.
func shutdownInit(t *testing.T, url string) string {
	t.Helper()
	resp := shutdownRequest(t, url, "", http.MethodPost,
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"resumableRequests":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get(httptransport.HeaderSessionID)
	if sid == "" {
		t.Fatal("initialize: no session id")
	}
	resp = shutdownRequest(t, url, sid, http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	return sid
}

// shutdownRequest sends one Streamable HTTP request and returns its response,
// which must be a success; its body is closed at the end of the test.
func shutdownRequest(t *testing.T, url, sid, method, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if sid != "" {
		req.Header.Set(httptransport.HeaderSessionID, sid)
		req.Header.Set(httptransport.HeaderProtocolVersion, "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %s %s", method, body, resp.Status, b)
	}
	return resp
}
